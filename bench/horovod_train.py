#!/usr/bin/env python3
"""Horovod 0.28 data-parallel training with its autotune: the peer of `ringbench train --autotune`.

Each rank trains the model of bench/pytorch_train.py (the same network as ringbench's, parameter
count printed and checked with --expect-params) on a synthetic batch, fp32, with
hvd.DistributedOptimizer over gloo. Started by bench/horovod_launch.py, one rank per emulated
node. With HOROVOD_AUTOTUNE=1 it trains until Horovod's autotune has settled: rank 0 watches
HOROVOD_AUTOTUNE_LOG, where Horovod writes one row per scored setting and, when it stops
tuning, one row with the best; every --check-every steps the ranks agree (a broadcast) whether
that row is there. Then it runs --warmup and --steps steps on the tuned settings and measures
them. Without autotune it measures Horovod's defaults the same way.

Output (rank 0): a `Img/sec` line like Horovod's synthetic benchmark and, with --json, the
settle time, the tuned settings, and every measured step.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
from torch import nn
import horovod
import horovod.torch as hvd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train import lenet, mobilenet_v1, write_json_atomic  # noqa: E402  the same networks


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else default


def autotune_rows_when_settled():
    """Rows in Horovod's autotune log once it stops tuning (horovod/common/parameter_manager.cc,
    0.28.1): the Bayesian search over (fusion threshold, cycle time) scores max_samples + 1
    settings, once per value of every categorical parameter not fixed by the environment
    (hierarchical allgather, response cache; hierarchical and torus allreduce are fixed off on
    CPU), then one row with the best."""
    per_search = env_int("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", 20) + 1
    searches = 1
    if "HOROVOD_HIERARCHICAL_ALLGATHER" not in os.environ:
        searches *= 2
    if "HOROVOD_CACHE_CAPACITY" not in os.environ:
        searches *= 2
    return per_search * searches + 1


def log_rows(path):
    """Data rows of the autotune log so far (its header excluded); 0 before it exists."""
    try:
        with open(path) as f:
            return max(0, sum(1 for line in f if line.strip()) - 1)
    except FileNotFoundError:
        return 0


def last_row(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
        rows = [line.strip().split(",") for line in f if line.strip()]
    return {k.strip(): v.strip() for k, v in zip(header, rows[-1])}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v1", choices=["mobilenet_v1", "lenet"])
    p.add_argument("--batch", type=int, default=8, help="images per rank per step")
    p.add_argument("--image-size", type=int, default=0, help="0: the model's default (224, 28)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--warmup", type=int, default=3, help="steps after tuning, before measuring")
    p.add_argument("--steps", type=int, default=30, help="measured steps")
    p.add_argument("--check-every", type=int, default=10, help="steps between the ranks' 'settled?' agreements")
    p.add_argument("--max-tune-steps", type=int, default=20000, help="give up when autotune has not settled by then")
    p.add_argument("--expect-params", type=int, default=0, help="fail unless the model has this many parameters")
    p.add_argument("--compression", default="none", choices=["none", "fp16"],
                   help="hvd.Compression.fp16: gradients cast to fp16 for the allreduce, as ringbench's --compression fp16")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", help="rank 0 writes the results here")
    a = p.parse_args()

    hvd.init()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rank, size = hvd.rank(), hvd.size()
    classes = 10 if a.model == "lenet" else 1000
    model = lenet(classes) if a.model == "lenet" else mobilenet_v1(classes)
    image = a.image_size or (28 if a.model == "lenet" else 224)
    channels = 1 if a.model == "lenet" else 3
    params = sum(q.numel() for q in model.parameters())
    if a.expect_params and params != a.expect_params:
        sys.exit(f"horovod_train.py: {a.model} has {params} parameters, expected {a.expect_params}")
    model.train()
    decay = [q for q in model.parameters() if q.dim() > 1]
    rest = [q for q in model.parameters() if q.dim() <= 1]
    # ringbench's optimizer: SGD, lr 0.01 x ranks, momentum 0.9, weight decay 4e-5 on weights.
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 4e-5}, {"params": rest, "weight_decay": 0.0}],
                          lr=0.01 * size, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    compression = hvd.Compression.fp16 if a.compression == "fp16" else hvd.Compression.none
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), compression=compression)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed + rank)
    x = torch.randn(a.batch, channels, image, image, generator=g)
    y = torch.randint(0, classes, (a.batch,), generator=g)

    def step():
        opt.zero_grad()  # Horovod's wrapper takes no set_to_none
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()  # waits for every gradient's allreduce
        return float(loss)

    autotune = env_int("HOROVOD_AUTOTUNE", 0) > 0
    log = os.environ.get("HOROVOD_AUTOTUNE_LOG", "")
    if autotune and not log:
        sys.exit("horovod_train.py: HOROVOD_AUTOTUNE=1 needs HOROVOD_AUTOTUNE_LOG (settling is read from it)")
    want_rows = autotune_rows_when_settled() if autotune else 0
    if rank == 0:
        print(f"# horovod {horovod.__version__} torch {torch.__version__}: {a.model}, {params} parameters, "
              f"input {channels}x{image}x{image}, batch {a.batch} per rank, {size} ranks, gloo, "
              f"{a.threads} thread(s) per rank; autotune {'on: settled at ' + str(want_rows) + ' log rows' if autotune else 'off'}",
              flush=True)

    t0 = time.perf_counter()
    tune_steps, settled_s, settled_step = 0, None, None
    while autotune:
        step()
        tune_steps += 1
        if rank == 0 and settled_s is None and log_rows(log) >= want_rows:
            settled_s, settled_step = time.perf_counter() - t0, tune_steps
        if tune_steps % a.check_every == 0:
            if hvd.broadcast_object(settled_s is not None, root_rank=0, name="settled"):
                break
            if tune_steps >= a.max_tune_steps:
                sys.exit(f"horovod_train.py: autotune has not settled after {tune_steps} steps "
                         f"({log_rows(log)} of {want_rows} log rows)")
    tune_wall = time.perf_counter() - t0

    for _ in range(a.warmup):
        step()
    step_s = []
    c0 = time.process_time()  # every thread of the process: compute and Horovod's background loop
    w0 = time.perf_counter()
    for _ in range(a.steps):
        s0 = time.perf_counter()
        loss = step()
        step_s.append(time.perf_counter() - s0)
    window = time.perf_counter() - w0
    cpus_busy = (time.process_time() - c0) / window
    if rank != 0:
        return
    img_s = [size * a.batch / s for s in step_s]
    summary = {"total_img_s_median": statistics.median(img_s), "total_img_s_mean_of_steps": statistics.mean(img_s),
               "total_img_s_window": size * a.batch * a.steps / window, "step_s": step_s, "final_loss": loss,
               "cpus_busy_rank0": cpus_busy}
    meta = {"model": a.model, "params": params, "batch": a.batch, "input": f"{channels}x{image}x{image}",
            "ranks": size, "threads": a.threads, "warmup": a.warmup, "steps": a.steps, "seed": a.seed,
            "horovod": horovod.__version__, "torch": torch.__version__, "autotune": autotune,
            "compression": a.compression,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("HOROVOD_") and "RENDEZVOUS" not in k}}
    if autotune:
        meta["tuning"] = {"settled_s": settled_s, "settled_step": settled_step, "steps_run": tune_steps,
                          "wall_s": tune_wall, "log_rows": want_rows, "best": last_row(log)}
        best = meta["tuning"]["best"]
        print(f"# autotune settled after {settled_s:.1f} s ({settled_step} steps; {want_rows} log rows): "
              f"fusion {best.get('tensor_fusion_threshold')} MB, cycle {best.get('cycle_time_ms')} ms, "
              f"cache {best.get('cache_enabled')}, hierarchical allgather {best.get('hierarchical_allgather')}")
    print(f"Img/sec: total {summary['total_img_s_window']:.1f} on {size} ranks over {a.steps} steps "
          f"(median step {summary['total_img_s_median']:.1f}); final loss {loss:.4f}; "
          f"CPUs busy on rank 0 {cpus_busy:.2f}", flush=True)
    if a.json:
        write_json_atomic(a.json, {"meta": meta, "summary": summary})


if __name__ == "__main__":
    main()
