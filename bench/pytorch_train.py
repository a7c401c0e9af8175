#!/usr/bin/env python3
"""PyTorch eager training throughput, the baseline `ringbench train` is compared with.

The same work as `ringbench train --data synthetic` on one rank: forward, cross-entropy,
backward and SGD with momentum (weight decay on conv and fc weights only) in fp32, on a
synthetic batch that stays on the device. mobilenet_v1 is defined here like ringbench's
(MobileNet v1 1.0: batch norm eps 1e-3, ReLU6, dropout 1e-3, a 1024 -> classes fc);
inception_v3 is torchvision's. Parameter counts are printed so a comparison can check
that both sides trained the same network.

  bench/pytorch_train.py --model mobilenet_v1 --batch 32 --device cuda --json out.json
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
from torch import nn


def mobilenet_v1(classes, dropout=1e-3):
    def conv_bn(cin, cout, stride, groups=1, k=3):
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout, eps=1e-3), nn.ReLU6(inplace=True)]

    layers = conv_bn(3, 32, 2)
    blocks = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512), (1, 512),
              (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]
    c = 32
    for stride, out in blocks:
        layers += conv_bn(c, c, stride, groups=c)   # depthwise 3x3
        layers += conv_bn(c, out, 1, k=1)           # pointwise 1x1
        c = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(1024, classes)]
    return nn.Sequential(*layers)


def lenet(classes):
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(512, classes))


def build(name, classes, aux_logits):
    if name == "mobilenet_v1":
        return mobilenet_v1(classes or 1000), 224
    if name == "lenet":
        return lenet(classes or 10), 28
    if name == "inception_v3":
        import torchvision
        # init_weights=False: PyTorch's default initialisation (the truncated normal needs scipy
        # and changes nothing about the speed).
        return torchvision.models.inception_v3(weights=None, aux_logits=aux_logits, init_weights=False,
                                               num_classes=classes or 1000), 299
    sys.exit(f"pytorch_train.py: unknown --model {name!r}: lenet, mobilenet_v1 or inception_v3")


def write_json_atomic(path, doc):
    """The JSON result, whole or not at all: written beside, then renamed over the path."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v1", help="lenet, mobilenet_v1 or inception_v3")
    p.add_argument("--batch", type=int, default=32, help="images per step")
    p.add_argument("--steps", type=int, default=20, help="measured steps (after the warmup)")
    p.add_argument("--warmup", type=int, default=5, help="steps before measuring (cudnn.benchmark tunes here)")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    p.add_argument("--image-size", type=int, default=0, help="input height and width (0: the model's default)")
    p.add_argument("--classes", type=int, default=0, help="classes (0: the model's default)")
    p.add_argument("--aux-logits", action="store_true", help="inception_v3: train with the auxiliary head")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=4e-5)
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format (default NCHW, like ringbench)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="fp32, or automatic mixed precision (torch.autocast) in bf16 or fp16 (fp16 with a "
                        "GradScaler, as AMP): fp32 master weights and optimizer, as ringbench --precision")
    p.add_argument("--json", help="write the results and settings here")
    a = p.parse_args()
    if a.batch < 1 or a.steps < 1 or a.warmup < 0:
        sys.exit("pytorch_train.py: --batch and --steps must be >= 1, --warmup >= 0")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_train.py: --device cuda but PyTorch sees no GPU (use --device cpu)")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.backends.cudnn.benchmark = True
    # fp32 means fp32: no TF32 in convolutions or matrix products (ringbench's default too).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)

    model, size = build(a.model, a.classes, a.aux_logits)
    size = a.image_size or size
    channels = 1 if a.model == "lenet" else 3
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(dev, memory_format=fmt).train()
    decay = [q for q in model.parameters() if q.dim() > 1]   # conv and fc weights
    rest = [q for q in model.parameters() if q.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": a.weight_decay},
                           {"params": rest, "weight_decay": 0.0}], lr=a.lr, momentum=a.momentum)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, channels, size, size, device=dev).contiguous(memory_format=fmt)
    classes = a.classes or (10 if a.model == "lenet" else 1000)
    y = torch.randint(0, classes, (a.batch,), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler(dev.type) if a.precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=low, enabled=low is not None):
            out = model(x)
            if isinstance(out, tuple):  # inception_v3 with the auxiliary head
                loss = loss_fn(out[0], y) + 0.4 * loss_fn(out[1], y)
            else:
                loss = loss_fn(out, y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    step_s = []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        s0 = time.perf_counter()
        loss = step()
        sync()
        step_s.append(time.perf_counter() - s0)
    wall = time.perf_counter() - t0
    img_s = [a.batch / s for s in step_s]
    params = sum(q.numel() for q in model.parameters())

    meta = {"model": a.model, "params": params, "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
            "input": f"{channels}x{size}x{size}", "device": a.device, "torch": torch.__version__,
            "python": platform.python_version(), "threads": torch.get_num_threads(),
            "memory_format": "channels_last" if a.channels_last else "NCHW",
            "cudnn_benchmark": True, "tf32": False, "precision": a.precision,
            "autocast": a.precision != "fp32"}
    if dev.type == "cuda":
        meta.update({"gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(),
                     "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20})
    else:
        meta["mkldnn"] = torch.backends.mkldnn.is_available()
    q = statistics.quantiles(img_s, n=4) if len(img_s) > 1 else [img_s[0]] * 3
    summary = {"img_s_median": statistics.median(img_s), "img_s_q1": q[0], "img_s_q3": q[2],
               "img_s_min": min(img_s), "img_s_max": max(img_s), "img_s_window": a.batch * a.steps / wall,
               "step_s": step_s, "final_loss": float(loss)}
    print(f"# pytorch {torch.__version__} eager: {a.model}, {params} parameters, input {meta['input']}, "
          f"batch {a.batch}, {meta['memory_format']}, "
          f"{'fp32 (no TF32)' if a.precision == 'fp32' else 'autocast ' + a.precision}, device {meta.get('gpu', a.device)}, "
          f"{meta['threads']} threads")
    print(f"Img/sec: {summary['img_s_median']:.1f} median (quartiles {q[0]:.1f}-{q[2]:.1f}) over {a.steps} steps; "
          f"{summary['img_s_window']:.1f} over the whole window; final loss {summary['final_loss']:.4f}")
    if a.json:
        write_json_atomic(a.json, {"meta": meta, "summary": summary})


if __name__ == "__main__":
    main()
