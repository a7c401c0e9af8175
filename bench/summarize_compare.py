#!/usr/bin/env python3
"""Summarizes bench/compare_mpi.sh runs: medians and spread over repeats, ring / MPI ratios."""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def checked_rows(outdir, pattern):
    """(match, row) for every row of every raw/*.json whose name matches `pattern`, and the first
    run's metadata; a failed run or a wrong element ends the summary with the file that has it."""
    out, meta = [], None
    for path in sorted(glob.glob(os.path.join(outdir, "raw", "*.json"))):
        m = re.match(pattern, os.path.basename(path))
        if not m:
            continue
        doc = json.load(open(path))
        if "error" in doc:
            sys.exit(f"{path}: run failed: {doc['error']}")
        meta = meta or doc["meta"]
        for r in doc["rows"]:
            if r["wrong"]:
                sys.exit(f"{path}: {r['wrong']} wrong elements at {r['bytes']} B")
            out.append((m, r))
    return out, meta


def main(outdir):
    # (impl, n, bytes, inplace) -> [row, ...] over repeats
    rows = defaultdict(list)
    found, meta = checked_rows(outdir, r"(ring|mpi)-n(\d+)-(bw|lat)-r(\d+)\.json")
    for m, r in found:
        rows[(m[1], int(m[2]), r["bytes"], r["inplace"])].append(r)

    def stat(impl, n, b, key):
        v = [r[key] for r in rows[(impl, n, b, False)]]
        return statistics.median(v), min(v), max(v), len(v)

    print("# ring (ours, TCP) vs Open MPI MPI_Allreduce (pml ob1, btl tcp,self), loopback, "
          "out-of-place, float sum")
    if meta:
        h = meta["hosts"][0]
        print(f"# host {h['host']}, {h['cores']} cores, {h['cpu']}, {h['kernel']}; "
              f"{meta['build']['mpi']}; ringbench {meta['build']['commit']}")
    print("# median over repeats (min-max); GB = 1e9 bytes\n")
    for n in sorted({k[1] for k in rows}):
        print(f"## N = {n}\n")
        print("| size | ring busbw GB/s | MPI busbw GB/s | ring/MPI | ring time us | MPI time us |")
        print("|---:|---:|---:|---:|---:|---:|")
        for b in sorted({k[2] for k in rows if k[1] == n}):
            if not rows[("ring", n, b, False)] or not rows[("mpi", n, b, False)]:
                continue
            rb, rlo, rhi, k = stat("ring", n, b, "busbw_gbps")
            mb, mlo, mhi, _ = stat("mpi", n, b, "busbw_gbps")
            rt = stat("ring", n, b, "time_us")[0]
            mt = stat("mpi", n, b, "time_us")[0]
            size = f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB"
            print(f"| {size} | {rb:.3f} ({rlo:.3f}-{rhi:.3f}) | {mb:.3f} ({mlo:.3f}-{mhi:.3f}) "
                  f"| {rb / mb:.2f}x | {rt:.1f} | {mt:.1f} |")
        print(f"\n({k} repeats)\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
