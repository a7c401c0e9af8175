#!/usr/bin/env python3
"""Summarizes bench/algo_auto_vs_mpi.sh: for each N and size, every repeat's busbw of ours
(`--algo auto`, and the algorithm auto chose) beside Open MPI's from the same repeat, each
repeat's ratio, and the worst ratio; out-of-place rows (in-place with -i); --table: the arm
with --algo-table (raw/table-*) instead of the built-in rule (raw/auto-*); --control: the second
Open MPI arm (raw/mpi2-*) instead, Open MPI against itself. Reads whole-sweep runs
and PER_SIZE=1's one-size runs (raw/<arm>-nN-rR-sBYTES.json) alike."""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def load(outdir):
    rows, meta = defaultdict(dict), {}
    for path in sorted(glob.glob(os.path.join(outdir, "raw", "*.json"))):
        m = re.match(r"(auto|table|mpi2|mpi)-n(\d+)-r(\d+)(?:-s\d+)?\.json", os.path.basename(path))
        if not m:
            continue
        doc = json.load(open(path))
        if "error" in doc:
            sys.exit(f"{path}: run failed: {doc['error']}")
        meta.setdefault(m[1], doc["meta"])
        for r in doc["rows"]:
            if r["wrong"]:
                sys.exit(f"{path}: {r['wrong']} wrong elements at {r['bytes']} B")
            rows[(int(m[2]), r["bytes"], r["inplace"])][(m[1], int(m[3]))] = r
    return rows, meta


def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main(outdir, inplace, arm):
    rows, meta = load(outdir)
    opts = meta.get(arm, {}).get("options", {})
    ours = ("a second Open MPI run (the control)" if arm == "mpi2" else
            f"--algo auto ({opts.get('algo_table_ranges') or 'built-in rule'})")
    # bench_net.sh's cluster.txt: the run was on an emulated cluster (LINK=), not loopback.
    cluster = os.path.join(outdir, "cluster.txt")
    where = ("emulated cluster, " + open(cluster).readline().strip().split("is up: ", 1)[-1]
             if os.path.exists(cluster) else "loopback")
    print(f"# ours: {ours} vs Open MPI "
          f"MPI_Allreduce (pml ob1, btl tcp,self), {where}, {'in-place' if inplace else 'out-of-place'}, float sum")
    print("# busbw GB/s per repeat (ours / Open MPI = ratio); GB = 1e9 bytes\n")
    worst_all = {}
    for n in sorted({k[0] for k in rows}):
        reps = sorted({rep for k, v in rows.items() if k[0] == n for (_, rep) in v})
        print(f"## N = {n}\n")
        print("| size | auto chose | " + " | ".join(f"run {r}: ours / MPI" for r in reps) +
              " | median ratio | worst ratio |")
        print("|---:|:--|" + "---:|" * (len(reps) + 2))
        for b in sorted({k[1] for k in rows if k[0] == n}):
            runs = rows[(n, b, inplace)]
            cells, ratios, algos = [], [], set()
            for rep in reps:
                a, m = runs.get((arm, rep)), runs.get(("mpi", rep))
                if not a or not m:
                    cells.append("-")
                    continue
                algos.add(a["algo"])
                ratio = a["busbw_gbps"] / m["busbw_gbps"]
                ratios.append(ratio)
                cells.append(f"{a['busbw_gbps']:.3f} / {m['busbw_gbps']:.3f} = {ratio:.2f}x")
            if not ratios:
                continue
            worst = min(ratios)
            worst_all[(n, b)] = worst
            print(f"| {size_text(b)} | {', '.join(sorted(algos))} | " + " | ".join(cells) +
                  f" | {statistics.median(ratios):.2f}x | {'**' if worst < 1 else ''}{worst:.2f}x{'**' if worst < 1 else ''} |")
        print()
    lost = [f"N={n} {size_text(b)} ({w:.2f}x)" for (n, b), w in sorted(worst_all.items()) if w < 1]
    what = ("Control (Open MPI's second run >= its first at every size, every run)" if arm == "mpi2"
            else "Goal (ours >= Open MPI at every size, every run)")
    print(what + ": " +
          ("met in every run" if not lost else "NOT met: " + ("the second" if arm == "mpi2" else "ours") +
           " lost at least one run at " + ", ".join(lost)))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    arm = "table" if "--table" in sys.argv[1:] else "mpi2" if "--control" in sys.argv[1:] else "auto"
    main(args[0], "-i" in sys.argv[1:], arm)
