#!/usr/bin/env python3
"""Summarizes bench/train_overlap.sh's raw JSON: medians (and min-max) over repeats."""
import glob, json, os, re, statistics, sys
from collections import defaultdict

raw = sys.argv[1]
runs = defaultdict(list)
meta = None
for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
    m = re.match(r"(.+)_n(\d+)_(overlap|no-overlap)_r(\d+)\.json", os.path.basename(path))
    doc = json.load(open(path))
    if "summary" not in doc:
        print(f"<!-- {path}: failed: {doc.get('error')} -->")
        continue
    meta = doc["meta"]
    runs[(m[1], int(m[2]), m[3])].append(doc["summary"])

def med(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"

print(f"Host: {meta['hosts'][0]['cpu']}, {meta['hosts'][0]['cores']} cores; backend {meta['backend']}; "
      f"batch {meta['batch_per_rank']} per rank; {meta['steps']} measured steps; medians over repeats (min-max).\n")
print("| model | ranks | mode | step s | compute s | allreduce s | exposed s | hidden | total img/s |")
print("|---|---|---|---|---|---|---|---|---|")
for (model, n, mode), s in sorted(runs.items()):
    g = lambda k, agg="mean_over_ranks": [x[k][agg] for x in s]
    hidden = [x["hidden_fraction"] for x in s if x["hidden_fraction"] is not None]
    print(f"| {model} | {n} | {mode} | {med(g('step_s'))} | {med(g('compute_s'))} | {med(g('allreduce_s'))} | "
          f"{med(g('exposed_s'))} | {statistics.median(hidden)*100:.0f}% | "
          f"{statistics.median([x['total_img_s']['mean'] for x in s]):.1f} |")
