#!/usr/bin/env python3
"""ringbench's input pipeline (`ringbench data bench`) against PyTorch's DataLoader with
torchvision's default PIL path (bench/pytorch_input.py): the same image set, crop size, flip,
batch and number of threads/workers, in alternating runs (ringbench first in odd rounds, PyTorch
first in even ones) so the shared machine's noise hits both alike. Reports per thread count the
medians and ranges of img/s and img/s per CPU, and the ratio per round (median, range).

  bench/compare_input_pytorch.py --bin build/runner/ringbench --python /tmp/venv/bin/python \\
      --set /tmp/imagenet-like --threads 1 2 --rounds 5 --out /tmp/input-cmp
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(out):
    for line in out.splitlines():
        if line.startswith("img_s "):
            w = line.split()
            return {w[i]: float(w[i + 1]) for i in range(0, len(w) - 1, 2)}
    raise SystemExit("no result line in:\n" + out)


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SystemExit(p.stdout)
    return parse(p.stdout), p.stdout


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--set", required=True)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = ["--batch", str(a.batch), "--batches", str(a.batches), "--image-size", str(a.image_size)]
    results = {}
    for t in a.threads:
        rb_runs, pt_runs = [], []
        for r in range(a.rounds):
            rb = lambda: rb_runs.append(run([a.bin, "data", "bench", a.set, "--threads", str(t)] + common)[0])
            pt = lambda: pt_runs.append(run([a.python, os.path.join(HERE, "pytorch_input.py"), a.set, "--workers",
                                             str(t)] + common)[0])
            for f in ((rb, pt) if r % 2 == 0 else (pt, rb)):
                f()
        results[t] = {
            "ringbench": {k: spread([x[k] for x in rb_runs]) for k in ("img_s", "img_s_per_cpu", "cpus")},
            "pytorch": {k: spread([x[k] for x in pt_runs]) for k in ("img_s", "img_s_per_cpu", "cpus")},
            "ratio_img_s": spread([x["img_s"] / y["img_s"] for x, y in zip(rb_runs, pt_runs)]),
            "ratio_img_s_per_cpu": spread([x["img_s_per_cpu"] / y["img_s_per_cpu"] for x, y in zip(rb_runs, pt_runs)]),
        }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = ["| threads | ringbench img/s | PyTorch img/s | ratio | ringbench img/s per CPU | PyTorch img/s per CPU | ratio |",
             "|---|---|---|---|---|---|---|"]
    for t, r in results.items():
        def cell(s):
            return "%.1f (%.1f-%.1f)" % (s["median"], s["min"], s["max"])
        def ratio(s):
            return "%.2fx (%.2f-%.2f)" % (s["median"], s["min"], s["max"])
        lines.append("| %d | %s | %s | %s | %s | %s | %s |" % (
            t, cell(r["ringbench"]["img_s"]), cell(r["pytorch"]["img_s"]), ratio(r["ratio_img_s"]),
            cell(r["ringbench"]["img_s_per_cpu"]), cell(r["pytorch"]["img_s_per_cpu"]), ratio(r["ratio_img_s_per_cpu"])))
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
