#!/usr/bin/env bash
# Installs the Debian 12 packages ringbench builds and tests with. Idempotent: when everything
# is already installed it only checks (well under a second) and touches nothing.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin          # MPI bootstrap under mpirun, MPI_Allreduce baseline
  libgtest-dev libgmock-dev           # tests
  libbenchmark-dev                    # microbenchmarks
  nlohmann-json3-dev libcli11-dev     # JSON output, command line
  iproute2 procps python3             # ip/ss; python3 summarizes benchmark runs
  libdnnl-dev zlib1g-dev              # oneDNN CPU backend; gzip'd idx datasets
  dataset-fashion-mnist               # the real dataset training is checked on
  libyaml-cpp-dev gnuplot-nox         # sweep configs; the report's SVG plots
  libturbojpeg0-dev                   # JPEG decoding of real image sets (train --data jpeg)
  libssl-dev                          # libcrypto: HMAC-SHA256 authentication of every connection
  libibverbs-dev ibverbs-providers    # the RDMA verbs transport (runs only where a device is)
  clang libclang-rt-dev               # libFuzzer and its sanitizers (scripts/fuzz.sh)
  ccache                              # scripts/test.sh: the cuda tree reuses the release tree's objects
  mold                                # the linker (RINGBENCH_LINKER=auto): 3x less link time than GNU ld
  dpkg-dev                            # scripts/package.sh: dpkg-shlibdeps finds the .deb's Depends
  slurmctld slurmd slurm-client munge # tests/slurm: a one-node Slurm the test starts
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (or with sudo)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
