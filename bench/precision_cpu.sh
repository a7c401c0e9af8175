#!/usr/bin/env bash
# ringbench train in fp32 against bf16 (--precision, issue 39) on this CPU, side by side: one
# rank, THREADS threads, each model at SIZE px and batch BATCH, the two precisions alternating
# within each of ROUNDS rounds. Writes OUT/raw/*.json and prints, per model, the median img/s
# of each precision and the median of the per-round ratios bf16 / fp32, with their ranges.
#   bench/precision_cpu.sh OUT [ringbench binary]
# env: MODELS (inception_v3 mobilenet_v1), SIZE (128), BATCH (16), THREADS (2), ROUNDS (5),
#      STEPS (8), WARMUP (2)
set -euo pipefail
out=${1:?usage: bench/precision_cpu.sh OUT [ringbench binary]}
bin=${2:-build/runner/ringbench}
models=${MODELS:-inception_v3 mobilenet_v1} size=${SIZE:-128} batch=${BATCH:-16} threads=${THREADS:-2}
rounds=${ROUNDS:-5} steps=${STEPS:-8} warmup=${WARMUP:-2}
mkdir -p "$out/raw"
[ -z "$(ls -A "$out/raw")" ] || { echo "bench/precision_cpu.sh: $out/raw already holds runs" >&2; exit 2; }
for r in $(seq 1 "$rounds"); do
  for m in $models; do
    order="fp32 bf16"; [ $((r % 2)) = 0 ] && order="bf16 fp32"
    for p in $order; do
      echo "round $r: $m $p" >&2
      OMP_WAIT_POLICY=passive "$bin" train --model "$m" --image-size "$size" --batch "$batch" --threads "$threads" \
        --steps "$steps" --warmup "$warmup" --log-every 0 --precision "$p" --json "$out/raw/${m}_${p}_r$r.json" \
        > "$out/raw/${m}_${p}_r$r.log" 2>&1
    done
  done
done
python3 - "$out/raw" $models <<'PY'
import json, os, statistics, sys
raw, models = sys.argv[1], sys.argv[2:]
def img_s(m, p, r):
    path = os.path.join(raw, f"{m}_{p}_r{r}.json")
    return statistics.median(json.load(open(path))["ranks"][0]["img_s"]) if os.path.exists(path) else None
rounds = sorted({int(f.split("_r")[-1].split(".")[0]) for f in os.listdir(raw) if f.endswith(".json")})
print("| model | fp32 img/s | bf16 img/s | bf16 / fp32 (per round) |\n|---|---|---|---|")
for m in models:
    f = [img_s(m, "fp32", r) for r in rounds]; b = [img_s(m, "bf16", r) for r in rounds]
    ratio = [y / x for x, y in zip(f, b) if x and y]
    cell = lambda v, fmt="{:.1f}": f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"
    print(f"| {m} | {cell([x for x in f if x])} | {cell([y for y in b if y])} | {cell(ratio, '{:.2f}')} |")
PY
