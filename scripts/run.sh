#!/usr/bin/env bash
# README command 1: install what is missing, build, and run a sweep config (configs/quick.yaml
# unless another is named): on four emulated nodes (network namespaces, 1 Gbit/s links), LeNet
# and a small MobileNet v1 on 1, 2 and 4 nodes over our TCP ring and MPI_Allreduce, plus an
# allreduce size sweep. The results and report land in results/<run-id>/ (report.md, plots/).
# Extra arguments go to `ringbench sweep` (docs/cli/sweep.md). Each step says what it does and
# about how long it takes; the build shows one progress line (scripts/progress.sh), its output in
# build.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
config=${1:-$root/configs/quick.yaml}
shift || true
echo "run.sh: 1/3 checking the Debian packages ringbench needs (installs what is missing: a minute or two the first time)"
"$root/scripts/install-deps.sh"
echo "run.sh: 2/3 building build/ringbench (a first build takes ~6 min on 2 cores, longer with CUDA; an up-to-date one seconds)"
"$root/scripts/build.sh" "$root/build" 2>&1 | "$root/scripts/progress.sh" "$root/build.log" "build" ||
  { echo "run.sh: the build failed; its output is in $root/build.log" >&2; exit 1; }
echo "run.sh: 3/3 running the sweep $config (one line per point with the time left; then the report)"
cd "$root"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # the MPI baseline, as root
run_dir=results/$(basename "$config" .yaml)-$(date -u +%Y%m%d-%H%M%S)
status=0
"$root/build/runner/ringbench" sweep "$config" --out "$run_dir" "$@" || status=$?
if [ -f "$run_dir/report.md" ]; then
  echo
  # The per-model scaling tables, straight from the report.
  awk '/^## Where the time goes/{exit} /^## /{show = ($0 !~ /Definitions/)} show && !/^!\[/' "$run_dir/report.md"
  echo "full report: $run_dir/report.md"
fi
exit $status
