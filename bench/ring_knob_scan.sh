#!/usr/bin/env bash
# The ring's knobs at 1-16 MiB against Open MPI, alternating within each repeat, under mpirun on
# loopback: default, each knob changed alone, --algo hd, and --impl mpi. Summarize with
# bench/summarize_knob_scan.py OUTDIR.
#   bench/ring_knob_scan.sh OUTDIR
# Environment: REPEATS (6), NPROCS ("2 4"), KNOBS (the names below)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/runner/ringbench}
out=${1:?usage: bench/ring_knob_scan.sh OUTDIR}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
declare -A cfg=([default]="" [spin0]="--spin-us 0" [sock1]="--sockets-per-peer 1" [seg256K]="--segment 256K"
                [seg4M]="--segment 4M" [depth2]="--depth 2" [depth8]="--depth 8" [hd]="--algo hd" [mpi]="--impl mpi")
for rep in $(seq 1 "${REPEATS:-6}"); do for n in ${NPROCS:-2 4}; do
  for k in ${KNOBS:-default seg4M seg256K depth2 depth8 hd mpi}; do
    echo "== $rep $n $k $(uptime)" >> "$out/uptime.log"
    # shellcheck disable=SC2086  # a knob is several words
    mpirun --oversubscribe -np "$n" "${mca[@]}" "$bin" allreduce ${cfg[$k]} -b 1M -e 16M -f 4 -n 10 -w 2 -c 0 \
      --json "$out/$k-n$n-r$rep.json" > "$out/$k-n$n-r$rep.txt" 2>&1
  done
done; done
