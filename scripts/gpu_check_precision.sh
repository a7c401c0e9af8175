# Sourced by scripts/gpu_check.sh ($bindir, $out, $python, $root, fail): issue 39's GPU goals,
# each measured side by side in interleaved rounds (PREC_ROUNDS, default 2; PREC_STEPS, default 20):
#  1. the fused batch norm + activation (the cudnn default) against cuDNN's batch norm and a
#     separate activation pass (RINGBENCH_CUDNN_FUSE_BN=0), MobileNet v1 fp32, batch 64;
#  2. fp32 MobileNet v1 against PyTorch eager at batch 64 and 128 (goal: at least 1.0x);
#  3. bf16 and fp16 against PyTorch autocast (fp16 with a GradScaler), channels_last, MobileNet v1
#     and Inception v3 at batch 64 and 128 (goal: at least 1.1x). cudnn computes bf16/fp16 only
#     in its convolutions and fc layers so far (docs/precision.md), so 1.1x is not expected yet.
#     Where ringbench refuses a precision because the GPU is too old (bf16 below compute
#     capability 8.0, fp16 below 7.0: "needs a GPU of compute capability"), PyTorch's side is
#     still measured, as the target, and the refusal is said, not counted as a failure; any other
#     failure of the probe is one.
# About 8 minutes on an H200 for PyTorch's side alone; ringbench's bf16 and fp16 runs add to it
# (not yet timed).
# Alone: PRECISION_ONLY=1 scripts/gpu_check.sh (the GPU tests, then only this).
echo "== issue 39: fused batch norm + activation, and precisions vs PyTorch =="
prec=$out/precision
mkdir -p "$prec"
rounds=${PREC_ROUNDS:-2}
steps=${PREC_STEPS:-20}

echo "-- MobileNet v1 fp32 batch 64: fused batch norm + activation vs cuDNN's batch norm and the activation apart --"
for round in $(seq 1 "$rounds"); do
  for fuse in 1 0; do
    [ $((round % 2)) = 0 ] && fuse=$((1 - fuse))  # which goes first alternates
    tag=fuse$fuse-r$round
    RINGBENCH_CUDNN_FUSE_BN=$fuse timeout 180 "$bindir/ringbench" train --model mobilenet_v1 --batch 64 \
      --steps "$steps" --warmup 5 --device cuda --log-every 0 --layer-times 5 --json "$prec/$tag.json" \
      >"$prec/$tag.txt" 2>&1 || fail "train $tag (see $prec/$tag.txt)"
    echo "$tag: $(grep -E '^Img/sec' "$prec/$tag.txt")"
    grep -E "^# layers:" "$prec/$tag.txt" | head -1
  done
done
grep -ho "bn+relu6 fused kernel x[0-9]*" "$prec"/fuse1-r1.txt | head -1 ||
  fail "the fused run did not say it fused (see $prec/fuse1-r1.txt)"

if ! "$python" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "skipped the comparisons with PyTorch: $python has no torch/torchvision with CUDA (set PYTHON)"
else
  echo "-- fp32 MobileNet v1 vs PyTorch eager, batch 64 and 128 --"
  timeout 600 "$python" "$root/bench/compare_pytorch.py" --device cuda --bin "$bindir/ringbench" --python "$python" \
    --models mobilenet_v1 --batches 64,128 --rounds "$rounds" --steps "$steps" --warmup 5 \
    --out "$prec/fp32" >"$prec/fp32.log" 2>&1 || fail "fp32 comparison with PyTorch (see $prec/fp32.log)"
  grep -E "^\| mobilenet" "$prec/fp32/table.md"
  for p in bf16 fp16; do
    echo "-- $p vs PyTorch autocast, channels_last, MobileNet v1 and Inception v3, batch 64 and 128 --"
    probe=$prec/$p-probe.txt
    if "$bindir/ringbench" train --model lenet --batch 2 --steps 1 --warmup 0 --device cuda --precision "$p" \
      --log-every 0 >"$probe" 2>&1; then
      expect_ringbench=1
    elif grep -q "needs a GPU of compute capability" "$probe"; then
      expect_ringbench=0
      echo "ringbench refuses --precision $p on this GPU, so only PyTorch's side is measured: $(grep -m1 -i error "$probe")"
    else
      expect_ringbench=0
      fail "the $p probe failed otherwise than a refusal for this GPU (see $probe)"
    fi
    timeout 900 "$python" "$root/bench/compare_pytorch.py" --device cuda --bin "$bindir/ringbench" --python "$python" \
      --models mobilenet_v1,inception_v3 --batches 64,128 --rounds "$rounds" --steps "$steps" --warmup 5 \
      --precision "$p" --channels-last --out "$prec/$p" >"$prec/$p.log" 2>&1
    rc=$?
    [ $rc != 0 ] && [ $expect_ringbench = 1 ] && fail "$p comparison with PyTorch (see $prec/$p.log)"
    pytorch_runs=$(find "$prec/$p/raw" -name '*_pytorch.json' 2>/dev/null | wc -l)
    [ "$pytorch_runs" -lt $((rounds * 4)) ] && fail "PyTorch $p: $pytorch_runs of $((rounds * 4)) runs (see $prec/$p/raw)"
    grep -E "^\| (mobilenet|inception)" "$prec/$p/table.md"
  done
fi
