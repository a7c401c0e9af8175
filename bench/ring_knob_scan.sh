#!/usr/bin/env bash
# The ring's knobs at 1-16 MiB against Open MPI, alternating within each repeat, under mpirun on
# loopback: default, each knob changed alone, --algo hd, and --impl mpi. Summarize with
# bench/summarize_knob_scan.py OUTDIR.
#   bench/ring_knob_scan.sh OUTDIR
# Environment: REPEATS (6), NPROCS ("2 4"), KNOBS (the names below), OP (allreduce; any collective
# command), MINBYTES (1M), MAXBYTES (16M), LINK (unset: loopback; a tc rate: an emulated cluster,
# bench/bench_net.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/runner/ringbench}
out=${1:?usage: bench/ring_knob_scan.sh OUTDIR}
mkdir -p "$out"
source "$root/bench/bench_net.sh"
bench_net_setup "$bin" "$(printf '%s\n' ${NPROCS:-2 4} | sort -n | tail -1)" "$out"
declare -A cfg=([default]="" [spin0]="--spin-us 0" [sock1]="--sockets-per-peer 1" [sock2]="--sockets-per-peer 2" [seg256K]="--segment 256K"
                [seg4M]="--segment 4M" [depth2]="--depth 2" [depth8]="--depth 8" [hd]="--algo hd" [mpi]="--impl mpi")
for rep in $(seq 1 "${REPEATS:-6}"); do for n in ${NPROCS:-2 4}; do
  for k in ${KNOBS:-default seg4M seg256K depth2 depth8 hd mpi}; do
    echo "== $rep $n $k $(uptime)" >> "$out/uptime.log"
    # shellcheck disable=SC2086  # a knob is several words
    "${BENCH_LAUNCH[@]}" mpirun -np "$n" "${BENCH_MCA[@]}" $(bench_hosts "$n") "$bin" "${OP:-allreduce}" \
      ${cfg[$k]} "${BENCH_IFACE[@]}" -b "${MINBYTES:-1M}" -e "${MAXBYTES:-16M}" -f 4 -n 10 -w 2 -c 0 \
      --json "$out/$k-n$n-r$rep.json" > "$out/$k-n$n-r$rep.txt" 2>&1
  done
done; done
