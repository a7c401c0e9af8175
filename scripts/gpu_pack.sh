#!/usr/bin/env bash
# Builds ringbench with CUDA and NCCL here (no GPU needed) and packs what the GPU tests, the
# sanitizer checks and `train` need into one folder, for a GPU machine that has the NVIDIA driver
# and CUDA 13 libraries (cudart, cuBLAS, cuDNN 9, NCCL 2, e.g. from PyTorch's wheels) but none
# of this project's Debian libraries and no way to install them. There:
#   PACK=<that folder> scripts/gpu_check.sh
#   scripts/gpu_pack.sh [PACK_DIR]   (default build-gpu-pack; build tree $BUILD, default build-gpu)
# env: CUDA_ARCH (90: H100/H200; the GPU is not here, so `native` cannot be used).
# The pack holds: libexec/ (the binaries), lib/ (their non-CUDA, non-glibc libraries, copied from
# this machine), bin/ (wrappers that set LD_LIBRARY_PATH to lib/ and $RINGBENCH_CUDA_LIBS) and
# MANIFEST (commit, arch, sizes). The CUDA libraries are not packed: cuDNN alone is >500 MB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pack=${1:-$root/build-gpu-pack}
build=${BUILD:-$root/build-gpu}
binaries=(runner/ringbench tests/cuda_layers_test tests/cuda_train_test tests/nccl_test)

# Replaces only an earlier pack (it has a MANIFEST), never another folder given by mistake.
if [ -e "$pack" ] && { [ ! -d "$pack" ] || [ -L "$pack" ] || { [ -n "$(ls -A "$pack")" ] && [ ! -f "$pack/MANIFEST" ]; }; }; then
  echo "scripts/gpu_pack.sh: $pack exists and is not an earlier pack (no MANIFEST): choose another folder" >&2
  exit 2
fi
"$root/scripts/build.sh" --configure-only "$build" -DRINGBENCH_WITH_CUDA=ON -DRINGBENCH_WITH_NCCL=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DCMAKE_BUILD_TYPE=Release -DRINGBENCH_BUILD_BENCH=OFF
# Only what is packed: the whole tree takes three times as long on a 2-core machine.
"$root/scripts/build.sh" --build-only "$build" "${binaries[@]##*/}"

rm -rf "$pack"
mkdir -p "$pack/libexec" "$pack/lib" "$pack/bin"
# glibc and libstdc++ stay the GPU machine's own (newer there; ours would break its python).
# The CUDA libraries come from the GPU machine too, through RINGBENCH_CUDA_LIBS.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|librt\.so|libdl\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcudnn|libnccl|libnvrtc)'
for b in "${binaries[@]}"; do
  name=$(basename "$b")
  cp "$build/$b" "$pack/libexec/$name"
  strip --strip-unneeded "$pack/libexec/$name"  # the carry limit is 64 MiB, oneDNN alone 38
  ldd "$build/$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r soname path; do
    [[ $soname =~ $skip ]] || cp -L "$path" "$pack/lib/$soname"
  done
  cat >"$pack/bin/$name" <<EOF
#!/bin/sh
# ringbench's packed $name: its libraries from ../lib, CUDA's from \$RINGBENCH_CUDA_LIBS.
here=\$(dirname "\$(readlink -f "\$0")")
LD_LIBRARY_PATH="\$here/../lib\${RINGBENCH_CUDA_LIBS:+:\$RINGBENCH_CUDA_LIBS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  exec "\$here/../libexec/$name" "\$@"
EOF
  chmod +x "$pack/bin/$name"
done
# Open MPI's plugins are loaded only by MPI_Init, which the GPU checks never call.
{
  echo "commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo '+dirty')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), CUDA arch ${CUDA_ARCH:-90}"
  echo "nvcc $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  (cd "$pack" && find libexec lib -type f -printf '%s %p\n' | sort -k2)
} >"$pack/MANIFEST"
echo "packed $(du -sh "$pack" | cut -f1) into $pack: carry it to the GPU machine and run"
echo "  PACK=${pack#$root/} scripts/gpu_check.sh"
