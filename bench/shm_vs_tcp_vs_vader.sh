#!/usr/bin/env bash
# Ranks of one host: our ring over shared memory (--transport shm, forwarding each message into
# the next rank's ring as it arrives; and shm-ring, the same with --shm-reduce ring: no forwards) vs our ring over loopback TCP vs Open MPI's MPI_Allreduce over its
# shared-memory BTL (vader), N = 2 and 4, 1 MiB to 64 MiB. All four run under the same mpirun,
# with the same binary, alternating REPEATS times so that machine noise hits them alike; table.md
# gives median busbw, the spread (min-max) over repeats, and the shm / tcp, shm / vader and
# shm / shm-ring ratios. Every run checks its results exactly (-c 1).
#
#   bench/shm_vs_tcp_vs_vader.sh [OUTDIR]      (default results/shm-vs-tcp-vs-vader-<date>)
# Environment: REPEATS (5), ITERS (40: fewer leave 1 MiB medians at the mercy of one descheduling), WARMUP (2), NPROCS ("2 4"), MAXBYTES (64M), BIN,
#   LAUNCH (mpirun; ranks: `ringbench allreduce --ranks N` starts the ranks, for machines without
#   Open MPI, and vader is left out)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/runner/ringbench}
out=${1:-$root/results/shm-vs-tcp-vs-vader-$(date +%Y%m%d)}
repeats=${REPEATS:-5}
iters=${ITERS:-40}
warmup=${WARMUP:-2}
nprocs=${NPROCS:-"2 4"}
maxbytes=${MAXBYTES:-64M}
[ -x "$bin" ] || { echo "shm_vs_tcp_vs_vader: no $bin (build first: scripts/build.sh, or BIN=...)" >&2; exit 1; }
launch=${LAUNCH:-mpirun}
conds="shm shm-ring tcp vader"
case $launch in
  mpirun) command -v mpirun >/dev/null || { echo "shm_vs_tcp_vs_vader: needs mpirun (apt-get install openmpi-bin), or LAUNCH=ranks" >&2; exit 1; } ;;
  ranks) conds="shm shm-ring tcp" ;;
  *) echo "shm_vs_tcp_vs_vader: LAUNCH must be mpirun or ranks, not $launch" >&2; exit 2 ;;
esac
mkdir -p "$out/raw"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for rep in $(seq 1 "$repeats"); do
  for n in $nprocs; do
    for cond in $conds; do
      case $cond in
        shm-ring) what=(--transport shm --shm-reduce ring) mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo) ;;
        shm|tcp) what=(--transport "$cond") mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo) ;;
        vader) what=(--impl mpi) mca=(--mca pml ob1 --mca btl vader,self) ;;
      esac
      f=$out/raw/$cond-n$n-r$rep.json
      echo "== repeat $rep/$repeats: N=$n $cond" >&2
      run=(allreduce "${what[@]}" -b 1M -e "$maxbytes" -f 4 -n "$iters" -w "$warmup" -c 1 --json "$f")
      if [ "$launch" = ranks ]; then "$bin" "${run[@]}" --ranks "$n" >"${f%.json}.txt"
      else mpirun --oversubscribe --bind-to none -np "$n" "${mca[@]}" "$bin" "${run[@]}" >"${f%.json}.txt"; fi
    done
  done
done
python3 "$root/bench/summarize_shm.py" "$out" | tee "$out/table.md"
