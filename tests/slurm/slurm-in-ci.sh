#!/usr/bin/env bash
# ringbench under a real Slurm (issue 43): starts a one-node cluster on this machine
# (slurm-cluster.sh: munged with a key made here, slurmctld and slurmd, the node oversubscribed),
# then
#   srun -n 2 ringbench train ...   two ranks whose rank and world come from Slurm's variables
#                                   (no mpirun, no PMI): both must report the same final hash
#   srun -n 2 ringbench sweep CFG   two sweep ranks as under mpirun: the run directory must hold
#                                   ok train points on 1 and 2 nodes, ok collectives, a report
#   tests/slurm/slurm-in-ci.sh --build-dir DIR --out DIR
# Root only (slurmd runs jobs as their user); skipped (77) without root or without slurm-wlm
# and munge (Debian: apt-get install slurmctld slurmd slurm-client munge). About 20 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "slurm-in-ci.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] && [ -n "$out" ] || { echo "usage: slurm-in-ci.sh --build-dir DIR --out DIR" >&2; exit 2; }
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root"
for p in munged slurmctld slurmd srun sinfo; do
  command -v $p > /dev/null || skip "$p not found (apt-get install slurmctld slurmd slurm-client munge)"
done
bin=$build/runner/ringbench
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=tests/slurm/slurm-cluster.sh
source "$here/slurm-cluster.sh"
trap slurm_down EXIT
slurm_up "$out/slurm"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive

echo "== srun -n 2 ringbench train"
timeout 300 srun -n 2 --overcommit "$bin" train --model lenet --batch 8 --steps 3 --warmup 1 --timeout 60 \
  > "$out/train.log" 2>&1 || { cat "$out/train.log"; echo "FAIL: srun train"; exit 1; }
grep -E "ranks|img/sec|hash" "$out/train.log" | head -8
grep -q "2 rank(s), launcher slurm" "$out/train.log" || { cat "$out/train.log"; echo "FAIL: train does not say Slurm launched its ranks"; exit 1; }

echo "== srun -n 2 ringbench sweep"
cat > "$out/tiny.yaml" <<'YAML'
name: slurm-tiny
nodes: [1, 2]
transports: [tcp]
repeats: 1
timeout: 120
cluster: {type: mpirun}
train:
  models:
    - {model: lenet, batch: 8}
  warmup: 1
  steps: 2
collectives: {min_bytes: 4K, max_bytes: 16K, step_factor: 4, iters: 2, warmup_iters: 1}
YAML
timeout 600 srun -n 2 --overcommit "$bin" sweep "$out/tiny.yaml" --out "$out/run" > "$out/sweep.log" 2>&1 ||
  { tail -30 "$out/sweep.log"; echo "FAIL: srun sweep"; exit 1; }
[ -f "$out/run/report.md" ] || { tail -30 "$out/sweep.log"; echo "FAIL: no report.md"; exit 1; }
python3 - "$out/run/raw.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = {(r["kind"], r.get("nodes")) for r in recs if r.get("status") == "ok"}
bad = [r.get("point") for r in recs if r.get("status") != "ok"]
need = {("train", 1), ("train", 2), ("collectives", 2)}
if bad or not need <= ok:
    sys.exit(f"FAIL: points not ok: {bad}; ok: {sorted(ok)}")
print(f"sweep under srun: {len(recs)} points ok, report.md written")
PY
echo "PASS: ringbench ran under Slurm (srun train, srun sweep)"
