#!/usr/bin/env bash
# How much of the gradient allreduce hides behind backward: `ringbench train` at 2 and 4 local
# ranks, with overlap (the default) and with --no-overlap side by side, REPEATS times each,
# interleaved so machine noise hits both alike. Writes raw JSON and a summary table.
#   bench/train_overlap.sh [OUT_DIR]   (env: MODELS, RANKS, BATCH, STEPS, WARMUP, REPEATS, BIN)
set -euo pipefail
out=${1:-results/train-overlap-cpu}
bin=${BIN:-build/runner/ringbench}
models=${MODELS:-"mobilenet_v1 inception_v3"}
ranks=${RANKS:-"2 4"}
batch=${BATCH:-8}
steps=${STEPS:-8}
warmup=${WARMUP:-2}
repeats=${REPEATS:-3}
mkdir -p "$out/raw"
for rep in $(seq 1 "$repeats"); do
  for model in $models; do
    for n in $ranks; do
      for mode in overlap no-overlap; do
        flag=""; [ "$mode" = no-overlap ] && flag="--no-overlap"
        f="$out/raw/${model}_n${n}_${mode}_r${rep}.json"
        echo "== $model n=$n $mode repeat $rep"
        "$bin" train --model "$model" --batch "$batch" --steps "$steps" --warmup "$warmup" \
          --ranks "$n" --log-every 0 $flag --json "$f" | grep -E "Img/sec|Total|hidden" || true
      done
    done
  done
done
python3 "$(dirname "$0")/summarize_train_overlap.py" "$out/raw" > "$out/table.md"
cat "$out/table.md"
