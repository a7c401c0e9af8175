#!/usr/bin/env bash
# Training beside a noisy neighbour: `ringbench train` (1 rank) quiet, beside a busy loop pinned
# to the last CPU, and beside `stress-ng --cpu <CPUs>` (one unpinned hog per CPU), with the default
# thread count (--threads 0: auto, which beside a busy CPU also computes the weight gradients on a
# second thread there), with auto but that second thread off (--weight-grad-thread off: auto as it
# was before it), with one thread (--threads 1: what one core gives, quiet and shared) and with
# every CPU (--threads <CPUs>, what the default was before auto), interleaved REPEATS times so
# that drift hits every condition alike. The hog starts before ringbench, as on a shared server.
# Writes raw JSON and table.md: median img/s, spread, each condition's share of the quiet median
# of the same setting, how many CPUs the rank kept busy (its CPU time / wall time: the share the
# kernel gave it) and img/s per busy CPU (how well it used that share).
#   bench/noisy_neighbour.sh [OUT_DIR]   (env: MODELS, BATCH, IMAGE_SIZE, STEPS, WARMUP, REPEATS, BIN)
set -euo pipefail
out=${1:-results/noisy-neighbour-cpu}
bin=${BIN:-build/runner/ringbench}
models=${MODELS:-"lenet mobilenet_v1"}
batch=${BATCH:-8}
steps=${STEPS:-30}
warmup=${WARMUP:-5}
repeats=${REPEATS:-5}
cpus=$(nproc)
command -v stress-ng >/dev/null || { echo "noisy_neighbour: needs stress-ng (apt-get install stress-ng)" >&2; exit 1; }
[ -x "$bin" ] || { echo "noisy_neighbour: no $bin (build first, or BIN=...)" >&2; exit 1; }
# A table over runs of two invocations would mix settings; results already there stay as they are.
if [ -n "$(ls -A "$out/raw" 2>/dev/null)" ]; then
  echo "noisy_neighbour: $out/raw already holds runs: choose another OUT_DIR" >&2
  exit 1
fi
mkdir -p "$out/raw"
hog=""
stop_hog() { if [ -n "$hog" ]; then kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true; fi; hog=""; }
trap stop_hog EXIT
start_hog() {  # CONDITION
  case $1 in
    quiet) ;;
    pinned) taskset -c $((cpus - 1)) sh -c 'while :; do :; done' & hog=$! ;;
    hogs) stress-ng --cpu "$cpus" --quiet & hog=$! ;;
  esac
  sleep 1  # the hog is running before ringbench looks at the CPUs
}
for rep in $(seq 1 "$repeats"); do
  for model in $models; do
    size=""; [ "$model" = mobilenet_v1 ] && size="--image-size ${IMAGE_SIZE:-96}"
    for cond in quiet pinned hogs; do
      start_hog "$cond"
      settings="0 0off 1"; [ "$cpus" -gt 1 ] && settings="$settings $cpus"
      for setting in $settings; do
        threads=${setting%off}
        wg=auto; [ "$setting" = 0off ] && wg=off
        f="$out/raw/${model}_${cond}_t${setting}_r${rep}.json"
        # shellcheck disable=SC2086
        "$bin" train --model "$model" --batch "$batch" $size --steps "$steps" --warmup "$warmup" \
          --threads "$threads" --weight-grad-thread "$wg" --log-every 0 --json "$f" >/dev/null
        echo "$model $cond threads=$threads weight-grad-thread=$wg repeat $rep: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["meta"]; print(round(d["summary"]["total_img_s"]["mean"],1), "img/s with", m["threads_per_rank"], "threads" + (" + weight gradients beside" if m.get("weight_grad_thread") else ""), "keeping", round(d["summary"]["cpus_busy_per_rank"],2), "CPUs busy")' "$f")"
      done
      stop_hog
    done
  done
done
python3 "$(dirname "$0")/summarize_noisy.py" "$out/raw" "$cpus" > "$out/table.md"
cat "$out/table.md"
