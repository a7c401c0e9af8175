#!/usr/bin/env bash
# Our ring over TCP vs Open MPI's MPI_Allreduce over its tcp btl, side by side on this machine
# (loopback), N = 2 and 4, 1 MiB to 256 MiB, plus 4 KiB latency. Both run under mpirun with the
# same binary, alternating, REPEATS times, so machine noise hits both alike; the table gives
# medians and the spread (min-max) over repeats.
#
#   bench/compare_mpi.sh [OUTDIR]      (default results/ring-vs-mpi-<date>)
# Environment: REPEATS (3), ITERS (5), WARMUP (2), NPROCS ("2 4"), MAXBYTES (256M)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/runner/ringbench
out=${1:-$root/results/ring-vs-mpi-$(date +%Y%m%d)}
repeats=${REPEATS:-3}
iters=${ITERS:-5}
warmup=${WARMUP:-2}
nprocs=${NPROCS:-"2 4"}
maxbytes=${MAXBYTES:-256M}
[ -x "$bin" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
mkdir -p "$out/raw"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_=(mpirun --oversubscribe -np)
mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)

for rep in $(seq 1 "$repeats"); do
  for n in $nprocs; do
    for impl in ring mpi; do
      for sweep in bw lat; do
        if [ $sweep = bw ]; then sizes=(-b 1M -e "$maxbytes" -f 4); else sizes=(-b 4K -e 4K); fi
        its=$iters; [ $sweep = lat ] && its=200
        f=$out/raw/$impl-n$n-$sweep-r$rep.json
        echo "== repeat $rep: N=$n $impl $sweep" >&2
        "${mpirun_[@]}" "$n" "${mca[@]}" "$bin" allreduce --impl "$impl" "${sizes[@]}" \
          -n "$its" -w "$warmup" -c 1 --json "$f" >"${f%.json}.txt"
      done
    done
  done
done
python3 "$root/bench/summarize_compare.py" "$out" | tee "$out/table.md"
