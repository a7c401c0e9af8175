#!/usr/bin/env python3
"""Real data against synthetic, over a CPU-hungry transport (tcp) and a CPU-light one (shm): the
ranks' img/s, CPUs busy and input stall for each of the four, in alternating rounds (the order
of the four rotates each round) so the shared machine's noise hits all alike. Local ranks on
this host (`--ranks N`); the emulated cluster's per-node links are not used here.

  bench/compare_input_transport.py --bin build/runner/ringbench --set /tmp/imagenet-like \\
      --ranks 2 --rounds 3 --out /tmp/input-transport
"""
import argparse
import json
import os
import statistics
import subprocess


def run(cmd, path):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd + ["--json", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SystemExit(p.stdout)
    with open(path) as f:
        doc = json.load(f)
    s = doc["summary"]
    out = {"total_img_s": s["total_img_s"]["mean"], "cpus_busy_per_rank": s["cpus_busy_per_rank"],
           "stall_ms": 0.0, "pipeline_cpus": 0.0}
    if "input" in doc:
        out["stall_ms"] = 1e3 * doc["input"]["stall_s_per_step"]["mean_over_ranks"]
        out["pipeline_cpus"] = doc["input"]["pipeline_cpus_per_rank"]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--set", required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", default="mobilenet_v1")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--data-threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
    configs = [(t, d) for t in ("tcp", "shm") for d in ("synthetic", "jpeg")]
    runs = {c: [] for c in configs}
    for r in range(a.rounds):
        for i in range(len(configs)):
            t, d = configs[(i + r) % len(configs)]
            cmd = [a.bin, "train", "--model", a.model, "--image-size", str(a.image_size), "--batch", str(a.batch),
                   "--steps", str(a.steps), "--warmup", "2", "--ranks", str(a.ranks), "--transport", t, "--data", d,
                   "--log-every", "0"]
            if d == "jpeg":
                cmd += ["--data-dir", a.set, "--data-threads", str(a.data_threads)]
            runs[(t, d)].append(run(cmd, os.path.join(a.out, "raw", "%s-%s-r%d.json" % (t, d, r))))
    summary = {"%s/%s" % c: {k: {"median": statistics.median([x[k] for x in v]), "runs": [x[k] for x in v]}
                             for k in v[0]} for c, v in runs.items()}
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = ["| transport | data | total img/s | CPUs busy per rank | input stall ms/step | pipeline CPUs per rank |",
             "|---|---|---|---|---|---|"]
    for (t, d), v in runs.items():
        m = summary["%s/%s" % (t, d)]
        def cell(k, fmt):
            xs = m[k]["runs"]
            return (fmt + " (" + fmt + "-" + fmt + ")") % (m[k]["median"], min(xs), max(xs))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (t, d, cell("total_img_s", "%.1f"),
                     cell("cpus_busy_per_rank", "%.2f"), cell("stall_ms", "%.1f"), cell("pipeline_cpus", "%.2f")))
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
