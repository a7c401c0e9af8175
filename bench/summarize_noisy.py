#!/usr/bin/env python3
"""Summarizes bench/noisy_neighbour.sh: per model, thread setting and neighbour, the median img/s
and its spread, its share of the quiet median, the CPUs the rank kept busy and img/s per busy CPU.

Two shares: of the quiet median of the same setting, and of the default's quiet throughput. The
latter pools every quiet run that trained the way the default did quietly (same threads, no
second thread: in quiet, --threads 0 with or without that thread and --threads <CPUs> run the
same configuration), so one noisy quiet median does not move every share of a setting.
   bench/summarize_noisy.py RAW_DIR [CPUS]"""
import glob
import json
import os
import statistics
import sys

LABELS = {"t0": "0 (auto)", "t0off": "0 (auto), --weight-grad-thread off"}
CONDS = ("quiet", "pinned", "hogs")


def load(raw):
    """(model, setting) -> condition -> [(img/s, threads used, CPUs busy)]"""
    runs = {}
    for f in sorted(glob.glob(os.path.join(raw, "*.json"))):
        model, cond, setting, _ = os.path.basename(f)[:-5].rsplit("_", 3)
        d = json.load(open(f))
        m, s = d["meta"], d["summary"]
        used = str(m["threads_per_rank"]) + ("+wg" if m.get("weight_grad_thread") else "")
        # Runs older than train's CPU time have no CPUs busy (NaN: shown as "-").
        runs.setdefault((model, setting), {}).setdefault(cond, []).append(
            (s["total_img_s"]["mean"], used, s.get("cpus_busy_per_rank", float("nan"))))
    return runs


def default_quiet(runs, model):
    """The median of every quiet run of `model` that trained as the default did quietly."""
    default = runs.get((model, "t0"), {}).get("quiet", [])
    if not default:
        return float("nan")
    config = statistics.mode(u for _, u, _ in default)
    return statistics.median(x for (m, _), conds in runs.items() if m == model
                             for x, u, _ in conds.get("quiet", []) if u == config)


def pct(x, base):
    return f"{100 * x / base:.0f}%" if base > 0 else "-"


def per(x, cpus):
    return f"{x / cpus:.0f}" if cpus > 0 else "-"


def main():
    raw = sys.argv[1]
    cpus = sys.argv[2] if len(sys.argv) > 2 else "?"
    runs = load(raw)
    print(f"# Noisy neighbour: 1-rank training, {cpus} CPUs; pinned = a busy loop on the last CPU, "
          f"hogs = stress-ng --cpu {cpus}\n")
    print("| model | --threads | condition | threads used (+wg: weight gradients on a second thread) | "
          "img/s median | min-max | share of quiet (same setting) | share of the default's quiet | "
          "CPUs busy | img/s per busy CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (model, setting), conds in sorted(runs.items()):
        quiet = statistics.median(x for x, _, _ in conds.get("quiet", [(float("nan"), "", 0)]))
        base = default_quiet(runs, model)
        for cond in CONDS:
            if cond not in conds:
                continue
            xs = [x for x, _, _ in conds[cond]]
            used = ",".join(sorted({u for _, u, _ in conds[cond]}))
            med = statistics.median(xs)
            busy = statistics.median(c for _, _, c in conds[cond])
            print(f"| {model} | {LABELS.get(setting, setting[1:])} | {cond} | {used} | {med:.1f} | "
                  f"{min(xs):.1f}-{max(xs):.1f} | {pct(med, quiet)} | {pct(med, base)} | "
                  f"{'-' if busy != busy else f'{busy:.2f}'} | {per(med, busy)} |")
    for model in sorted({m for m, _ in runs}):
        base = default_quiet(runs, model)
        print(f"\nThe default's quiet throughput, {model}: " +
              (f"{base:.1f} img/s (median of every quiet run that trained as the default did)." if base > 0
               else "not measured (no quiet run with --threads 0): its shares are \"-\"."))


if __name__ == "__main__":
    main()
