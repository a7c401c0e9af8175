# Sourced by scripts/gpu_check.sh ($bindir, $out, $python, $root, fail): Offline inference img/s,
# `ringbench infer --backend cudnn` vs PyTorch eager (bench/pytorch_infer.py --device cuda), side by
# side: per round and model one process of each, which goes first alternating. Both take a batch
# from host memory to the GPU and its logits back. bench/summarize_infer.py makes the table.
echo "== inference on the GPU, Offline img/s: ringbench infer (cuDNN) vs PyTorch eager =="
if ! "$python" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "skipped: $python has no torch/torchvision with CUDA (set PYTHON)"
else
  inf=$out/infer/raw
  mkdir -p "$inf"
  for model in mobilenet_v1 inception_v3; do
    "$bindir/ringbench" train --model "$model" --steps 1 --warmup 0 --batch 1 --device cpu --log-every 0 \
      --json "$inf/${model}_params_ringbench.json" >/dev/null 2>&1 || fail "parameter count of $model"
  done
  for round in $(seq 1 "${INFER_ROUNDS:-2}"); do
    for model in mobilenet_v1 inception_v3; do
      size=224; [ "$model" = inception_v3 ] && size=299
      tag=${model}_t0_r$round
      inf_rb() {
        timeout 240 "$bindir/ringbench" infer --model "$model" --backend cudnn --device cuda --scenarios offline \
          --image-size "$size" --max-batch 32 --batches 1,8,32 --min-duration 2 --min-queries 1 \
          --json "$inf/${tag}_ringbench.json" >"$inf/${tag}_ringbench.log" 2>&1 || fail "infer $tag (see $inf/${tag}_ringbench.log)"
      }
      inf_pt() {
        timeout 240 "$python" "$root/bench/pytorch_infer.py" --model "$model" --device cuda --image-size "$size" \
          --batches 1,8,32 --warmup 5 --min-duration 2 --json "$inf/${tag}_pytorch.json" \
          >"$inf/${tag}_pytorch.log" 2>&1 || fail "pytorch_infer $tag (see $inf/${tag}_pytorch.log)"
      }
      if [ $((round % 2)) = 1 ]; then inf_rb; inf_pt; else inf_pt; inf_rb; fi
    done
  done
  "$python" "$root/bench/summarize_infer.py" "$out/infer" | tee "$out/infer/table.md" || fail "inference summary"
fi
