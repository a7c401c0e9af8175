#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build ringbench with CUDA and NCCL for this GPU, run the GPU
# tests for real (a skipped one is reported, since here it should have run), check a few of
# them with compute-sanitizer, profile where a training step goes, and compare the training
# throughput with PyTorch eager side by side (bench/compare_pytorch.py).
#   scripts/gpu_check.sh [OUT_DIR]     (default results/gpu-check-<UTC time>)
# env: BUILD (build-gpu), CUDA_ARCH (native), PYTHON (python3, with torch and torchvision),
#      CUDNN_ROOT / NCCL_ROOT (wheel installs), ROUNDS (3), STEPS (30), QUICK=1 (tests only),
#      SHARE=0 (skip ranks sharing the GPU), ALGOS=0 (skip --conv-algo heuristic vs measure),
#      SANITIZE=0 (skip compute-sanitizer), SANITIZE_FILTER (its gtest filter), SANITIZE_TOOLS
#      ("memcheck racecheck"), TESTS=0 (skip the GPU tests), LAYERS=0 (skip --layer-times),
#      COMPARE=0 (skip the training comparison with PyTorch), MIGRATE=0 (skip the live migration
#      of a rank), INFER=0 (skip inference vs PyTorch), INFER_ROUNDS (2), PRECISION=0 (skip issue
#      39's fused batch norm and precision runs, scripts/gpu_check_precision.sh; PREC_ROUNDS,
#      PREC_STEPS), PRECISION_ONLY=1 (the GPU tests and those runs alone, ~10 min on an H200).
# A GPU machine without this project's build dependencies (no apt, no network: the lent ones):
# build here with scripts/gpu_pack.sh, carry build-gpu-pack/ there and run
#   PACK=build-gpu-pack scripts/gpu_check.sh
# which builds nothing, runs the packed binaries with the CUDA 13 libraries found there
# (PyTorch's wheels, else the toolkit's; RINGBENCH_CUDA_LIBS overrides) and the tests as
# plain GoogleTest binaries.
# Exit status: nonzero if the build, a test, the sanitizer or a comparison run failed.
set -uo pipefail
if [ "${PRECISION_ONLY:-0}" = 1 ]; then
  export LAYERS=0 ALGOS=0 COMPARE=0 SHARE=0 MIGRATE=0 INFER=0 SANITIZE=0 PRECISION=1
fi
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

# The folders holding one consistent set of CUDA 13 libraries: PyTorch's wheels first.
find_cuda_libs() {
  local roots=() n f dirs=""
  roots+=($("$python" -c 'import site; print(" ".join(p + "/nvidia" for p in site.getsitepackages()))' 2>/dev/null))
  roots+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt /usr/local)
  for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libnvrtc.so.13; do
    f=""
    for r in "${roots[@]}"; do
      [ -d "$r" ] && f=$(find "$r" -name "$n" -print -quit 2>/dev/null)
      [ -n "$f" ] && break
    done
    if [ -z "$f" ]; then echo "not found: $n" >&2; continue; fi
    echo "$n: $f" >&2
    case ":$dirs:" in *":$(dirname "$f"):"*) ;; *) dirs=${dirs:+$dirs:}$(dirname "$f") ;; esac
  done
  echo "$dirs"
}

if [ -n "${PACK:-}" ]; then
  pack=$(cd "$PACK" && pwd) || { echo "scripts/gpu_check.sh: PACK=$PACK is not a folder" >&2; exit 2; }
  cp "$pack/MANIFEST" "$out/pack-manifest.txt"
  echo "== packed build: $(head -2 "$pack/MANIFEST" | tr '\n' ' ') =="
  if [ -n "${RINGBENCH_CUDA_LIBS:-}" ]; then
    echo "CUDA libraries from RINGBENCH_CUDA_LIBS=$RINGBENCH_CUDA_LIBS" >"$out/cuda-libs.txt"
  else
    export RINGBENCH_CUDA_LIBS=$(find_cuda_libs 2>"$out/cuda-libs.txt")
  fi
  cat "$out/cuda-libs.txt"
  bindir=$pack/bin
  lib_path=$pack/lib:$RINGBENCH_CUDA_LIBS
  sanitized=$pack/libexec/cuda_layers_test
  echo "== GPU tests (the packed GoogleTest binaries) =="
  [ "${TESTS:-1}" = 1 ] || echo "TESTS=0: skipped"
  [ "${TESTS:-1}" = 1 ] && for t in cuda_layers_test cuda_train_test nccl_test; do
    "$bindir/$t" >"$out/gpu-test-$t.log" 2>&1 || fail "gpu test $t (see $out/gpu-test-$t.log)"
    echo "$t: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \].*tests?, listed' "$out/gpu-test-$t.log" | tr '\n' ' ')" \
      "skipped $(grep -E '^\[  SKIPPED \] [^ ]+$' "$out/gpu-test-$t.log" | sort -u | wc -l)"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$out/gpu-test-$t.log" | sort -u | head -20
  done
  [ "${TESTS:-1}" = 1 ] && cat "$out"/gpu-test-*.log >"$out/gpu-tests.log"
else
  args=(-DRINGBENCH_WITH_CUDA=ON -DRINGBENCH_WITH_NCCL=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-native}")
  [ -n "${CUDNN_ROOT:-}" ] && args+=(-DCUDNN_ROOT="$CUDNN_ROOT")
  [ -n "${NCCL_ROOT:-}" ] && args+=(-DNCCL_ROOT="$NCCL_ROOT")
  echo "== build ($build: ${args[*]}) =="
  if ! "$root/scripts/build.sh" "$build" "${args[@]}" >"$out/build.log" 2>&1; then
    tail -30 "$out/build.log"
    fail "build (see $out/build.log)"
    exit 1
  fi
  bindir=$build/runner
  lib_path=${LD_LIBRARY_PATH:-}
  sanitized=$build/tests/cuda_layers_test
  echo "== GPU tests (ctest -L '^gpu\$') =="
  if [ "${TESTS:-1}" = 1 ]; then
    (cd "$build" && ctest -L '^gpu$' --output-on-failure --timeout 600) >"$out/gpu-tests.log" 2>&1 || fail "gpu tests"
    grep -E "tests passed|tests failed" "$out/gpu-tests.log"
  else
    echo "TESTS=0: skipped"
  fi
