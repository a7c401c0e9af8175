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
out=${1:?usage: horovod_vs_ringbench.sh OUT [NODES] [MODEL] [ROUNDS] [LINK]}
nodes=${2:-2} model=${3:-mobilenet_v1} rounds=${4:-2} link=${5:-1gbit}
here=$(cd "$(dirname "$0")" && pwd)
rb=${RINGBENCH:-$here/../build/runner/ringbench}
venv=${HOROVOD_VENV:-/tmp/hvd-venv}
case $model in
  mobilenet_v1) batch=8 size=96 params=4231976 ;;
  lenet) batch=32 size=28 params=1663370 ;;
  *) echo "horovod_vs_ringbench.sh: model must be mobilenet_v1 or lenet, not '$model'" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cores=$(nproc)
cpus=$(seq -s, 0 $((cores - 1)))

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

made_hosts=() cluster_up=0
cleanup() {
  if ((cluster_up)); then "$rb" cluster down >/dev/null 2>&1 || true; fi
  for f in "${made_hosts[@]}"; do rm -f "$f"; rmdir "$(dirname "$f")" 2>/dev/null || true; done
}
trap cleanup EXIT

run_horovod() {
  local r=$1
  "$rb" cluster up --nodes "$nodes" --link "$link" >/dev/null  # refuses if one is up already
  cluster_up=1
  # Horovod 0.28.1's gloo device uses the address this host's name resolves to: in each node
  # namespace it must be that node's own (`ip netns exec` binds /etc/netns/<ns>/hosts).
  for ((k = 0; k < nodes; k++)); do
    local d=/etc/netns/ringbench-n$k
    mkdir -p "$d"
    [[ -e $d/hosts ]] || made_hosts+=("$d/hosts")
    printf '127.0.0.1 localhost\n10.77.0.%d %s\n' $((k + 1)) "$(hostname)" > "$d/hosts"
  done
  rm -f "$out/horovod-r$r.autotune.csv"
  local t0=$SECONDS
  HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_LOG="$out/horovod-r$r.autotune.csv" \
  HOROVOD_CACHE_CAPACITY=1024 HOROVOD_HIERARCHICAL_ALLGATHER=0 \
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread OMP_NUM_THREADS=1 \
    ip netns exec ringbench-sw "$venv/bin/python" "$here/horovod_launch.py" --nodes "$nodes" \
      --addr 10.77.0.254 --cpus "$cpus" --logdir "$out/horovod-r$r.logs" --timeout 2400 -- \
      "$venv/bin/python" "$here/horovod_train.py" --model "$model" --batch "$batch" --image-size "$size" \
      --threads 1 --warmup 3 --steps 30 --expect-params "$params" --json "$out/horovod-r$r.json"
  echo "horovod r$r: $((SECONDS - t0)) s" >> "$out/wall.txt"
  # The bytes each node sent through its shaped link: the job's traffic took the emulated network.
  for ((k = 0; k < nodes; k++)); do
    echo "== ringbench-n$k eth0"; tc -s -n ringbench-n$k qdisc show dev eth0
  done > "$out/horovod-r$r.tc.txt"
  "$rb" cluster down >/dev/null
  cluster_up=0
}

run_ringbench() {
  local r=$1 t0=$SECONDS
  "$rb" sweep "$out/ringbench.yaml" --out "$out/ringbench-r$r" > "$out/ringbench-r$r.log" 2>&1
  echo "ringbench r$r: $((SECONDS - t0)) s" >> "$out/wall.txt"
}

for ((r = 1; r <= rounds; r++)); do
  echo "round $r start $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
  if ((r % 2)); then run_ringbench "$r"; run_horovod "$r"; else run_horovod "$r"; run_ringbench "$r"; fi
  echo "round $r end   $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
done
