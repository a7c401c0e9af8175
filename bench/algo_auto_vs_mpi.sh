#!/usr/bin/env bash
# `allreduce --algo auto` (ours, TCP ring transport) vs Open MPI's MPI_Allreduce over its tcp btl,
# side by side on loopback, N = 2 and 4, 64 KiB to 64 MiB in steps of 2x. Both run under mpirun
# with the same binary, alternating within each repeat, so machine noise hits both alike;
# bench/summarize_algo_auto.py gives every run's busbw beside Open MPI's and the worst ratio.
#
#   bench/algo_auto_vs_mpi.sh OUTDIR [extra allreduce options for ours]
# With TABLE=FILE a third arm runs `--algo auto --algo-table FILE` (raw/table-*) beside the
# built-in rule (raw/auto-*) and Open MPI (raw/mpi-*). ARMS="auto mpi mpi2" picks the arms: mpi2 is a
# second, identical Open MPI run, the control that shows how far the machine alone moves a ratio.
# Environment: REPEATS (3), ITERS (20), WARMUP (3), NPROCS ("2 4"), MINBYTES (64K), MAXBYTES (64M),
# LINK (unset: loopback; a tc rate such as 1gbit: an emulated cluster, bench/bench_net.sh),
# PER_SIZE (0). PER_SIZE=1 runs every size as its own short run, the arms back to back per size
# (their order flipped each repeat, raw/<arm>-nN-rR-sBYTES.json): this VM's loopback changes speed
# for seconds at a time (bench/loopback_modes.py), and arms seconds apart share more of a mode
# than whole sweeps a minute apart.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/runner/ringbench}
out=${1:?usage: bench/algo_auto_vs_mpi.sh OUTDIR [allreduce options for ours]}
shift
repeats=${REPEATS:-3}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
nprocs=${NPROCS:-"2 4"}
[ -x "$bin" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
mkdir -p "$out/raw"
source "$root/bench/bench_net.sh"
bench_net_setup "$bin" "$(printf '%s\n' $nprocs | sort -n | tail -1)" "$out"
sizes=(-b "${MINBYTES:-64K}" -e "${MAXBYTES:-64M}" -f 2)
run_arm() {  # run_arm IMPL N REP FILE SIZE-OPTIONS...
  local impl=$1 n=$2 rep=$3 f=$4
  shift 4
  local ours
  echo "== repeat $rep: N=$n $impl $*; $(uptime)" | tee -a "$out/uptime.log" >&2
  case $impl in
    auto) ours=(--impl ring --algo auto "${BENCH_IFACE[@]}" "${extra[@]}") ;;
    table) ours=(--impl ring --algo auto --algo-table "$TABLE" "${BENCH_IFACE[@]}" "${extra[@]}") ;;
    mpi | mpi2) ours=(--impl mpi "${BENCH_IFACE[@]}") ;;  # the iface: where the job's store listens
  esac
  "${BENCH_LAUNCH[@]}" mpirun -np "$n" "${BENCH_MCA[@]}" $(bench_hosts "$n") "$bin" allreduce "${ours[@]}" "$@" \
    -n "$iters" -w "$warmup" -c 1 --json "$f" >"${f%.json}.txt"
}
extra=("$@")
arms=(${ARMS:-auto ${TABLE:+table} mpi})
for rep in $(seq 1 "$repeats"); do
  for n in $nprocs; do
    if [ "${PER_SIZE:-0}" = 1 ]; then
      order=("${arms[@]}")
      ((rep % 2)) || order=($(printf '%s\n' "${arms[@]}" | tac))
      b=$(numfmt --from=iec "${MINBYTES:-64K}")
      e=$(numfmt --from=iec "${MAXBYTES:-64M}")
      for ((size = b; size <= e; size *= 2)); do
        for impl in "${order[@]}"; do
          run_arm "$impl" "$n" "$rep" "$out/raw/$impl-n$n-r$rep-s$size.json" -b "$size" -e "$size"
        done
      done
    else
      for impl in "${arms[@]}"; do
        run_arm "$impl" "$n" "$rep" "$out/raw/$impl-n$n-r$rep.json" "${sizes[@]}"
      done
    fi
  done
done
