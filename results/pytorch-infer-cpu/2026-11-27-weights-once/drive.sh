#!/usr/bin/env bash
# old/new ringbench binaries, each with its own PyTorch pair, alternating which binary goes first.
set -euo pipefail
cd /work/main
reps=${REPS:-3}
for rep in $(seq 1 "$reps"); do
  order="old new"; [ $((rep % 2)) = 0 ] && order="new old"
  for v in $order; do
    BIN=/tmp/ringbench.$v REPEATS=1 THREADS=2 MODELS="${MODELS:-mobilenet_v1}" QUIET_WAIT=${QUIET_WAIT:-30} \
      bench/infer_vs_pytorch.sh /tmp/rb19/${TAG:-mb}/$v/r$rep > /tmp/rb19/${TAG:-mb}_${v}_r$rep.out 2>&1
  done
done
