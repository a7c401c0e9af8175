#!/usr/bin/env bash
# The libFuzzer targets of fuzz/: builds them with clang (ASan+UBSan, a tree of its own) and runs
# each for a bounded time over its checked-in corpus (fuzz/corpus/TARGET/; what a run finds goes
# to a copy, never into the checkout), all at once. Prints one line per target with its
# executions; exits nonzero when one crashed, leaving the input in BUILD/artifacts/.
# Usage: scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--build-only | --run-only] [TARGET...]
# Defaults: 60 s (env RINGBENCH_FUZZ_SECONDS), build-fuzz/, every target, seed 1 (env
# RINGBENCH_FUZZ_SEED; 0: a new one each run). With a fixed seed CI mutates the same way each run
# (how far it gets depends on the machine), so a red fuzz pass is reproducible; explore with 0.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${RINGBENCH_FUZZ_SECONDS:-60} seed=${RINGBENCH_FUZZ_SEED:-1} dir=$root/build-fuzz mode=both targets=()
all=(store_protocol_fuzz tcp_transport_fuzz sweep_config_fuzz raw_jsonl_fuzz sweep_messages_fuzz verbs_wire_fuzz migration_stream_fuzz
     checkpoint_fuzz image_set_fuzz remote_request_fuzz remote_decode_fuzz remote_reply_fuzz remote_link_fuzz whatif_fuzz algo_table_fuzz
     allreduce_rows_fuzz)
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --build-dir) dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --build-only) mode=build; shift ;;
    --run-only) mode=run; shift ;;
    --targets) echo "${all[*]}"; exit 0 ;;  # for scripts/test.sh
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [[ " ${all[*]} " == *" $1 "* ]] || { echo "scripts/fuzz.sh: no fuzz target '$1' (${all[*]})" >&2; exit 2; }
       targets+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "scripts/fuzz.sh: --seconds '$seconds' is not a positive integer" >&2; exit 2; }
[[ $seed =~ ^[0-9]+$ ]] || { echo "scripts/fuzz.sh: RINGBENCH_FUZZ_SEED '$seed' is not a number" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

if [ $mode != run ]; then
  command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }
  "$root/scripts/build.sh" --configure-only "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DRINGBENCH_FUZZ=ON -DRINGBENCH_BUILD_BENCH=OFF -DRINGBENCH_BUILD_TESTS=OFF -DRINGBENCH_WITH_CUDA=OFF \
    -DRINGBENCH_WITH_VERBS=OFF -DRINGBENCH_WITH_DNNL=OFF -DRINGBENCH_PCH=ON || exit 1
  "$root/scripts/build.sh" --build-only "$dir" "${targets[@]}" || exit 1
fi
[ $mode = build ] && exit 0

work=$(mktemp -d /tmp/ringbench-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/artifacts"
# -timeout: a unit's wall time before libFuzzer calls it a hang. 120 s, not less: CI runs this
# at nice 10 beside the tests, and remote_request_fuzz's largest seed (a reference-backend conv
# backward, 3.4 s alone) once took over 26 s there, starved by the TSan tests.
run_one() {  # TARGET: runs it; its log is $work/TARGET.log
  local t=$1
  mkdir -p "$work/$t.corpus"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$dir/fuzz/$t" -seed="$seed" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t-" "$work/$t.corpus" "$root/fuzz/corpus/$t" >"$work/$t.log" 2>&1
}
rc=0
for t in "${targets[@]}"; do run_one "$t" & done  # all at once: the bound is wall time
wait
printf '%-22s %10s %8s %7s  %s\n' target seconds execs exec/s result
for t in "${targets[@]}"; do
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
  crash=$(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY: |.*deadly signal|ERROR: libFuzzer)' "$work/$t.log")
  if [ -n "$crash" ] || [ -z "$execs" ]; then
    result="CRASHED: ${crash:-no final stats}"
    rc=1
    echo "== $t: the end of its log ==" >&2
    tail -40 "$work/$t.log" >&2
  else
    result="no crash"
  fi
  printf '%-22s %10s %8s %7s  %s\n' "$t" "$seconds" "${execs:-?}" "$(( ${execs:-0} / seconds ))" "$result"
done
exit $rc
