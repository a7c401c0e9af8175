#!/usr/bin/env bash
# Issue 40 remeasured: a fresh `ringbench tune` at N = 4, MobileNet v1 at 1 Gbit/s, then a
# 10-repeat alternating check of its choice against the session-28 grid's best three.
#   results/tune-n4-mobilenet-20261130/run.sh   (env RINGBENCH: the binary; OUT: where to write)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(realpath "${RINGBENCH:-$root/build/runner/ringbench}")
O=$(realpath -m "${OUT:-$root/results/tune-n4-mobilenet-rerun}")
rm -rf $O; mkdir -p $O; cd $O
cp "$root"/results/tune-n4-20261129/mobilenet/tune-1gbit.yaml .
sed -i 's/^name: .*/name: tune-n4-mobilenet-1gbit-20261130/' tune-1gbit.yaml
( while sleep 20; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done ) > uptime.log & up=$!
s=$(date +%s.%N)
$B tune tune-1gbit.yaml --out tune-1gbit > tune-1gbit.log 2>&1
echo "tune-1gbit wall $(echo "$(date +%s.%N) - $s" | bc) s" >> tune-1gbit.log
choice=$(python3 -c "
import json; c=json.load(open('tune-1gbit/tune.json'))['points'][0]['chosen']['settings']
print('{compression: %s, fusion_mb: %g, first_bucket_mb: %g, segment: %s}' % (c['compression'], c['fusion_mb'], c['first_bucket_mb'], c['segment']))")
echo "choice: $choice"
{
cat <<YAML
# tune's choice (this run) at N = 4 against the session-28 grid's best three
# (results/tune-n4-20261129/mobilenet/grid-1gbit), measured alternately (repeats outermost),
# 10 repeats: MobileNet v1 batch 8, 96 px, 4 emulated nodes at 1gbit, tcp.
name: tune-n4-mobilenet-1gbit-check10
nodes: [4]
transports: [tcp]
repeats: 10
seed: 42
timeout: 300
cluster:
  type: emulated
  link: 1gbit
train:
  models:
    - {model: mobilenet_v1, batch: 8, image_size: 96}
  warmup: 3
  steps: 20
  settings:
    - $choice
YAML
for s in "{compression: fp16, fusion_mb: 4, first_bucket_mb: 0.25, segment: 1M}" \
         "{compression: fp16, fusion_mb: 4, first_bucket_mb: 4, segment: 4M}" \
         "{compression: fp16, fusion_mb: 1, first_bucket_mb: 4, segment: 256K}"; do
  [ "$s" = "$choice" ] || echo "    - $s"
done
} > check-1gbit.yaml
s=$(date +%s.%N)
$B sweep check-1gbit.yaml --out check-1gbit > check-1gbit.log 2>&1
echo "check-1gbit wall $(echo "$(date +%s.%N) - $s" | bc) s" >> check-1gbit.log
kill $up
touch done
