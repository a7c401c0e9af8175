#!/usr/bin/env python3
"""Sums ONEDNN_VERBOSE=1 exec lines (oneDNN 2.x format) of a ringbench run by what they do, so
a step's share of weight conversions, weight-gradient reorders, convolutions, ... can be read off.
  ONEDNN_VERBOSE=1 ringbench train ... > log; bench/onednn_verbose_breakdown.py log [steps]
Classes: conv fwd / bwd_data / bwd_weights; weight reorders fp32 -> bf16 between 4-5 dim
layouts (plain or blocked source) and bf16 -> bf16 between weight layouts (two blocked dims, as
OIhw8i16o2i); fp32 -> fp32 (weight gradients: to plain, or the block transpose before it); other
reorders (activations and their gradients); every other primitive kind. steps: divide the totals by it (ms per step; the run's warmup and measured steps)."""
import collections, sys

def layout(desc):
    # "src_f32::blocked:ABcd16b16a:f0" -> ("f32", "ABcd16b16a")
    name, rest = desc.split(":", 1)
    return name.split("_", 1)[1], rest.split(":")[2] if rest.count(":") >= 2 else rest

PLAIN = ("abcd", "abcde")

def classify(f):
    kind, prop, descs = f[3], f[5], f[6].split(" ")
    if kind == "convolution":
        return "conv " + {"forward_training": "fwd", "forward_inference": "fwd", "backward_data": "bwd_data",
                          "backward_weights": "bwd_weights"}.get(prop, prop)
    if kind == "reorder" and len(descs) == 2:
        (st, sl), (dt, dl) = layout(descs[0]), layout(descs[1])
        if st == "f32" and dt == "bf16" and sl in PLAIN and dl not in PLAIN:
            return "reorder weights: fp32 plain -> bf16 blocked"
        if st == "f32" and dt == "bf16" and sl not in PLAIN and dl not in PLAIN:
            return "reorder weights: fp32 blocked -> bf16 blocked"
        if st == "f32" and dt == "f32" and dl in PLAIN:
            return "reorder weight gradients: fp32 blocked -> plain"
        if st == "f32" and dt == "f32":
            return "reorder weight gradients: fp32 blocked -> blocked (transpose blocks)"
        if st == "bf16" and dt == "bf16" and sum(ch.isupper() for ch in sl) >= 2:
            return "reorder weights: bf16 blocked -> bf16 blocked"
        return f"reorder {st} -> {dt} (activations, gradients)"
    return kind + " " + prop

def main():
    path = sys.argv[1]
    steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    ms, count = collections.Counter(), collections.Counter()
    with open(path, errors="replace") as fh:
        for line in fh:
            if not (line.startswith("onednn_verbose,exec,") or line.startswith("dnnl_verbose,exec,")):
                continue
            f = line.rstrip("\n").split(",")
            try:
                t = float(f[-1])
            except ValueError:
                continue
            c = classify(f)
            ms[c] += t
            count[c] += 1
    total = sum(ms.values())
    print(f"| what | ms per step | share | calls per step |\n|---|---|---|---|")
    for c, t in ms.most_common():
        print(f"| {c} | {t / steps:.1f} | {100 * t / total:.1f}% | {count[c] / steps:.0f} |")
    print(f"| all primitives | {total / steps:.1f} | 100% | {sum(count.values()) / steps:.0f} |")

if __name__ == "__main__":
    main()
