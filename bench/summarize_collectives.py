#!/usr/bin/env python3
"""Table of bench/collectives_vs_gloo_mpi.sh's runs: per collective and size, the busbw of ours
(ring over tcp), Open MPI's (tcp btl) and Gloo's best algorithm, as medians over repeats with
the min-max spread, and the ratios of the medians. Out-of-place rows of ours and MPI's."""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def main(out):
    runs = defaultdict(lambda: defaultdict(list))  # (op, n) -> (impl, bytes) -> [busbw per repeat]
    for f in glob.glob(os.path.join(out, "raw", "*.json")):
        op, impl, n, _ = re.match(r"(\w+)-(\w+)-n(\d+)-r(\d+)\.json", os.path.basename(f)).groups()
        doc = json.load(open(f))
        if any(r["wrong"] for r in doc["rows"]):
            sys.exit(f"{f}: wrong elements")
        for r in doc["rows"]:
            if not r["inplace"]:
                runs[(op, int(n))][(impl, r["bytes"])].append(r["busbw_gbps"])
    gloo = defaultdict(lambda: defaultdict(list))  # (op, n) -> (algo, bytes) -> [busbw]
    for f in glob.glob(os.path.join(out, "raw", "*-gloo_*.txt")):
        op, algo, n, _ = re.match(r"(\w+)-gloo_(\w+)-n(\d+)-r(\d+)\.txt", os.path.basename(f)).groups()
        for line in open(f):
            if line.startswith("#") or not line.strip():
                continue
            b, _, _, busbw = line.split()
            gloo[(op, int(n))][(algo, int(b))].append(float(busbw))

    def cell(v):
        return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if v else "-"

    for key in sorted(runs):
        op, n = key
        print(f"\n### {op}, N = {n}: busbw GB/s, median (min-max) over {max(len(v) for v in runs[key].values())} runs\n")
        print("| size | ours (ring, tcp) | Open MPI (tcp btl) | Gloo best | ours/Gloo | ours/MPI |")
        print("|---:|---|---|---|---:|---:|")
        sizes = sorted({b for (_, b) in runs[key]})
        for b in sizes:
            ours, mpi = runs[key].get(("ring", b), []), runs[key].get(("mpi", b), [])
            best, best_algo = [], ""
            for (algo, gb), v in gloo[key].items():
                if gb == b and (not best or statistics.median(v) > statistics.median(best)):
                    best, best_algo = v, algo
            med = statistics.median
            rg = f"{med(ours) / med(best):.2f}x" if ours and best else "-"
            rm = f"{med(ours) / med(mpi):.2f}x" if ours and mpi else "-"
            g = f"{cell(best)} {best_algo}" if best else "-"
            print(f"| {b >> 20} MiB | {cell(ours)} | {cell(mpi)} | {g} | {rg} | {rm} |")


if __name__ == "__main__":
    main(sys.argv[1])
