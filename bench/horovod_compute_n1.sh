#!/usr/bin/env bash
# The step without the network, beside bench/horovod_vs_ringbench.sh: torch 1.13 (bench/pytorch_train.py,
# the network horovod_train.py trains) against `ringbench train` on one rank, alternating 3 times,
# both pinned to CPU 0 with one thread. MobileNet v1, 96 px, batch 8.  bench/horovod_compute_n1.sh OUT
set -euo pipefail
out=${1:?usage: horovod_compute_n1.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/.."
echo "start $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
for r in 1 2 3; do
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread OMP_NUM_THREADS=1 taskset -c 0 /usr/bin/python3 bench/pytorch_train.py \
    --model mobilenet_v1 --batch 8 --image-size 96 --device cpu --threads 1 --steps 30 --warmup 3 --json "$out/torch-r$r.json" > "$out/torch-r$r.log" 2>&1
  OMP_WAIT_POLICY=passive taskset -c 0 build/runner/ringbench train --model mobilenet_v1 --batch 8 --image-size 96 --ranks 1 --threads 1 \
    --steps 30 --warmup 3 --json "$out/ringbench-r$r.json" > "$out/ringbench-r$r.log" 2>&1
done
echo "end   $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
