#!/usr/bin/env python3
"""The per-run table of bench/horovod_vs_ringbench.sh's OUT: Horovod's autotune (horovod-r<R>.json)
and ringbench's train --autotune (ringbench-r<R>/raw.jsonl) round by round, then the medians and
their ratios; or, for bench/horovod_check.sh's OUT (horovod-r<R>-s<S>.json), each fixed setting's
img/s per round and median. Markdown on stdout.

  bench/summarize_horovod_autotune.py OUT
"""
import glob
import json
import os
import re
import statistics
import sys


def horovod(path):
    d = json.load(open(path))
    t, s = d["meta"]["tuning"], d["summary"]
    b = t["best"]
    return {"img_s": s["total_img_s_window"], "median_step_img_s": s["total_img_s_median"], "tune_s": t["settled_s"],
            "tune_steps": t["settled_step"], "params": d["meta"]["params"], "busy": s.get("cpus_busy_rank0"),
            "chosen": f"fusion {float(b['tensor_fusion_threshold']):.1f} MB, cycle {float(b['cycle_time_ms']):.1f} ms"}


def ringbench(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "raw.jsonl"))]
    ok = [r for r in rows if r.get("status") == "ok" and r.get("kind") == "train"]
    if len(ok) != 1:
        sys.exit(f"summarize_horovod_autotune.py: {run_dir}/raw.jsonl: want one ok train point, found {len(ok)}")
    tr = ok[0]["train"]
    a, c = tr["meta"]["autotune"], tr["meta"]["autotune"]["chosen"]
    return {"img_s": tr["summary"]["total_img_s"]["mean"], "tune_s": a["wall_s"], "tune_steps": a["steps"],
            "busy": tr["summary"]["cpus_busy_per_rank"],
            "chosen": f"{c['compression']}, fusion {c['fusion_mb']:g}, first {c['first_bucket_mb']:g}, segment {c['segment']}"}


def busy(x):
    """CPU time over wall time in the measured steps (Horovod: rank 0; ringbench: mean over ranks)."""
    return "n/a" if x["busy"] is None else f"{x['busy']:.2f}"


def ratios(hs, rs, key, fmt):
    return ", ".join(fmt.format(g[key] / h[key]) for h, g in zip(hs, rs))


def check(out):
    """bench/horovod_check.sh's rounds: {setting label: [img/s per round]} for both sides."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "horovod-r*-s*.json"))):
        d = json.load(open(path))
        env = d["meta"]["env"]
        label = (f"Horovod fusion {int(env['HOROVOD_FUSION_THRESHOLD']) / 2**20:.2f} MiB, "
                 f"cycle {float(env['HOROVOD_CYCLE_TIME']):.2f} ms")
        if d["meta"].get("compression", "none") != "none":
            label += f", Compression.{d['meta']['compression']}"
        rows.setdefault(label, []).append(d["summary"]["total_img_s_window"])
    for run in sorted(glob.glob(os.path.join(out, "ringbench-r*", "raw.jsonl"))):
        for line in open(run):
            r = json.loads(line)
            if r.get("status") != "ok" or r.get("kind") != "train":
                continue
            label = (f"ringbench {r['compression']}, fusion {r['fusion_mb']:g}, first {r['first_bucket_mb']:g}, "
                     f"segment {r['segment']}")
            rows.setdefault(label, []).append(r["train"]["summary"]["total_img_s"]["mean"])
    print("| setting | img/s per round | median |")
    print("|---|---|---:|")
    for label, xs in rows.items():
        print(f"| {label} | {', '.join(f'{x:.1f}' for x in xs)} | {statistics.median(xs):.1f} |")
    best = lambda side: max(statistics.median(xs) for k, xs in rows.items() if k.startswith(side))  # noqa: E731
    print(f"\nBest medians: ringbench {best('ringbench'):.1f}, Horovod {best('Horovod'):.1f} img/s: "
          f"{best('ringbench') / best('Horovod'):.2f}x.")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    out = sys.argv[1]
    if glob.glob(os.path.join(out, "horovod-r*-s*.json")):
        return check(out)
    rounds = sorted(int(re.search(r"horovod-r(\d+)\.json$", p).group(1))
                    for p in glob.glob(os.path.join(out, "horovod-r*.json")))
    rounds = [r for r in rounds if os.path.exists(os.path.join(out, f"ringbench-r{r}", "raw.jsonl"))]
    if not rounds:
        sys.exit(f"summarize_horovod_autotune.py: no round in {out} has both horovod-r<R>.json and ringbench-r<R>/")
    print("| round | Horovod tuned img/s | Horovod autotune settled, s (steps) | Horovod's choice | Horovod CPUs busy "
          "| ringbench tuned img/s | ringbench --autotune, s (steps) | ringbench's choice | ringbench CPUs busy "
          "| img/s ratio | tuning time ratio |")
    print("|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|")
    hs, rs = [], []
    for r in rounds:
        h, g = horovod(os.path.join(out, f"horovod-r{r}.json")), ringbench(os.path.join(out, f"ringbench-r{r}"))
        hs.append(h)
        rs.append(g)
        print(f"| {r} | {h['img_s']:.1f} | {h['tune_s']:.0f} ({h['tune_steps']}) | {h['chosen']} | {busy(h)} "
              f"| {g['img_s']:.1f} | {g['tune_s']:.1f} ({g['tune_steps']}) | {g['chosen']} | {busy(g)} "
              f"| {g['img_s'] / h['img_s']:.2f}x | {g['tune_s'] / h['tune_s']:.3f} |")
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    print(f"\nMedians over {len(rounds)} round(s): Horovod {med(hs, 'img_s'):.1f} img/s after {med(hs, 'tune_s'):.0f} s "
          f"of autotune; ringbench {med(rs, 'img_s'):.1f} img/s after {med(rs, 'tune_s'):.1f} s of --autotune. "
          f"Per-round ratios (ringbench / Horovod): img/s {ratios(hs, rs, 'img_s', '{:.2f}x')}; "
          f"tuning time {ratios(hs, rs, 'tune_s', '{:.3f}')}. "
          f"Parameters: {hs[0]['params']} (torch).")


if __name__ == "__main__":
    main()
