#!/usr/bin/env bash
# README command 1: install what is missing, build, and run a sweep config (configs/quick.yaml
# unless another is named): on four emulated nodes (network namespaces, 1 Gbit/s links), LeNet
# and a small MobileNet v1 on 1, 2 and 4 nodes over our TCP ring and MPI_Allreduce, plus an
# allreduce size sweep. The results and report land in results/<run-id>/ (report.md, plots/).
# Extra arguments go to `ringbench sweep` (e.g. --results DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
config=${1:-$root/configs/quick.yaml}
shift || true
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
