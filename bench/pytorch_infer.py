#!/usr/bin/env python3
"""PyTorch eager inference throughput, the baseline `ringbench infer --scenarios offline` is compared with.

The same work as `ringbench infer --scenarios offline --batches ...`: for each batch size in turn,
whole batches through the network in eval mode (batch norm with its running statistics, dropout off), fp32, on a synthetic
batch that stays in memory, under torch.inference_mode(). Like ringbench, it runs a few untimed
batches of each size first, then batches back to back until both --min-duration seconds and
--min-samples samples are done; the result is samples / that window (LoadGen's Offline metric),
with each batch's time kept too. The networks are bench/pytorch_train.py's (mobilenet_v1 defined like
ringbench's, inception_v3 torchvision's without the aux head); the parameter count is printed
so a comparison can check that both sides ran the same network.

  bench/pytorch_infer.py --model mobilenet_v1 --batches 1,8,32 --threads 2 --min-duration 5 --json out.json
"""
import argparse
import os
import platform
import statistics
import sys
import time

import torch

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train import build, write_json_atomic  # noqa: E402  the same model definitions as the training comparison


def offline(infer, x, warmup, min_duration, min_samples):
    """One Offline run at x's batch: untimed batches, then batches until the window is long enough."""
    batch = x.shape[0]
    for _ in range(warmup):
        out = infer(x)
    batch_s, samples = [], 0
    t0 = time.perf_counter()
    while True:
        s0 = time.perf_counter()
        out = infer(x)
        t = time.perf_counter()
        batch_s.append(t - s0)
        samples += batch
        if t - t0 >= min_duration and samples >= min_samples:
            break
    duration = time.perf_counter() - t0
    img_s = [batch / s for s in batch_s]
    return out, {"batch": batch, "samples": samples, "batches": len(batch_s), "duration_s": duration,
                 "samples_per_s": samples / duration, "img_s_median_batch": statistics.median(img_s),
                 "img_s_min_batch": min(img_s), "img_s_max_batch": max(img_s), "batch_s": batch_s}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v1", help="lenet, mobilenet_v1 or inception_v3")
    p.add_argument("--batches", default="8", help="comma-separated batch sizes, run in this order")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    p.add_argument("--image-size", type=int, default=0, help="input height and width (0: the model's default)")
    p.add_argument("--classes", type=int, default=0, help="classes (0: the model's default)")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches before each size's run")
    p.add_argument("--min-duration", type=float, default=5.0, help="seconds each run's timed window lasts at least")
    p.add_argument("--min-samples", type=int, default=1, help="samples each run's timed window holds at least")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format (default NCHW, like ringbench)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cuda: each batch goes from host memory to the GPU and its logits come back, as "
                        "`ringbench infer --device cuda` does (cudnn.benchmark on, TF32 off)")
    p.add_argument("--json", help="write the results and settings here")
    a = p.parse_args()
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        sys.exit(f"pytorch_infer.py: --batches {a.batches!r}: comma-separated integers expected")
    if min(batches) < 1 or a.warmup < 0 or a.min_duration < 0:
        sys.exit("pytorch_infer.py: batches must be >= 1, --warmup and --min-duration >= 0")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("pytorch_infer.py: --device cuda, but torch.cuda.is_available() is False")
        torch.backends.cudnn.benchmark = True  # as ringbench's --conv-algo measure
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    t_setup = time.perf_counter()
    model, size = build(a.model, a.classes, aux_logits=False)
    size = a.image_size or size
    channels = 1 if a.model == "lenet" else 3
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(device=a.device, memory_format=fmt).eval()
    x = torch.rand(max(batches), channels, size, size).mul_(2).sub_(1).contiguous(memory_format=fmt)
    if a.device == "cuda":
        def infer(batch):  # the samples arrive in host memory and the logits return there
            return model(batch.to("cuda", non_blocking=False)).to("cpu")
    else:
        infer = model
    setup_s = time.perf_counter() - t_setup
    params = sum(q.numel() for q in model.parameters())

    meta = {"model": a.model, "params": params, "batches": batches, "warmup": a.warmup,
            "input": f"{channels}x{size}x{size}", "device": a.device, "torch": torch.__version__,
            "torch_file": torch.__file__, "python": platform.python_version(), "threads": torch.get_num_threads(),
            "mkldnn": torch.backends.mkldnn.is_available(), "cpu_capability": torch.backends.cpu.get_cpu_capability()
            if hasattr(torch.backends, "cpu") else None,
            "cuda": torch.version.cuda if a.device == "cuda" else None,
            "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None,
            "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
            "memory_format": "channels_last" if a.channels_last else "NCHW", "mode": "eval, torch.inference_mode",
            "min_duration_s": a.min_duration, "min_samples": a.min_samples, "setup_s": setup_s}
    print(f"# pytorch {torch.__version__} eager inference: {a.model}, {params} parameters, input {meta['input']}, "
          f"{meta['memory_format']}, fp32, {meta['threads']} threads, eval + inference_mode, {a.device}", flush=True)
    runs = []
    with torch.inference_mode():
        for b in batches:
            out, r = offline(infer, x[:b].contiguous(memory_format=fmt), a.warmup, a.min_duration, a.min_samples)
            out = out[0] if isinstance(out, tuple) else out
            r["output"] = list(out.shape)
            runs.append(r)
            print(f"Offline: batch {b}, {r['samples_per_s']:.1f} samples/s ({r['samples']} samples in "
                  f"{r['duration_s']:.3f} s; per batch median {r['img_s_median_batch']:.1f} img/s)", flush=True)
    if a.json:
        write_json_atomic(a.json, {"meta": meta, "offline": runs})


if __name__ == "__main__":
    main()
