#!/usr/bin/env bash
# allreduce --algo hd (halving-doubling) against --algo ring at N ranks on loopback (local ranks,
# --ranks N, our TCP transport), alternating REPEATS times: 4-64 KiB (latency-bound) and 64 MiB.
#
#   bench/hd_vs_ring.sh [OUTDIR]       (default results/collectives-<date>)
# Environment: REPEATS (3), NPROCS (8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/runner/ringbench
out=${1:-$root/results/collectives-$(date +%Y%m%d)}
repeats=${REPEATS:-3}
n=${NPROCS:-8}
[ -x "$bin" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
mkdir -p "$out/raw"
for rep in $(seq 1 "$repeats"); do
  for algo in hd ring; do
    echo "== repeat $rep: N=$n --algo $algo" >&2
    f=$out/raw/hd-vs-ring-$algo-n$n-small-r$rep.json
    "$bin" allreduce --ranks "$n" --algo "$algo" -b 4K -e 64K -f 2 -n 50 -w 10 --json "$f" >"${f%.json}.txt"
    f=$out/raw/hd-vs-ring-$algo-n$n-64M-r$rep.json
    "$bin" allreduce --ranks "$n" --algo "$algo" -b 64M -e 64M -n 3 -w 1 --json "$f" >"${f%.json}.txt"
  done
done
python3 "$root/bench/summarize_hd.py" "$out" | tee "$out/hd-vs-ring.md"
