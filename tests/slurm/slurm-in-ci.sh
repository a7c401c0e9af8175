#!/usr/bin/env bash
# ringbench under a real Slurm of several nodes (issue 43): starts a four-node cluster on this
# machine (slurm-cluster.sh: each node a network namespace with its own address, hostname and
# slurmd; slurmctld and srun on a login node; munged with a key made here), then
#   srun -N 2 ringbench train ...   two ranks on n0 and n1 whose rank and world come from Slurm's
#                                   variables (no mpirun, no PMI), the store on n0's address:
#                                   without RINGBENCH_SECRET they must refuse to start and say
#                                   so; with it both must train and report the same final hash
#   sbatch -N 4 (srun doctor, srun sweep CFG), as docs/slurm.md's script: four sweep ranks as
#                                   under mpirun: LeNet and an allreduce on
#                                   1, 2 and 4 nodes over our TCP ring and the MPI baseline,
#                                   whose mpirun starts its daemons through Slurm inside the
#                                   allocation; every point must be ok, on the nodes it names
#   tests/slurm/slurm-in-ci.sh --build-dir DIR --out DIR
# Root only (slurmd runs jobs as their user, and the nodes are namespaces); skipped (77) without
# root, without slurm-wlm and munge (Debian: apt-get install slurmctld slurmd slurm-client munge)
# or without network namespaces. About 16 s on a quiet machine.
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
# A mount namespace of its own: the nodes' names resolve through a hosts file bound over
# /etc/hosts there, and nothing of it is seen outside.
command -v unshare > /dev/null && command -v nsenter > /dev/null || skip "unshare or nsenter not found (util-linux)"
[ -n "${RINGBENCH_SLURM_MNTNS:-}" ] ||
  exec unshare -m --propagation private env RINGBENCH_SLURM_MNTNS=1 "$0" --build-dir "$build" --out "$out"
ip netns add "rbslurm$$-probe" 2> /dev/null && ip netns delete "rbslurm$$-probe" ||
  skip "cannot make network namespaces (ip netns add failed)"
for p in munged slurmctld slurmd srun sinfo sbatch; do
  command -v $p > /dev/null || skip "$p not found (apt-get install slurmctld slurmd slurm-client munge)"
done
bin=$build/runner/ringbench
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=tests/slurm/slurm-cluster.sh
source "$here/slurm-cluster.sh"
trap slurm_down EXIT
slurm_up "$out/slurm" 4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
train=(train --model lenet --batch 8 --steps 3 --warmup 1 --timeout 60)

echo "== srun -N 2 ringbench train, without RINGBENCH_SECRET: must refuse"
unset RINGBENCH_SECRET
if on_login timeout 60 srun -N 2 "$bin" "${train[@]}" > "$out/train-nosecret.log" 2>&1; then
  cat "$out/train-nosecret.log"; echo "FAIL: ranks on two nodes started without the job's secret"; exit 1
fi
grep -q RINGBENCH_SECRET "$out/train-nosecret.log" ||
  { cat "$out/train-nosecret.log"; echo "FAIL: the refusal does not name RINGBENCH_SECRET"; exit 1; }
grep -m1 RINGBENCH_SECRET "$out/train-nosecret.log"

echo "== srun -N 2 ringbench train"
RINGBENCH_SECRET=$(python3 -c "import secrets; print(secrets.token_hex(32))")
export RINGBENCH_SECRET
on_login timeout 120 srun -N 2 "$bin" "${train[@]}" --json "$out/train.json" > "$out/train.log" 2>&1 ||
  { cat "$out/train.log"; echo "FAIL: srun train"; exit 1; }
grep -E "launcher|  rank |img/sec" "$out/train.log" | cut -c1-150
grep -q "2 rank(s), launcher slurm" "$out/train.log" || { cat "$out/train.log"; echo "FAIL: train does not say Slurm launched its ranks"; exit 1; }
python3 - "$out/train.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
hosts = sorted(h["host"] for h in j["meta"]["hosts"])
hashes = set(j["summary"]["final_hashes"]["params"])
if hosts != ["n0", "n1"] or len(hashes) != 1:
    sys.exit(f"FAIL: ranks on {hosts} (want n0, n1), final hashes {sorted(hashes)} (want one)")
