#!/usr/bin/env bash
# Horovod 0.28.1's autotune against `ringbench train --autotune` (issue 40, "Against Horovod"):
# the same model, ranks and emulated links, alternating run by run. As root, after
# bench/horovod_setup.sh and a ringbench build.
#
#   bench/horovod_vs_ringbench.sh OUT [NODES=2] [MODEL=mobilenet_v1] [ROUNDS=2] [LINK=1gbit]
#
# Each round runs, in alternating order (odd rounds ringbench first):
#   - Horovod: `ringbench cluster up` (the namespaces, veths and tc htb a sweep builds, persistent
#     as ringbench-n<k>/-sw), one rank per node started by bench/horovod_launch.py, pinned to the
#     CPU a sweep pins that node to (node k: CPU k mod cores), HOROVOD_AUTOTUNE=1, its log in
#     OUT/horovod-r<R>.autotune.csv, results OUT/horovod-r<R>.json (bench/horovod_train.py);
#   - ringbench: `ringbench sweep` of OUT/ringbench.yaml (train: tuned: true, i.e. train
#     --autotune in the point) into OUT/ringbench-r<R>/.
# The response cache and hierarchical allgather are fixed (HOROVOD_CACHE_CAPACITY=1024,
# HOROVOD_HIERARCHICAL_ALLGATHER=0), so Horovod's autotune searches only what ours does:
# the fusion threshold and the cycle time (see the results README for why).
set -euo pipefail
# shellcheck source=horovod_common.sh
. "$(dirname "$0")/horovod_common.sh"
horovod_args horovod_vs_ringbench.sh 2 "$@"

cat > "$out/ringbench.yaml" <<YAML
# train --autotune inside the point (tuned: true): $model, batch $batch, $nodes emulated nodes at $link.
name: hvd-ringbench-$model-n$nodes
nodes: [$nodes]
transports: [tcp]
repeats: 1
seed: 42
timeout: 900
cluster:
  type: emulated
  link: $link
train:
  models:
    - {model: $model, batch: $batch, image_size: $size}
  warmup: 3
  steps: 30
  tuned: true
YAML

run_horovod() {
  local r=$1
  horovod_cluster_up
  rm -f "$out/horovod-r$r.autotune.csv"
  local t0=$SECONDS
  HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_LOG="$out/horovod-r$r.autotune.csv" horovod_job "horovod-r$r" 2400 3
  echo "horovod r$r: $((SECONDS - t0)) s" >> "$out/wall.txt"
  # The bytes each node sent through its shaped link: the job's traffic took the emulated network.
  for ((k = 0; k < nodes; k++)); do
    echo "== ringbench-n$k eth0"; tc -s -n ringbench-n$k qdisc show dev eth0
  done > "$out/horovod-r$r.tc.txt"
  horovod_cluster_down
}

run_ringbench() {
  local r=$1 t0=$SECONDS
  "$rb" sweep "$out/ringbench.yaml" --out "$out/ringbench-r$r" > "$out/ringbench-r$r.log" 2>&1
  echo "ringbench r$r: $((SECONDS - t0)) s" >> "$out/wall.txt"
}

alternate_rounds
