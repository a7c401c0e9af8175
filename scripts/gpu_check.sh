#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build ringbench with CUDA and NCCL for this GPU, run the GPU
# tests for real (a skipped one is reported, since here it should have run), check a few of
# them with compute-sanitizer, profile where a training step goes, and compare the training
# throughput with PyTorch eager side by side (bench/compare_pytorch.py).
#   scripts/gpu_check.sh [OUT_DIR]     (default results/gpu-check-<UTC time>)
# env: BUILD (build-gpu), CUDA_ARCH (native), PYTHON (python3, with torch and torchvision),
#      CUDNN_ROOT / NCCL_ROOT (wheel installs), ROUNDS (3), STEPS (30), QUICK=1 (tests only).
# Exit status: nonzero if the build, a test, the sanitizer or a comparison run failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu-check-$(date -u +%Y%m%d-%H%M%S)}
build=${BUILD:-$root/build-gpu}
python=${PYTHON:-python3}
status=0
fail() { echo "FAILED: $*" | tee -a "$out/failures.txt"; status=1; }

mkdir -p "$out"
if ! command -v nvidia-smi >/dev/null; then
  echo "scripts/gpu_check.sh: no NVIDIA GPU here (no nvidia-smi)" >&2
  exit 2
fi
if ! nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1; then
  echo "scripts/gpu_check.sh: no usable NVIDIA GPU here (nvidia-smi -L failed: $(head -1 "$out/nvidia-smi.txt"))" >&2
  exit 2
fi
nvidia-smi >>"$out/nvidia-smi.txt" 2>&1
head -1 "$out/nvidia-smi.txt"

args=(-DRINGBENCH_WITH_CUDA=ON -DRINGBENCH_WITH_NCCL=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-native}")
[ -n "${CUDNN_ROOT:-}" ] && args+=(-DCUDNN_ROOT="$CUDNN_ROOT")
[ -n "${NCCL_ROOT:-}" ] && args+=(-DNCCL_ROOT="$NCCL_ROOT")
echo "== build ($build: ${args[*]}) =="
if ! "$root/scripts/build.sh" "$build" "${args[@]}" >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  fail "build (see $out/build.log)"
  exit 1
fi

echo "== GPU tests (ctest -L '^gpu\$') =="
(cd "$build" && ctest -L '^gpu$' --output-on-failure --timeout 600) >"$out/gpu-tests.log" 2>&1 || fail "gpu tests"
grep -E "tests passed|tests failed" "$out/gpu-tests.log"
if grep -q "(Skipped)" "$out/gpu-tests.log"; then
  echo "skipped here (with a GPU present; NCCL's multi-rank tests need one GPU per rank):"
  grep -A1 "Skipped" "$out/gpu-tests.log" | grep -E "Skipped|\(Skipped\)" | head -20
fi

if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck and racecheck =="
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 3 "$build/tests/cuda_layers_test" \
      --gtest_filter='*Conv*:*Pool*:*Lenet*' >"$out/sanitizer-$tool.log" 2>&1 ||
      fail "compute-sanitizer $tool (see $out/sanitizer-$tool.log)"
    tail -1 "$out/sanitizer-$tool.log"
  done
else
  echo "== compute-sanitizer: not installed, skipped =="
fi
[ "${QUICK:-0}" = 1 ] && exit $status

echo "== where a step goes (train --layer-times) =="
for model in mobilenet_v1 inception_v3; do
  "$build/runner/ringbench" train --model "$model" --batch 32 --steps 20 --warmup 5 --device cuda \
    --log-every 0 --layer-times 5 --json "$out/layers-$model-b32.json" >"$out/layers-$model-b32.txt" 2>&1 ||
    fail "train $model (see $out/layers-$model-b32.txt)"
  grep -E "^Img/sec|^# layers:" "$out/layers-$model-b32.txt"
done

echo "== ringbench vs PyTorch eager =="
if "$python" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  "$python" "$root/bench/compare_pytorch.py" --device cuda --bin "$build/runner/ringbench" --python "$python" \
    --rounds "${ROUNDS:-3}" --steps "${STEPS:-30}" --out "$out/pytorch" || fail "comparison with PyTorch"
else
  echo "skipped: $python has no torch/torchvision with CUDA (set PYTHON)"
fi
echo "results in $out"
exit $status
