#!/usr/bin/env bash
# Remote against local (issue 41): MobileNet v1 at batch 8, training img/s and inference Offline
# samples/s, on this machine's CPU backend here (`--device cpu`) and behind `ringbench
# device-server` (the CPU standing in for a GPU) over loopback TCP, unshaped and through the
# server's shaping proxy at each LINK (RATE_GBPS:LATENCY_US). Rounds alternate the setups so
# machine noise hits all alike. Writes raw JSON, the server logs and table.md.
#   bench/remote_gpu.sh [OUT_DIR]   (env: LINKS, ROUNDS, STEPS, WARMUP, THREADS, IMAGE, MIN_S, BIN)
set -euo pipefail
out=${1:-results/remote-gpu}
bin=${BIN:-build/runner/ringbench}
links=${LINKS:-"0:0 10:50 10:1000 1:50 1:500"}  # 0:0 = unshaped loopback
rounds=${ROUNDS:-3}
steps=${STEPS:-6}
warmup=${WARMUP:-2}
threads=${THREADS:-1}
image=${IMAGE:-224}
min_s=${MIN_S:-5}
export RINGBENCH_SECRET=${RINGBENCH_SECRET:-$(openssl rand -hex 32)}
mkdir -p "$out/raw"
train_args="--model mobilenet_v1 --batch 8 --image-size $image --steps $steps --warmup $warmup --threads $threads --log-every 0"
infer_args="--model mobilenet_v1 --image-size $image --max-batch 8 --batches 8 --scenarios offline --min-duration $min_s --min-queries 1 --threads $threads"
for r in $(seq 1 "$rounds"); do
  echo "== round $r: local"
  "$bin" train $train_args --device cpu --backend onednn --json "$out/raw/train_local_r$r.json" | grep -E "^Total" || true
  "$bin" infer $infer_args --device cpu --backend onednn --json "$out/raw/infer_local_r$r.json" >/dev/null
  for link in $links; do
    gbps=${link%%:*} lat=${link##*:}
    tag="remote_${gbps}g_${lat}us"
    echo "== round $r: $tag"
    "$bin" device-server --threads "$threads" --clients 2 --link-gbps "$gbps" --link-latency-us "$lat" \
      --port-file "$out/raw/port" >"$out/raw/server_${tag}_r$r.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do [ -s "$out/raw/port" ] && break; sleep 0.1; done
    port=$(cat "$out/raw/port")
    "$bin" train $train_args --device "remote:127.0.0.1:$port" --json "$out/raw/train_${tag}_r$r.json" | grep -E "^Total|remote traffic" || true
    "$bin" infer $infer_args --device "remote:127.0.0.1:$port" --json "$out/raw/infer_${tag}_r$r.json" | grep -E "remote traffic" || true
    wait "$server"
    rm -f "$out/raw/port"
  done
done
python3 "$(dirname "$0")/summarize_remote_gpu.py" "$out/raw" > "$out/table.md"
cat "$out/table.md"
