#!/usr/bin/env python3
"""Summarizes bench/ring_knob_scan.sh: per N and size, each knob's out-of-place busbw, median
(min-max) over repeats."""
import collections
import glob
import json
import os
import statistics
import sys

d = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    k, n, _ = os.path.basename(f)[:-5].rsplit("-", 2)
    for row in json.load(open(f))["rows"]:
        if not row["inplace"]:
            d[(int(n[1:]), k, row["bytes"])].append(row["busbw_gbps"])
knobs = sorted({k for (_, k, _) in d}, key=lambda k: (k == "mpi", k != "default", k))
print("| N | size | " + " | ".join(knobs) + " |")
print("|---:|---:|" + "---:|" * len(knobs))
for n, b in sorted({(n, b) for (n, _, b) in d}):
    cells = [f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if (v := d[(n, k, b)]) else "-" for k in knobs]
    print(f"| {n} | {b >> 20} MiB | " + " | ".join(cells) + " |")
