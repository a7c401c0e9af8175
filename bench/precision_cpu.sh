#!/usr/bin/env bash
# ringbench train in fp32 against bf16 (--precision, issue 39) on this CPU, side by side: one
# rank, THREADS threads, each model at SIZE px and batch BATCH, the two precisions alternating
# within each of ROUNDS rounds. Writes OUT/raw/*.json and prints, per model, the median img/s
# of each precision and the median of the per-round ratios bf16 / fp32, with their ranges.
#   bench/precision_cpu.sh OUT [ringbench binary]
#   bench/precision_cpu.sh OUT LABEL=BINARY LABEL=BINARY ...   (before/after: every binary's fp32
#     and bf16 runs alternate within each round, their order rotating; raw files LABEL_MODEL_...;
#     the table has a row per label and model, and the per-round ratios of each label's img/s to
#     the first label's)
# env: MODELS (inception_v3 mobilenet_v1), SIZE (128), BATCH (16), THREADS (2), ROUNDS (5),
#      STEPS (8), WARMUP (2)
set -euo pipefail
out=${1:?usage: bench/precision_cpu.sh OUT [ringbench binary | LABEL=BINARY ...]}
shift
arms=("${@:-build/runner/ringbench}")
models=${MODELS:-inception_v3 mobilenet_v1} size=${SIZE:-128} batch=${BATCH:-16} threads=${THREADS:-2}
rounds=${ROUNDS:-5} steps=${STEPS:-8} warmup=${WARMUP:-2}
mkdir -p "$out/raw"
[ -z "$(ls -A "$out/raw")" ] || { echo "bench/precision_cpu.sh: $out/raw already holds runs" >&2; exit 2; }
labels=()
for a in "${arms[@]}"; do
  case "$a" in *=*) labels+=("${a%%=*}") ;; *) labels+=("") ;; esac
done
for r in $(seq 1 "$rounds"); do
  for m in $models; do
    runs=()
    for i in "${!arms[@]}"; do for p in fp32 bf16; do runs+=("$i:$p"); done; done
    n=${#runs[@]}
    for k in $(seq 0 $((n - 1))); do  # the order rotates by one each round
      run=${runs[$(((k + r - 1) % n))]}
      i=${run%%:*} p=${run##*:} a=${arms[$i]} label=${labels[$i]}
      bin=${a#*=} prefix=${label:+${label}_}
      echo "round $r: ${label:+$label }$m $p" >&2
      OMP_WAIT_POLICY=passive "$bin" train --model "$m" --image-size "$size" --batch "$batch" --threads "$threads" \
        --steps "$steps" --warmup "$warmup" --log-every 0 --precision "$p" --json "$out/raw/${prefix}${m}_${p}_r$r.json" \
        > "$out/raw/${prefix}${m}_${p}_r$r.log" 2>&1
    done
  done
done
python3 - "$out/raw" "$rounds" "${labels[*]:-}" $models <<'PY'
import json, os, statistics, sys
raw, rounds, labels, models = sys.argv[1], int(sys.argv[2]), sys.argv[3].split() or [""], sys.argv[4:]
def img_s(l, m, p, r):
    path = os.path.join(raw, f"{l + '_' if l else ''}{m}_{p}_r{r}.json")
    return statistics.median(json.load(open(path))["ranks"][0]["img_s"]) if os.path.exists(path) else None
cell = lambda v, fmt="{:.1f}": f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})" if v else "-"
rs = range(1, rounds + 1)
head = "| model |" + (" binary |" if labels[0] else "") + " fp32 img/s | bf16 img/s | bf16 / fp32 (per round) |"
print(head + "\n" + "|---" * (head.count("|") - 1) + "|")
for m in models:
    for l in labels:
        f = [img_s(l, m, "fp32", r) for r in rs]; b = [img_s(l, m, "bf16", r) for r in rs]
        ratio = [y / x for x, y in zip(f, b) if x and y]
        print(f"| {m} |" + (f" {l} |" if l else "") +
              f" {cell([x for x in f if x])} | {cell([y for y in b if y])} | {cell(ratio, '{:.2f}')} |")
if len(labels) > 1:
    base = labels[0]
    print(f"\n| model | binary | fp32 img/s / {base}'s (per round) | bf16 img/s / {base}'s (per round) |\n|---|---|---|---|")
    for m in models:
        for l in labels[1:]:
            def vs(p):
                return [x / y for x, y in ((img_s(l, m, p, r), img_s(base, m, p, r)) for r in rs) if x and y]
            print(f"| {m} | {l} | {cell(vs('fp32'), '{:.3f}')} | {cell(vs('bf16'), '{:.3f}')} |")
PY
