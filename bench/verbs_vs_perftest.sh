#!/bin/bash
# verbs_vs_perftest.sh: our ring over verbs against perftest's ib_write_bw on the same link,
# between the first two hosts of a cluster, alternating, and the RDMA counters of each run.
#
#   bench/verbs_vs_perftest.sh --state DIR [--rounds 3] [--sizes "1M 4M"] [--out FILE.md]
#
# DIR is a cluster of tests/rdma/guest-hosts.sh (hosts g0, g1 reached with its `ssh`). Per
# round and size, in alternating order (odd rounds ring first, even rounds perftest first):
#   ring:      mpirun -np 2 -H g0,g1 ringbench allreduce --transport verbs -b S -e S
#              busbw (for 2 ranks busbw = algbw: each rank sends S bytes while receiving S)
#   perftest:  ib_write_bw -s S from g0 to g1 on rxe0, RoCE v2 (one direction), and
#              ib_write_bw -b (both directions at once, as the ring runs; reported per direction)
# All in Gbit/s; the ratios ring / ib_write_bw per round; medians with min-max. The counters
# of g0's port (hw_counters: retries, RNR NAKs, out-of-sequence, ...) are read before and after
# every run, so the deltas say where a slow run lost time.
# Exit: 0 measured, 1 a run failed, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
STATE=""; ROUNDS=3; SIZES="1M 4M"; OUT=""; BUILD=$REPO/build; ITERS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --state) STATE=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --sizes) SIZES=${2:?}; shift 2 ;;
    --iters) ITERS=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --build-dir) BUILD=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "verbs_vs_perftest: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$STATE" ] || { echo "verbs_vs_perftest: --state DIR (a guest-hosts.sh cluster) is required" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "verbs_vs_perftest: --rounds must be >= 1" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd -P)
RB=$BUILD/runner/ringbench
RESULTS=$(cat "$STATE/results.path")
WORK=$RESULTS/link
mkdir -p "$WORK"
chown 4242:4242 "$WORK"
OUT=${OUT:-$WORK/link.md}
gh() { "$REPO/tests/rdma/guest-hosts.sh" ssh --state "$STATE" "$@"; }
bytes() { case "$1" in *K) echo $((${1%K} << 10)) ;; *M) echo $((${1%M} << 20)) ;; *) echo "$1" ;; esac; }
# g0's RoCE v2 IPv4 GID index, as the transport picks it
GIDX=$(gh g0 'for t in /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/*; do i=${t##*/}; [ "$(cat $t)" = "RoCE v2" ] && case $(cat /sys/class/infiniband/rxe0/ports/1/gids/$i) in 0000:0000:0000:0000:0000:ffff:*) echo $i; break;; esac; done')
[ -n "$GIDX" ] || { echo "verbs_vs_perftest: g0's rxe0 has no RoCE v2 IPv4 GID" >&2; exit 1; }
# g0's rxe0 counters and, for g0 and g1, the CPU time by kind (/proc/stat, in USER_HZ ticks)
counters() {
  gh g0 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done'
  local h
  for h in g0 g1; do
    gh "$h" "awk -v h=$h '\$1 == \"cpu\" {print h \"_cpu_user\", \$2 + \$3; print h \"_cpu_system\", \$4; print h \"_cpu_idle\", \$5 + \$6; print h \"_cpu_irq\", \$7 + \$8}' /proc/stat"
  done
}
# counter deltas that are not zero, "name=+delta ...", then each host's CPU split in percent
delta() {
  join <(echo "$1" | sort) <(echo "$2" | sort) | awk '
    $1 ~ /_cpu_/ { split($1, k, "_cpu_"); hosts[k[1]] = 1; d[k[1], k[2]] = $3 - $2; next }
    $3 != $2 {printf "%s=+%d ", $1, $3 - $2}
    END { for (h in hosts) { t = d[h, "user"] + d[h, "system"] + d[h, "idle"] + d[h, "irq"]; if (t > 0)
            printf "%s cpu: user %d%% sys %d%% irq+softirq %d%% idle %d%%; ", h, 100 * d[h, "user"] / t,
                   100 * d[h, "system"] / t, 100 * d[h, "irq"] / t, 100 * d[h, "idle"] / t } }'
}

