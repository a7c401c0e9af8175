#!/usr/bin/env bash
# The tuned settings of both sides, measured back to back: Horovod 0.28.1 with fixed fusion
# threshold and cycle time (no autotune) and `ringbench train` with fixed communication settings,
# alternating round by round (odd rounds ringbench first), on the emulated cluster of
# bench/horovod_vs_ringbench.sh. As root, after bench/horovod_setup.sh and a ringbench build.
#
#   HVD_SETTINGS="4:5 8.14596:3.27781" \
#   RB_SETTINGS="{compression: none, fusion_mb: 1, first_bucket_mb: 4, segment: 256K};{compression: fp16, fusion_mb: 1, first_bucket_mb: 1, segment: 1M}" \
#   bench/horovod_check.sh OUT [NODES=2] [MODEL=mobilenet_v1] [ROUNDS=3] [LINK=1gbit]
#
# HVD_SETTINGS: space-separated FUSION_MB:CYCLE_MS[:fp16] (as Horovod's autotune log writes them;
# a third field fp16 adds hvd.Compression.fp16, which Horovod's autotune does not search);
# RB_SETTINGS: ';'-separated `train: settings:` entries. Horovod: OUT/horovod-r<R>-s<S>.json;
# ringbench: one sweep per round, OUT/ringbench-r<R>/.
set -euo pipefail
# shellcheck source=horovod_common.sh
. "$(dirname "$0")/horovod_common.sh"
horovod_args horovod_check.sh 3 "$@"
: "${HVD_SETTINGS:?set HVD_SETTINGS, e.g. \"4:5\"}" "${RB_SETTINGS:?set RB_SETTINGS}"

{
  echo "# ringbench's tuned settings, measured alternately with Horovod's (bench/horovod_check.sh)."
  echo "name: hvd-check-$model-n$nodes"
  echo "nodes: [$nodes]"
  echo "transports: [tcp]"
  echo "repeats: 1"
  echo "seed: 42"
  echo "timeout: 600"
  echo "cluster: {type: emulated, link: $link}"
  echo "train:"
  echo "  models: [{model: $model, batch: $batch, image_size: $size}]"
  echo "  warmup: 3"
  echo "  steps: 30"
  echo "  settings:"
  IFS=';' read -ra rbs <<< "$RB_SETTINGS"
  for s in "${rbs[@]}"; do echo "    - $s"; done
} > "$out/ringbench.yaml"

run_horovod() {
  local r=$1 s=0
  horovod_cluster_up
  for setting in $HVD_SETTINGS; do
    s=$((s + 1))
    local mb ms comp
    IFS=: read -r mb ms comp <<< "$setting"
    HOROVOD_FUSION_THRESHOLD=$(awk -v m="$mb" 'BEGIN { printf "%d", m * 1048576 }') HOROVOD_CYCLE_TIME=$ms \
      HVD_COMPRESSION=${comp:-none} horovod_job "horovod-r$r-s$s" 600 5
  done
  horovod_cluster_down
}

run_ringbench() {
  "$rb" sweep "$out/ringbench.yaml" --out "$out/ringbench-r$1" > "$out/ringbench-r$1.log" 2>&1
}

alternate_rounds
