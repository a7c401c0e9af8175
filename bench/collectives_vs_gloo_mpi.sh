#!/usr/bin/env bash
# Each collective besides allreduce over our TCP transport vs Open MPI's tcp btl (MPI's own call,
# --impl mpi) vs Gloo's best algorithm for it (bench/gloo_bench, Debian's libgloo-dev), at N
# ranks on loopback, 1 MiB to 64 MiB by x4. Ours and MPI's run under mpirun with the same binary;
# all three alternate, REPEATS times, so machine noise hits them alike; the table gives medians
# and the spread (min-max) over repeats.
#
#   bench/collectives_vs_gloo_mpi.sh [OUTDIR]    (default results/collectives-<date>)
# Environment: REPEATS (3), ITERS (5), WARMUP (2), NPROCS (4), MAXBYTES (64M), OPS (all four),
#              GLOO_BENCH (build/bench/gloo_bench), OURS_ARGS (more options for ours, e.g.
#              "--sockets-per-peer 1"),
#              LINK (unset: loopback; a tc rate such as 1gbit: all three on an emulated cluster
#              of NPROCS nodes, one rank a node, placed as a sweep places them: bench/bench_net.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/runner/ringbench
gloo=${GLOO_BENCH:-$root/build/bench/gloo_bench}
out=${1:-$root/results/collectives-$(date +%Y%m%d)}
repeats=${REPEATS:-3}
iters=${ITERS:-5}
warmup=${WARMUP:-2}
n=${NPROCS:-4}
maxbytes=${MAXBYTES:-64M}
ops=${OPS:-"allgather reducescatter broadcast alltoall"}
[ -x "$bin" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
[ -x "$gloo" ] || { echo "no $gloo: apt-get install libgloo-dev, then rebuild (bench/CMakeLists.txt)" >&2; exit 1; }
mkdir -p "$out/raw"
source "$root/bench/bench_net.sh"
bench_net_setup "$bin" "$n" "$out"
max=$(numfmt --from=iec "$maxbytes")

# Gloo's algorithms for each collective (its best is taken per size in the table).
gloo_algos() {
  case $1 in
    allgather) echo ring ;;
    reducescatter) echo hd ;;
    broadcast) echo one_to_all ;;
    alltoall) echo new ;;
  esac
}

for rep in $(seq 1 "$repeats"); do
  for op in $ops; do
    for impl in ring mpi; do
      f=$out/raw/$op-$impl-n$n-r$rep.json
      echo "== repeat $rep: $op N=$n $impl" >&2
      "${BENCH_LAUNCH[@]}" mpirun -np "$n" "${BENCH_MCA[@]}" $(bench_hosts "$n") "$bin" "$op" --impl "$impl" "${BENCH_IFACE[@]}" \
        $([ "$impl" = ring ] && echo "${OURS_ARGS:-}") \
        -b 1M -e "$maxbytes" -f 4 -n "$iters" -w "$warmup" -c 1 --json "$f" >"${f%.json}.txt"
    done
    for algo in $(gloo_algos "$op"); do
      echo "== repeat $rep: $op N=$n gloo $algo" >&2
      "$gloo" "$op" "$algo" "$n" 1048576 "$max" "$iters" $BENCH_NETNS >"$out/raw/$op-gloo_$algo-n$n-r$rep.txt"
    done
  done
done
python3 "$root/bench/summarize_collectives.py" "$out" | tee "$out/table.md"
