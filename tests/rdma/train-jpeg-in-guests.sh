#!/bin/bash
# train-jpeg-in-guests.sh: training on real JPEGs with gradients over our verbs transport between
# guest hosts (issue 42: "the verbs path runs in the guest hosts with a small data set, to prove
# it works"). Not a ctest test (CI's time); see tests/rdma/README.md.
#   1. ringbench data make imagenet-like SET --images IMAGES --seed 1 --shard-images SHARD, on
#      this host, into the guests' results directory (the same path on every guest host)
#   2. from g0: mpirun -np N -H g0,.. ringbench train --model mobilenet_v1 --image-size SIZE
#      --batch 2 --warmup 1 --steps STEPS --transport verbs --ib-dev rxe0 --iface eth0
#      --data jpeg --data-dir SET --json train.json
# and checks: train exits 0; every rank reports the path verbs on rxe0 (RoCE v2); the run says
# data jpeg and its input pipeline decoded images on every rank, none skipped. Under qemu TCG the
# img/s prove the path, not speed.
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (guests cannot run here).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=guest-options.sh
. "$HERE/guest-options.sh"  # REPO, BUILD, OUT, STATE, GUEST_OPTS, guest_option
NODES=2 IMAGES=16 SHARD=4 STEPS=2 SIZE=32 LIMIT=1200
usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  echo "usage: train-jpeg-in-guests.sh [--build-dir DIR] [--out DIR] [--state DIR] [--nodes 2..4] [--images 16]"
  echo "                               [--shard-images 4] [--steps 2] [--image-size 32] [--limit S (train's, default 1200)]"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=${2:?}; shift 2 ;;
    --images) IMAGES=${2:?}; shift 2 ;;
    --shard-images) SHARD=${2:?}; shift 2 ;;
    --steps) STEPS=${2:?}; shift 2 ;;
    --image-size) SIZE=${2:?}; shift 2 ;;
    --limit) LIMIT=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) guest_option "$@" || { usage >&2; exit 2; }; shift "$TAKEN" ;;
  esac
done
for v in NODES IMAGES SHARD STEPS SIZE LIMIT; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "train-jpeg-in-guests: ${v,,} must be a positive whole number" >&2; exit 2; }
done
[ "$NODES" -ge 2 ] && [ "$NODES" -le 4 ] || { echo "train-jpeg-in-guests: --nodes must be 2..4" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "train-jpeg-in-guests: SKIP: needs root (guest network)" >&2; exit 77; }
[ -x "$BUILD/runner/ringbench" ] || { echo "train-jpeg-in-guests: no $BUILD/runner/ringbench (build first)" >&2; exit 2; }
command -v jq > /dev/null || apt-get install -y -qq jq > /dev/null 2>&1 || { echo "train-jpeg-in-guests: SKIP: needs jq" >&2; exit 77; }
BUILD=$(cd "$BUILD" && pwd -P)
OUT=${OUT:-$REPO/results/train-jpeg-guests-$(date -u +%Y%m%d-%H%M%S)}
open_summary  # OUT, SUMMARY, say
T0=$(date +%s)
# shellcheck source=guest-scenario.sh
. "$HERE/guest-scenario.sh"  # cluster_begin
cluster_begin train-jpeg "$NODES"  # STATE, SCENARIO
say "train-jpeg-in-guests: $NODES guest hosts ready in $(( $(date +%s) - T0 ))s (state $STATE); build $BUILD; files in $SCENARIO"
say "note: guests run under qemu TCG (emulated CPU); the img/s prove the path, not performance"
RB=$BUILD/runner/ringbench
SET=$SCENARIO/set
"$RB" data make imagenet-like "$SET" --images "$IMAGES" --seed 1 --shard-images "$SHARD" > "$OUT/data-make.log" 2>&1 \
  || { say "FAIL: ringbench data make ($(tail -2 "$OUT/data-make.log" | tr '\n' ' '))"; exit 1; }
chmod -R a+rX "$SET"
say "data set: $IMAGES images in $(find "$SET" -type f | wc -l) files, $(du -sh "$SET" | cut -f1) ($SET)"
HOSTS=$(seq -s, -f 'g%.0f' 0 $((NODES - 1)))
CMD=(mpirun -np "$NODES" -H "$HOSTS" "$RB" train --model mobilenet_v1 --image-size "$SIZE" --batch 2 --warmup 1
     --steps "$STEPS" --log-every 1 --transport verbs --ib-dev rxe0 --iface eth0 --data jpeg --data-dir "$SET"
     --timeout 120 --json "$SCENARIO/train.json")
say "command (from g0): ${CMD[*]}"
t=$(date +%s)
set +e
timeout -k 10 "$LIMIT" "$HERE/guest-hosts.sh" ssh --state "$STATE" g0 "${CMD[@]}" > "$OUT/train.log" 2>&1 < /dev/null
rc=$?
set -e
say "train: rc=$rc in $(( $(date +%s) - t ))s (log $OUT/train.log)"
fail=0
check() { # check WHAT COMMAND...: one PASS/FAIL line
  local what=$1; shift
  if "$@"; then say "PASS: $what"; else say "FAIL: $what"; fail=1; fi
}
J=$SCENARIO/train.json
check "train exited 0" test "$rc" = 0
if [ -s "$J" ]; then
  cp "$J" "$OUT/train.json"
  check "the run says transport verbs and data jpeg" \
    test "$(jq -r '"\(.meta.transport) \(.meta.data)"' "$J")" = "verbs jpeg"
  bad=$(jq -r --argjson n "$NODES" '(.meta.hosts | length) as $k | if $k != $n then "\($k) of \($n) ranks reported a path" else
    (.meta.hosts[] | select(.path.transport != "verbs" or .path.device != "rxe0" or .path.gid_type != "RoCE v2")
     | "rank \(.rank) on \(.host): \(.path | tostring)") end' "$J")
  check "every rank's path: verbs on rxe0, RoCE v2${bad:+: $bad}" test -z "$bad"
  check "the input pipeline decoded images on every rank, none skipped" \
    test "$(jq '[.input.ranks[] | select(([.images[]] | add) > 0)] | length' "$J") $(jq '.input.skipped + .input.bad_records' "$J")" = "$NODES 0"
else
  fail=1; say "FAIL: rank 0 wrote no JSON ($J)"
fi
say ""
grep -E '^# (ringbench|[0-9]+ rank|sgd|input pipeline|CPUs busy)|^#  rank|^(Img/sec|Total img/sec)' "$OUT/train.log" | tee -a "$SUMMARY" || true
say "total wall time $(( $(date +%s) - T0 ))s; summary $SUMMARY"
if [ $fail = 0 ]; then say "RESULT: PASS"; else say "RESULT: FAIL"; fi
exit $fail
