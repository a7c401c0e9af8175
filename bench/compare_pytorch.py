#!/usr/bin/env python3
"""ringbench train vs PyTorch eager, side by side: training throughput (img/s) of each model and
batch on one device, both fp32, in interleaved rounds so machine noise hits both alike.

Each round runs `ringbench train` and bench/pytorch_train.py once per (model, batch), in
alternating order. The ratio ringbench / PyTorch is taken per round (measured side by side)
and reported as the median over rounds with its range. ringbench runs with --layer-times, so
the report also says where its step goes. Refuses to compare networks whose parameter counts
differ. Writes OUT/raw/*.json, OUT/summary.json and OUT/table.md; exit 1 if a run failed.

  bench/compare_pytorch.py --device cuda --out results/pytorch-vs-ringbench-h100
  bench/compare_pytorch.py --device cpu --threads 2 --batches 8 --image-size 128 --out /tmp/cmp
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, log):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout)
    for line in p.stdout.splitlines():
        if line.startswith(("Img/sec", "Total img/sec", "# pytorch", "# backend", "# gpu")):
            print("  " + line)
    if p.returncode != 0:
        print(f"  FAILED (exit {p.returncode}); see {log}:\n" + "\n".join(p.stdout.splitlines()[-5:]))
    return p.returncode == 0


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def med_range(xs, f="{:.1f}"):
    if not xs:
        return "-"
    return (f + " ({}-{})").format(statistics.median(xs), f.format(min(xs)), f.format(max(xs)))


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for raw/, summary.json and table.md")
    p.add_argument("--bin", default="build/runner/ringbench", help="the ringbench binary")
    p.add_argument("--python", default=sys.executable, help="the python that has torch (and torchvision)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--models", default="mobilenet_v1,inception_v3")
    p.add_argument("--batches", default="32,64")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="CPU threads of both (0: each one's default)")
    p.add_argument("--image-size", type=int, default=0, help="smaller inputs for slow machines (0: the models' own)")
    p.add_argument("--layer-times", type=int, default=5, help="ringbench's extra profiled steps (0: none)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="both sides: ringbench --precision, PyTorch autocast (fp16 with a GradScaler)")
    p.add_argument("--channels-last", action="store_true", help="PyTorch in NHWC (its fastest layout for AMP)")
    a = p.parse_args()
    raw = os.path.join(a.out, "raw")
    os.makedirs(raw, exist_ok=True)
    models, batches = a.models.split(","), [int(b) for b in a.batches.split(",")]

    ok = True
    for r in range(a.rounds):
        for model in models:
            for batch in batches:
                tag = f"{model}_b{batch}_r{r}"
                common = ["--model", model, "--batch", str(batch), "--steps", str(a.steps),
                          "--warmup", str(a.warmup), "--precision", a.precision]
                if a.image_size:
                    common += ["--image-size", str(a.image_size)]
                if a.threads:
                    common += ["--threads", str(a.threads)]
                rb = [a.bin, "train", *common, "--device", a.device, "--log-every", "0",
                      "--layer-times", str(a.layer_times), "--json", os.path.join(raw, tag + "_ringbench.json")]
                pt = [a.python, os.path.join(HERE, "pytorch_train.py"), *common, "--device", a.device,
                      "--json", os.path.join(raw, tag + "_pytorch.json")] + (["--channels-last"] if a.channels_last else [])
                pair = [(rb, "ringbench"), (pt, "pytorch")]
                for cmd, impl in pair if r % 2 == 0 else reversed(pair):
                    ok &= run(cmd, os.path.join(raw, f"{tag}_{impl}.log"))

    rows, lines, meta = [], [], {}
    for model in models:
        for batch in batches:
            rb_img, pt_img, ratios, params, kinds = [], [], [], set(), None
            for r in range(a.rounds):
                rb = load(os.path.join(raw, f"{model}_b{batch}_r{r}_ringbench.json"))
                pt = load(os.path.join(raw, f"{model}_b{batch}_r{r}_pytorch.json"))
                rb_ok = rb is not None and "summary" in rb
                if rb_ok:
                    rb_img.append(statistics.median(rb["ranks"][0]["img_s"]))
                    params.add(("ringbench", rb["meta"]["params"]))
                    meta["ringbench"] = {k: rb["meta"][k] for k in ("backend", "backend_detail", "device", "build", "hosts")}
                    kinds = rb.get("layer_times", {}).get("kinds", kinds)
                if pt is not None:
                    pt_img.append(pt["summary"]["img_s_median"])
                    params.add(("pytorch", pt["meta"]["params"]))
                    meta["pytorch"] = pt["meta"]
                if rb_ok and pt is not None:
                    ratios.append(rb_img[-1] / pt_img[-1])
            same = len({n for _, n in params}) == 1
            ok &= same
            rows.append({"model": model, "batch": batch, "ringbench_img_s": rb_img, "pytorch_img_s": pt_img,
                         "ratio": ratios, "params": dict(params) if same else sorted(params),
                         "same_params": same, "ringbench_layer_kinds": kinds})
            note = "" if same else f" PARAMETER COUNTS DIFFER: {sorted(params)}"
            lines.append(f"| {model} | {batch} | {med_range(rb_img)} | {med_range(pt_img)} | "
                         f"{med_range(ratios, '{:.2f}')} |{note}")

    dev = meta.get("pytorch", {}).get("gpu", a.device)
    what = "fp32" if a.precision == "fp32" else f"{a.precision} (ringbench --precision; PyTorch autocast)"
    head = [f"# ringbench train vs PyTorch eager on {dev}: {what}, synthetic data, one device",
            "",
            f"{a.rounds} interleaved rounds of {a.warmup} warmup + {a.steps} measured steps each; per run the "
            "median of its steps' img/s; per cell the median over rounds (min-max). The ratio is "
            "ringbench / PyTorch per round (side by side), then the median over rounds.",
            ""]
    if "ringbench" in meta:
        m = meta["ringbench"]
        head.append(f"- ringbench {m['build']['ringbench']} ({m['build']['commit']}), backend {m['backend']} "
                    f"on {m['device']}: {m['backend_detail'][:300]}")
    if "pytorch" in meta:
        m = meta["pytorch"]
        extra = (f", CUDA {m['cuda']}, cuDNN {m['cudnn']}, cudnn.benchmark on, TF32 off" if "cuda" in m
                 else f", {m['threads']} threads, oneDNN (mkldnn) {'on' if m.get('mkldnn') else 'off'}")
        head.append(f"- PyTorch {m['torch']}{extra}, {m['memory_format']}")
    head += ["", "| model | batch | ringbench img/s | PyTorch img/s | ringbench / PyTorch |", "|---|---|---|---|---|"]
    text = "\n".join(head + lines) + "\n"
    for row in rows:
        if row["ringbench_layer_kinds"]:
            total = sum(k["forward_s"] + k["backward_s"] for k in row["ringbench_layer_kinds"])
            top = ", ".join(f"{k['kind']} {100 * (k['forward_s'] + k['backward_s']) / total:.0f}%"
                            for k in row["ringbench_layer_kinds"][:5])
            text += f"\nringbench {row['model']} batch {row['batch']}, layer time by kind: {top}"
    if not ok:
        text += "\n\n**Some runs failed or compared different networks: see raw/*.log.**"
    write_atomic(os.path.join(a.out, "table.md"), text + "\n")
    write_atomic(os.path.join(a.out, "summary.json"),
                 json.dumps({"args": vars(a), "meta": meta, "rows": rows}, indent=2) + "\n")
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
