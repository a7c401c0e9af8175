#!/usr/bin/env python3
"""Summarizes bench/shm_vs_tcp_vs_vader.sh: median busbw over repeats, spread, and ratios."""
import statistics
import sys
from collections import defaultdict

from summarize_compare import checked_rows  # same directory

CONDS = ("shm", "shm-ring", "shm-copy", "tcp", "vader")


def load(outdir):
    busbw = defaultdict(list)  # (cond, n, bytes) -> out-of-place busbw per repeat
    found, meta = checked_rows(outdir, r"(shm|shm-ring|shm-copy|tcp|vader)-n(\d+)-r(\d+)\.json")
    for m, r in found:
        if not r["inplace"]:
            busbw[(m[1], int(m[2]), r["bytes"])].append(r["busbw_gbps"])
    return busbw, meta


def main(outdir):
    busbw, meta = load(outdir)
    print("# ranks of one host: ring (ours) over shm (forwarding each message into the next rank's ring as it "
          "arrives; shm-ring: reducing out of the shared ring into this rank's buffer, no forwards; shm-copy: "
          "copying into a slot first) vs ring (ours) over loopback TCP vs Open MPI MPI_Allreduce over btl "
          "vader,self; out-of-place, float sum, checked exactly")
    if meta:
        h = meta["hosts"][0]
        print(f"# host {h['host']}, {h['cores']} cores, {h['cpu']}, {h['kernel']}; "
              f"{meta['build']['mpi']}; ringbench {meta['build']['commit']}")
    if not any(k[0] == "vader" for k in busbw):
        print("# vader not run (LAUNCH=ranks: the ranks were started by ringbench --ranks, not mpirun)")
    print("# busbw in GB/s (1e9 bytes): median over repeats (min-max); ratios of the medians\n")
    conds = [c for c in CONDS if any(k[0] == c for k in busbw)]
    others = [c for c in conds if c.startswith("shm-")]
    print("| N | size | " + " | ".join(conds) + " | shm / tcp | shm / vader | " +
          " | ".join(f"shm / {c}" for c in others) + " |")
    print("|---|---|" + "---|" * (len(conds) + 2 + len(others)))
    for n, size in sorted({(k[1], k[2]) for k in busbw}):
        cells, med = [], {}
        for c in CONDS:
            v = busbw.get((c, n, size), [])
            med[c] = statistics.median(v) if v else None
            cells.append(f"{med[c]:.3f} ({min(v):.3f}-{max(v):.3f}) x{len(v)}" if v else "n/a")
        ratio = lambda a, b: f"{med[a] / med[b]:.2f}" if med[a] and med[b] else "n/a"
        cells = [cell for c, cell in zip(CONDS, cells) if c in conds]
        print(f"| {n} | {size >> 20} MiB | " + " | ".join(cells) + f" | {ratio('shm', 'tcp')} | {ratio('shm', 'vader')} | " +
              " | ".join(ratio("shm", c) for c in others) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