port=18600
ring_run() { # ring_run SIZE ROUND -> Gbit/s on stdout
  local b json
  b=$(bytes "$1")
  json=$WORK/ring-$1-r$2.json
  gh g0 mpirun -np 2 -H g0,g1 "$RB" allreduce --transport verbs -b "$b" -e "$b" -n "$ITERS" -w 3 -c 1 \
    --timeout 60 --json "$json" > "$WORK/ring-$1-r$2.out" 2>&1 || { echo "ring run failed: $WORK/ring-$1-r$2.out" >&2; return 1; }
  jq -r '[.rows[] | select(.inplace == false)][0].busbw_gbps * 8' "$json"
}
perf_run() { perftest_run "$1" "$2" "" perftest; }
bidir_run() { perftest_run "$1" "$2" -b perftest-bidir; }
perftest_run() { # perftest_run SIZE ROUND FLAGS NAME -> Gbit/s per direction (retried when perftest's clock check voids it)
  local b attempt bw
  b=$(bytes "$1")
  for attempt in 1 2 3; do
    port=$((port + 1))
    local common="-d rxe0 -x $GIDX -p $port -F --report_gbits -s $b -n $ITERS $3"
    local f=$WORK/$4-$1-r$2
    gh g1 "timeout 120 ib_write_bw $common" > "$f.server" 2>&1 &
    local srv=$!
    gh g0 "for i in \$(seq 40); do timeout 120 ib_write_bw $common 10.77.0.2 && exit 0; sleep 0.5; done; exit 1" \
      > "$f.out" 2>&1 || { wait $srv || true; echo "ib_write_bw $3 failed: $f.out" >&2; return 1; }
    wait $srv || true
    bw=$(awk -v s="$b" '$1 == s && NF == 5 {print $4}' "$f.out")
    # -b reports both directions added up
    [ "$3" = -b ] && bw=$(awk -v a="${bw:-0}" 'BEGIN {print a / 2}')
    awk -v a="${bw:-0}" 'BEGIN {exit !(a + 0 > 0)}' && { echo "$bw"; return 0; }
  done
  echo "ib_write_bw $3 reported 0 Gb/s three times (its clock calibration failed): $f.out" >&2
  return 1
}
measure() { # measure KIND SIZE ROUND: one run with the counters around it; appends to $WORK/runs.tsv
  local before after v
  before=$(counters)
  v=$("$1_run" "$2" "$3")
  after=$(counters)
  printf '%s\t%s\t%s\t%s\t%s\n' "$3" "$2" "$1" "$v" "$(delta "$before" "$after")" >> "$WORK/runs.tsv"
}

: > "$WORK/runs.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  for s in $SIZES; do
    if ((r % 2)); then kinds="ring perf bidir"; else kinds="bidir perf ring"; fi
    for k in $kinds; do measure "$k" "$s" "$r"; done
  done
done

{
  echo "# Our ring over verbs vs ib_write_bw, g0 <-> g1 (rxe0, RoCE v2, GID index $GIDX)"
  echo
  echo "$ROUNDS rounds, alternating order, $ITERS iterations per run; ring busbw (2 ranks: busbw = algbw,"
  echo "each rank sending S bytes while receiving S) vs ib_write_bw's average, one direction alone and"
  echo "per direction with both at once (-b, as the ring loads the link), Gbit/s."
  echo "Guests under qemu TCG: the numbers compare two paths on the same software NIC, not hardware."
  echo
  echo "Each cell: the median over rounds (min-max); ratios are taken per round."
  echo
  echo "| size | ring busbw Gbit/s | ib_write_bw Gbit/s | ring / ib_write_bw | ib_write_bw -b Gbit/s per direction | ring / ib_write_bw -b |"
  echo "|---:|---:|---:|---:|---:|---:|"
  for s in $SIZES; do
    awk -F'\t' -v s="$s" '
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                     return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      function mm(a, n,   i, lo, hi) { lo = hi = a[1]; for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] } return sprintf("%.3f-%.3f", lo, hi) }
      $2 == s && $3 == "ring" { ring[$1] = $4 } $2 == s && $3 == "perf" { perf[$1] = $4 } $2 == s && $3 == "bidir" { bi[$1] = $4 }
      END { n = 0; for (k in ring) { n++; R[n] = ring[k]; P[n] = perf[k]; Q[n] = ring[k] / perf[k]; B[n] = bi[k]; S[n] = ring[k] / bi[k] }
            rm = mm(R, n); pm = mm(P, n); qm = mm(Q, n); bm = mm(B, n); sm = mm(S, n)
            printf "| %s | %.3f (%s) | %.3f (%s) | %.2f (%s) | %.3f (%s) | %.2f (%s) |\n", s, med(R, n), rm, med(P, n), pm, med(Q, n), qm, med(B, n), bm, med(S, n), sm }' "$WORK/runs.tsv"
  done
  echo
  echo "Runs, with the counters of g0's rxe0 that changed during each (hw_counters deltas) and the"
  echo "CPU time of g0 and g1 by kind over the run (/proc/stat; each guest has one vCPU):"
  echo
  echo "| round | size | run | Gbit/s | counters |"
  echo "|---:|---:|---|---:|---|"
  awk -F'\t' '{printf "| %s | %s | %s | %.3f | %s |\n", $1, $2, ($3 == "perf" ? "ib_write_bw" : $3 == "bidir" ? "ib_write_bw -b" : "ring"), $4, $5}' "$WORK/runs.tsv"
} > "$OUT"
cat "$OUT"
