#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on its embedded
# default. For now that is a 4-rank allreduce sweep of our ring over TCP on this machine,
# checked exactly (results/latest/allreduce.json), then a short 2-rank data-parallel training
# run of lenet on synthetic data (results/latest/train.json, with a Chrome trace per rank).
# Extra arguments go to `ringbench allreduce` (e.g. -e 256M, --ranks 2, --impl mpi under mpirun).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
mkdir -p "$root/results/latest"
"$root/build/runner/ringbench" allreduce --ranks 4 -b 4K -e 64M -f 4 -n 20 -w 5 -c 1 \
  --json "$root/results/latest/allreduce.json" "$@"
echo
exec "$root/build/runner/ringbench" train --model lenet --ranks 2 --batch 32 --steps 30 --warmup 5 \
  --json "$root/results/latest/train.json" --timeline "$root/results/latest/train_trace.json"
