#!/usr/bin/env python3
"""Table of bench/hd_vs_ring.sh's runs: allreduce time per size for --algo hd and --algo ring,
medians over repeats with the min-max spread, and ring/hd (above 1: hd is faster). Out-of-place
rows."""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def main(out):
    t = defaultdict(list)  # (algo, n, bytes) -> [time_us per repeat]
    for f in glob.glob(os.path.join(out, "raw", "hd-vs-ring-*.json")):
        algo, n = re.match(r"hd-vs-ring-(\w+)-n(\d+)-", os.path.basename(f)).groups()
        doc = json.load(open(f))
        if any(r["wrong"] for r in doc["rows"]):
            sys.exit(f"{f}: wrong elements")
        for r in doc["rows"]:
            if not r["inplace"]:
                t[(algo, int(n), r["bytes"])].append(r["time_us"])
    med = statistics.median
    for n in sorted({k[1] for k in t}):
        reps = max(len(v) for v in t.values())
        print(f"\n### allreduce at N = {n}: time in us, median (min-max) over {reps} runs\n")
        print("| size | hd | ring | ring/hd |")
        print("|---:|---|---|---:|")
        for b in sorted({k[2] for k in t if k[1] == n}):
            hd, ring = t.get(("hd", n, b), []), t.get(("ring", n, b), [])
            cell = lambda v: f"{med(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-"
            ratio = f"{med(ring) / med(hd):.2f}x" if hd and ring else "-"
            size = f"{b >> 10} KiB" if b < 1 << 20 else f"{b >> 20} MiB"
            print(f"| {size} | {cell(hd)} | {cell(ring)} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1])
