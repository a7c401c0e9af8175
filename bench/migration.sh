#!/usr/bin/env bash
# Live migration of a training rank on an emulated 4-node cluster (issue 20): stun time and
# total migration time against framebuffer size, pre-copy against stop-and-copy, at one link rate.
# Ranks 0..2 train on nodes 0..2 (network namespaces ringbench-n0..2); rank 2 moves to node 3
# (ringbench-n3) over the tc-shaped link. Needs root (namespaces).
#
#   bench/migration.sh OUT_DIR [LINK] [SIZES] [METHODS] [REPEATS]
#   e.g. bench/migration.sh results/migration-10gbit 10gbit "1G 2G 4G 8G" "precopy stopcopy" 1
#
# Writes OUT_DIR/<method>-<size>-r<k>.json (train --json, with "migration") and the logs, the
# cluster's description, and the command lines; summarize with bench/summarize_migration.py.
set -euo pipefail
out=${1:?usage: $0 OUT_DIR [LINK] [SIZES] [METHODS] [REPEATS]}
link=${2:-10gbit}
sizes=${3:-1G 2G 4G 8G}
methods=${4:-precopy stopcopy}
repeats=${5:-1}
rb=${RINGBENCH:-$(dirname "$0")/../build/runner/ringbench}
model_args=${MODEL_ARGS:---model mobilenet_v1 --image-size 96 --batch 8 --threads 1}
steps=${STEPS:-120}
at=${AT:-15}
mkdir -p "$out"
[ -x "$rb" ] || { echo "no ringbench at $rb (set RINGBENCH)" >&2; exit 2; }
"$rb" cluster down >/dev/null 2>&1 || true
"$rb" cluster up --nodes 4 --link "$link"
trap '"$rb" cluster down >/dev/null 2>&1 || true' EXIT
ip netns exec ringbench-n0 ip -4 addr show > "$out/cluster.txt"
tc -s qdisc show dev "$(ip -o link | awk -F': ' '/ringbench/ {print $2; exit}' | cut -d@ -f1)" >> "$out/cluster.txt" 2>&1 || true

secret=$(openssl rand -hex 32)
run_point() {  # method size repeat
  local name="$1-$2-r$3" port=$((29500 + RANDOM % 1000)) pids=()
  local args="train $model_args --warmup 5 --steps $steps --log-every 10 --timeout 60
              --migrate-at $at --migrate-rank 2 --migrate-method $1 --migrate-netns ringbench-n3 --framebuffer $2"
  echo "$rb $args" > "$out/$name.cmd"
  for r in 0 1 2; do
    local extra=""; [ "$r" = 0 ] && extra="--json $out/$name.json"
    ip netns exec "ringbench-n$r" env RINGBENCH_RANK=$r RINGBENCH_WORLD_SIZE=3 RINGBENCH_STORE=10.77.0.1:$port \
      RINGBENCH_SECRET="$secret" RINGBENCH_JOB_ID="$name" $( [ "$r" = 0 ] && echo RINGBENCH_STORE_SERVE=1 ) \
      OMP_WAIT_POLICY=passive "$rb" $args $extra > "$out/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  echo "$name: exit $rc; $(grep -h '^# migration' "$out/$name.rank0.log" || echo 'no migration line')"
}
for k in $(seq 1 "$repeats"); do
  for size in $sizes; do
    for m in $methods; do run_point "$m" "$size" "$k"; done
  done
done
