#!/usr/bin/env python3
"""Summarizes bench/infer_vs_pytorch.sh runs (and scripts/gpu_check.sh's, on the GPU): Offline img/s of ringbench and PyTorch per model,
threads and batch, medians (min-max) over repeats, and the ringbench / PyTorch ratio taken per
repeat (the two runs of a pair ran side by side), then its median (min-max). Checks that both
sides ran networks with the same parameter count, input and output. Writes OUT/summary.json and
prints the markdown table; exit 1 if a run is missing or the networks differ.

  bench/summarize_infer.py results/pytorch-infer-cpu > results/pytorch-infer-cpu/table.md
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict

GOAL = {"cpu": 1.5, "cuda": 1.0}  # on the GPU, both sides run the same cuDNN: the goal is parity
QUIET = 0.25  # a pair is quiet when other processes took at most this share of the CPUs in both runs


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_pytorch import load, med_range  # noqa: E402  one reader and one "median (min-max)" for both


def others_share(cpu):
    """The share of the machine's CPUs that other processes used during a run (0-1)."""
    if not cpu or cpu["wall_s"] <= 0:
        return None
    return max(0.0, (cpu["machine_busy_s"] - cpu["own_cpu_s"]) / (cpu["wall_s"] * cpu["cpus"]))


def main(out):
    raw = os.path.join(out, "raw")
    problems = []
    # (model, threads, batch) -> rep -> {"ringbench": img/s, "pytorch": img/s}
    cells = defaultdict(lambda: defaultdict(dict))
    noise = defaultdict(list)  # (model, threads) -> others' CPU share of every run
    pair_noise = defaultdict(dict)  # (model, threads, rep) -> impl -> others' CPU share
    meta = {}
    for path in sorted(glob.glob(os.path.join(raw, "*_t*_r*_*.json"))):
        m = re.match(r"(\w+?)_t(\d+)_r(\d+)_(ringbench|pytorch)\.json$", os.path.basename(path))
        if not m:
            continue
        model, threads, rep, impl = m[1], int(m[2]), int(m[3]), m[4]
        doc = load(path)
        if doc is None:
            problems.append(f"{path}: unreadable")
            continue
        share = others_share(load(path[:-5] + ".cpu.json"))
        if share is not None:
            noise[(model, threads)].append(share)
            pair_noise[(model, threads, rep)][impl] = share
        if impl == "ringbench":
            meta.setdefault("ringbench", {k: doc["meta"][k] for k in ("backend", "device", "build", "backend_detail")})
            meta.setdefault("inputs", {})[model] = doc["meta"]["input"]
            if threads and doc["meta"]["threads"] != threads:
                problems.append(f"{path}: ran {doc['meta']['threads']} threads, not {threads}")
        else:
            meta.setdefault("pytorch", {k: doc["meta"][k] for k in ("torch", "torch_file", "python", "mkldnn",
                                                                       "memory_format", "mode", "warmup") + (
                ("device", "cuda", "cudnn", "gpu") if doc["meta"].get("device") == "cuda" else ())})
            meta.setdefault("pytorch_params", {})[model] = doc["meta"]["params"]
            meta.setdefault("pytorch_inputs", {})[model] = doc["meta"]["input"]
            if threads and doc["meta"]["threads"] != threads:
                problems.append(f"{path}: ran {doc['meta']['threads']} threads, not {threads}")
        for r in doc["offline"]:
            cells[(model, threads, r["batch"])][rep][impl] = r["samples_per_s"]
            if impl == "pytorch" and r["output"][1] != 1000:
                problems.append(f"{path}: output {r['output']}")

    for model, n in meta.get("pytorch_params", {}).items():
        rb = load(os.path.join(raw, f"{model}_params_ringbench.json"))
        rb_n = rb["meta"]["params"] if rb else None
        meta.setdefault("ringbench_params", {})[model] = rb_n
        if rb_n != n:
            problems.append(f"{model}: ringbench has {rb_n} parameters, PyTorch {n}")
        if meta["inputs"].get(model) != meta["pytorch_inputs"][model]:
            problems.append(f"{model}: input {meta['inputs'].get(model)} vs PyTorch's {meta['pytorch_inputs'][model]}")

    device = meta.get("ringbench", {}).get("device", "cpu")
    goal = GOAL.get(device, GOAL["cpu"])
    if "pytorch" in meta and meta["pytorch"].get("device", "cpu") != device:
        problems.append(f"ringbench ran on {device}, PyTorch on {meta['pytorch'].get('device', 'cpu')}")
    rows, lines = [], []
    for (model, threads, batch) in sorted(cells, key=lambda k: (k[0] != "mobilenet_v1", k[0], k[1], k[2])):
        reps = cells[(model, threads, batch)]
        rb = [v["ringbench"] for _, v in sorted(reps.items()) if "ringbench" in v]
        pt = [v["pytorch"] for _, v in sorted(reps.items()) if "pytorch" in v]
        ratio = [v["ringbench"] / v["pytorch"] for _, v in sorted(reps.items()) if len(v) == 2]
        quiet = [v["ringbench"] / v["pytorch"] for rep, v in sorted(reps.items()) if len(v) == 2
                 and max(pair_noise[(model, threads, rep)].values(), default=1) <= QUIET]
        if len(ratio) != len(reps):
            problems.append(f"{model} t{threads} b{batch}: {len(reps) - len(ratio)} repeat(s) without both sides")
        r_med = statistics.median(ratio) if ratio else None
        rows.append({"model": model, "input": meta.get("inputs", {}).get(model), "threads": threads, "batch": batch,
                     "ringbench_img_s": rb, "pytorch_img_s": pt, "ratio": ratio, "ratio_median": r_med, "ratio_quiet_pairs": quiet,
                     "meets_goal": r_med is not None and r_med >= goal})
        size = (meta.get("inputs", {}).get(model) or "?").split("x")[-1]
        verdict = "yes" if rows[-1]["meets_goal"] else "**no**"
        lines.append(f"| {model} | {size} | {threads} | {batch} | {med_range(rb)} | {med_range(pt)} | "
                     f"{med_range(ratio, '{:.2f}')} | {verdict} | {med_range(quiet, '{:.2f}')} [{len(quiet)}] |")

    reps_n = max((len(v) for v in cells.values()), default=0)
    where = "the GPU: ringbench infer (cuDNN)" if device == "cuda" else "the CPU: ringbench infer (oneDNN)"
    head = [f"# Offline inference on {where} vs PyTorch eager, fp32",
            "",
            f"img/s = samples / the timed window of one Offline run at that batch (LoadGen's Offline metric). "
            f"{reps_n} repeats; per cell the median over repeats (min-max). The ratio is ringbench / PyTorch "
            f"per repeat (the two runs of a repeat were side by side), then its median (min-max). "
            f"Goal: ringbench >= {goal}x PyTorch. The last column keeps the quiet pairs only: those where other "
            f"processes took at most {100 * QUIET:.0f}% of the machine's CPUs during both runs [how many].",
            ""]
    if "ringbench" in meta:
        m = meta["ringbench"]
        head.append(f"- ringbench {m['build']['ringbench']} ({m['build']['commit']}, {m['build']['compiler']}), "
                    f"`infer --scenarios offline --backend {m['backend']}` on {m['device']}")
    if "pytorch" in meta:
        m = meta["pytorch"]
        lib = (f"{m['gpu']}, CUDA {m['cuda']}, cuDNN {m['cudnn']}, cudnn.benchmark on, TF32 off, input from and "
               f"logits to host memory per batch" if m.get("device") == "cuda"
               else f"oneDNN (mkldnn) {'on' if m['mkldnn'] else 'off'}")
        head.append(f"- PyTorch {m['torch']} ({m['torch_file']}, Python {m['python']}), eager, {m['mode']}, "
                    f"{m['memory_format']}, {lib}")
    if "ringbench_params" in meta:
        head.append("- same networks: parameters " + ", ".join(
            f"{k} {v:,} (both)" if v == meta['pytorch_params'][k] else f"{k} ringbench {v} vs PyTorch "
            f"{meta['pytorch_params'][k]}" for k, v in meta["ringbench_params"].items()))
    if noise:
        head.append("- other processes' share of the machine's CPUs during the runs, median (max): " + "; ".join(
            f"{m} {t} thread{'s' if t > 1 else ''} {100 * statistics.median(v):.0f}% ({100 * max(v):.0f}%)"
            for (m, t), v in sorted(noise.items())))
    met = sum(r["meets_goal"] for r in rows)
    head += ["", "| model | image px | threads | batch | ringbench img/s | PyTorch img/s | ringbench / PyTorch "
             f"| >= {goal}x | ratio, quiet pairs [n] |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    text = "\n".join(head + lines) + f"\n\nGoal met in {met} of {len(rows)} cells (by the median ratio).\n"
    if problems:
        text += "\n**Problems:**\n" + "".join(f"- {p}\n" for p in problems)
    with open(os.path.join(out, "summary.json.tmp"), "w") as f:
        json.dump({"goal": goal, "quiet_share": QUIET, "meta": meta, "others_cpu_share": {f"{m}_t{t}_r{r}": v for (m, t, r), v in sorted(pair_noise.items())},
                   "rows": rows, "problems": problems}, f, indent=2)
    os.replace(os.path.join(out, "summary.json.tmp"), os.path.join(out, "summary.json"))
    print(text, end="")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