print(f"train: ranks on {', '.join(hosts)}, one final hash {hashes.pop()}")
PY

echo "== sbatch -N 4: srun ringbench doctor, srun ringbench sweep"
cat > "$out/tiny.yaml" <<'YAML'
name: slurm-tiny
nodes: [1, 2, 4]
transports: [tcp, mpi]
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
# As docs/slurm.md's sbatch script does it: the secret made in the job, doctor, then the sweep.
# (The secret from python3, not the docs' openssl: install-deps.sh installs python3, not openssl.)
unset RINGBENCH_SECRET
cat > "$out/sweep.sbatch" <<SBATCH
#!/bin/bash
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --output=$out/sweep.log
set -euo pipefail
export RINGBENCH_SECRET=\$(python3 -c "import secrets; print(secrets.token_hex(32))")
srun $bin doctor --config $out/tiny.yaml
srun $bin sweep $out/tiny.yaml --out $out/run
SBATCH
# Polled here, not `sbatch --wait`: its polls back off to about 30 s after the job ends.
job=$(on_login sbatch --parsable "$out/sweep.sbatch")
state=""
for _ in $(seq 600); do  # 300 s: within ctest's 600 with the steps before
  state=$(on_login scontrol show job "$job" -o 2> /dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
  case $state in PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.5 ;; *) break ;; esac
done
[ "$state" = COMPLETED ] ||
  { tail -30 "$out/sweep.log"; echo "FAIL: the sbatch job of doctor and the sweep ended ${state:-unseen}"; exit 1; }
grep -E "^(build|tcp|clock): " "$out/sweep.log" | cut -c1-120
grep -q "^build: ok, .* on 4 hosts" "$out/sweep.log" || { head -60 "$out/sweep.log"; echo "FAIL: srun doctor did not check 4 hosts"; exit 1; }
grep -E "^# note|^\[[0-9]+/[0-9]+\].*: " "$out/sweep.log" | cut -c1-120
grep -q "^# note: 4 sweep ranks under srun" "$out/sweep.log" || { echo "FAIL: the sweep does not say srun started its ranks"; exit 1; }
[ -f "$out/run/report.md" ] || { tail -30 "$out/sweep.log"; echo "FAIL: no report.md"; exit 1; }
python3 - "$out/run/raw.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [r.get("point") for r in recs if r.get("status") != "ok"]
ok = {(r["kind"], r["nodes"], r["transport"]) for r in recs if r.get("status") == "ok"}
need = {("train", 1, "none")} | {(k, n, t) for k in ("train", "collectives") for n in (2, 4) for t in ("tcp", "mpi")}
if bad or not need <= ok:
    sys.exit(f"FAIL: points not ok: {bad}; missing: {sorted(need - ok)}")
# The 4-node training points ran one rank on each node, whichever transport carried them, and
# their ranks ended with the same parameters.
for r in recs:
    if r["kind"] == "train" and r["nodes"] == 4:
        hosts = sorted(h["host"] for h in r["train"]["meta"]["hosts"])
        if hosts != ["n0", "n1", "n2", "n3"]:
            sys.exit(f"FAIL: {r['point']} ran on {hosts}, not one rank on each of n0..n3")
        if len(set(r["train"]["summary"]["final_hashes"]["params"])) != 1:
            sys.exit(f"FAIL: {r['point']}: the ranks' final parameters differ")
print(f"sweep by sbatch -N 4: {len(recs)} points ok (tcp and mpi on 2 and 4 nodes), report.md written")
PY
echo "PASS: ringbench ran under a four-node Slurm (srun train across nodes with the secret, sbatch of doctor and a sweep with the MPI baseline)"