fi
if [ "${TESTS:-1}" = 1 ] && grep -q "SKIPPED\|(Skipped)" "$out/gpu-tests.log"; then
  echo "skipped here (with a GPU present only NCCL's multi-rank tests may, needing one GPU per rank):"
  grep -E '^\[  SKIPPED \] [A-Za-z_0-9]+\.[A-Za-z_0-9/]+$|\(Skipped\)' "$out/gpu-tests.log" | sort -u | head -20
  echo "reasons:"
  grep -A1 -E ': Skipped$' "$out/gpu-tests.log" | grep -vE ': Skipped$|^--$' | sort | uniq -c | head -10
fi

[ "${QUICK:-0}" = 1 ] || {

[ "${LAYERS:-1}" = 1 ] && echo "== where a step goes (train --layer-times) ==" &&
for model in mobilenet_v1 inception_v3; do
  timeout 180 "$bindir/ringbench" train --model "$model" --batch 32 --steps 20 --warmup 5 --device cuda \
    --log-every 0 --layer-times 5 --json "$out/layers-$model-b32.json" >"$out/layers-$model-b32.txt" 2>&1 ||
    fail "train $model (see $out/layers-$model-b32.txt)"
  grep -E "^Img/sec|^# layers:" "$out/layers-$model-b32.txt"
done

if [ "${ALGOS:-1}" = 1 ]; then
  echo "== cuDNN convolution algorithms: --conv-algo heuristic vs measure, side by side =="
  for model in mobilenet_v1 inception_v3; do
    for batch in 32 64; do
      for algo in heuristic measure; do
        tag=algo-$model-b$batch-$algo
        timeout 180 "$bindir/ringbench" train --model "$model" --batch "$batch" --steps 20 --warmup 5 --device cuda \
          --conv-algo "$algo" --log-every 0 --json "$out/$tag.json" >"$out/$tag.txt" 2>&1 || fail "train $tag (see $out/$tag.txt)"
        echo "$tag: $(grep -E '^Img/sec' "$out/$tag.txt")"
      done
    done
  done
fi

echo "== ringbench vs PyTorch eager =="
if [ "${COMPARE:-1}" = 0 ]; then
  echo "COMPARE=0: skipped"
elif "$python" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout "${COMPARE_TIMEOUT:-600}" "$python" "$root/bench/compare_pytorch.py" --device cuda --bin "$bindir/ringbench" --python "$python" \
    --rounds "${ROUNDS:-3}" --steps "${STEPS:-30}" --out "$out/pytorch" || fail "comparison with PyTorch"
else
  echo "skipped: $python has no torch/torchvision with CUDA (set PYTHON)"
fi

if [ "${SHARE:-1}" = 1 ]; then
  echo "== ranks sharing the one GPU: our ring (shm, tcp), mobilenet_v1 batch 32 =="
  for transport in shm tcp; do
    for ranks in 1 2 4; do
      tag=share-$transport-r$ranks
      timeout 180 "$bindir/ringbench" train --model mobilenet_v1 --batch 32 --steps 20 --warmup 5 --device cuda \
        --ranks "$ranks" --transport "$transport" --log-every 0 --json "$out/$tag.json" >"$out/$tag.txt" 2>&1 ||
        fail "train $tag (see $out/$tag.txt)"
      echo "$tag: $(grep -E '^Total img/sec|^Img/sec' "$out/$tag.txt" | tr '\n' ' ')"
    done
  done
  echo "== vGPU time-slicing policies: 2 VMs of T4-4C on the one GPU, mobilenet_v1 batch 16 =="
  for policy in best_effort equal_share fixed_share; do
    timeout 240 "$bindir/ringbench" vgpu share --profile T4-4C --vms 2 --policy "$policy" --timeout 200 \
      --json "$out/vgpu-$policy.json" -- --model mobilenet_v1 --batch 16 --steps 20 --warmup 5 --device cuda \
      --allow-profile-mismatch --log-every 0 >"$out/vgpu-$policy.txt" 2>&1 || fail "vgpu share $policy (see $out/vgpu-$policy.txt)"
    tail -6 "$out/vgpu-$policy.txt"
  done
fi

[ "${MIGRATE:-1}" = 1 ] && . "$root/scripts/gpu_check_migrate.sh"
[ "${INFER:-1}" = 1 ] && . "$root/scripts/gpu_check_infer.sh"
[ "${PRECISION:-1}" = 1 ] && . "$root/scripts/gpu_check_precision.sh"
}

if [ "${SANITIZE:-1}" = 0 ]; then
  echo "== compute-sanitizer: SANITIZE=0, skipped =="
elif command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck and racecheck =="
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    LD_LIBRARY_PATH=$lib_path timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool $tool --error-exitcode 3 "$sanitized" \
      --gtest_filter="${SANITIZE_FILTER:-*Conv*:*Pool*:*Lenet*}" >"$out/sanitizer-$tool.log" 2>&1 ||
      fail "compute-sanitizer $tool (see $out/sanitizer-$tool.log)"
    tail -1 "$out/sanitizer-$tool.log"
  done
else
  echo "== compute-sanitizer: not installed, skipped =="
fi
echo "results in $out"
exit $status
