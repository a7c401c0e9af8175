#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyTorch CPU, gloo and MPI) in a venv, the peer that
# bench/horovod_autotune.sh compares `ringbench train --autotune` with (issue 40, "Against
# Horovod"). Nothing of ringbench depends on it.
#
#   bench/horovod_setup.sh [VENV]        # default /tmp/hvd-venv; as root on Debian 12
#
# Horovod has no wheel on PyPI: pip compiles the sdist (about 8 minutes on 2 cores). The venv
# sees Debian's python3-torch 1.13 (--system-site-packages); /usr/bin/python3 is the Python
# that has it. libopenblas0-pthread switches the system's libblas/liblapack alternatives to
# OpenBLAS; they are set back to the reference ones after (torch finds OpenBLAS through
# LD_LIBRARY_PATH at run time, see horovod_autotune.sh).
set -euo pipefail
venv=${1:-/tmp/hvd-venv}
py=/usr/bin/python3

if [[ $(id -u) -eq 0 ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch python3-dev cmake python3-venv \
    python3-pip libopenblas0-pthread openmpi-bin libopenmpi-dev
  arch=x86_64-linux-gnu
  update-alternatives --set libblas.so.3-$arch /usr/lib/$arch/blas/libblas.so.3
  update-alternatives --set liblapack.so.3-$arch /usr/lib/$arch/lapack/liblapack.so.3
fi
"$py" -c 'import torch' || { echo "horovod_setup.sh: $py has no torch (apt-get install python3-torch)" >&2; exit 1; }

[[ -x $venv/bin/python ]] || "$py" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install cloudpickle packaging
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1 \
HOROVOD_WITH_MPI=1 HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS=-j2 CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "$venv/bin/pip" install --no-build-isolation --no-cache-dir horovod==0.28.1
"$venv/bin/horovodrun" --check-build
