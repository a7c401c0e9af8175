#!/usr/bin/env bash
# Issue 38's defects probed through the ringbench binary, one line each: what a given build
# does with a hostile results directory or file, and with the sweep's and what-if's bad numbers.
# Run it against the build before the fixes and after (see README.md here).
# Usage: probes.sh RINGBENCH_BINARY
set -uo pipefail
bin=$(readlink -f "${1:?usage: probes.sh RINGBENCH_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/ringbench-probes.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
src=$root/results/quick-20261121-110546/raw.jsonl
say() { printf '%-34s %s\n' "$1" "$2"; }
first_error() { grep -m1 -iE 'error|refused|not found|out of' "$1" | cut -c1-150; }

# 1. A model name with a newline in raw.jsonl (every lenet record): does gnuplot run the line after it?
mkdir inj && python3 - "$src" inj/raw.jsonl "$work/PWNED" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in recs:  # every record of one model, so that its plots are drawn
    if r.get("model") == "lenet":
        r["model"] += "\nsystem \"touch " + sys.argv[3] + "\"\nset title '"
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
timeout 120 "$bin" report inj > out 2>&1; rc=$?
say "1 gnuplot injection via model" "exit $rc, command ran: $([ -e PWNED ] && echo YES || echo no) $(first_error out)"

# 5. nodes: -2 in a record
mkdir neg && python3 - "$src" neg/raw.jsonl <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
recs[0]["nodes"] = -2
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
timeout 120 "$bin" report neg > out 2>&1; rc=$?
say "5 record with nodes -2" "exit $rc, table row '| -2 |': $(grep -c '| -2 |' neg/report.md 2>/dev/null || echo 0) $(first_error out)"

# 7. numbers the sweep config did not bound
base="cluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], steps: 2, warmup: 1}\n"
probe_cfg() {  # LABEL YAML
  printf "$2" > c.yaml
  timeout 60 "$bin" sweep c.yaml --dry-run > out 2>&1
  say "$1" "exit $? $(first_error out)"
}
probe_cfg "7 timeout: 1e10" "name: t\ntimeout: 1e10\n$base"
probe_cfg "7 batch: 2000000000" "name: t\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 2000000000}]}\n"
probe_cfg "7 step_factor: .inf" "name: t\nnodes: [2]\ncluster: {type: local}\ncollectives: {min_bytes: 4K, max_bytes: 1M, step_factor: .inf}\n"
probe_cfg "7 a 255-character name" "name: $(printf 'n%.0s' $(seq 255))\n$base"

# 8. SIGTERM while the first point runs
printf "name: early\nnodes: [1]\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], warmup: 1, steps: 100000}\n" > long.yaml
"$bin" sweep long.yaml --out early > out 2>&1 &
pid=$!
sleep 4
kill -TERM $pid
wait $pid; rc=$?
say "8 SIGTERM before the first point" "exit $rc: $(tail -1 out | cut -c1-110)"

# 10. files that are not regular files
(ulimit -v 4000000; timeout 60 "$bin" sweep /dev/zero --dry-run > out 2>&1); rc=$?
say "10 sweep /dev/zero (4 GB limit)" "exit $rc $(first_error out)"
mkfifo cat.fifo
probe_cfg "10 vgpu_catalog: a FIFO" "name: t\nvgpu_catalog: $work/cat.fifo\n$base"
printf 'token-%0200d-end\n' 0 > notcat.yaml
probe_cfg "10 catalog error echo" "name: t\nvgpu_catalog: $work/notcat.yaml\n$base"
grep -q -- 'token-' out && say "   (echoed the file's line)" "YES" || say "   (echoed the file's line)" "no"
(ulimit -v 4000000; timeout 60 "$bin" predict "$root/results/model-check-1gbit-20261127-000149" --what-if /dev/zero > out 2>&1); rc=$?
say "10 predict --what-if /dev/zero" "exit $rc $(first_error out)"

# 11. what-if numbers
sed 's/^check_nodes: .*/check_nodes: 2000000000/' "$root/configs/whatif-pvrdma-testbed.yaml" > w1.yaml
grep -q '^check_nodes:' w1.yaml || printf 'check_nodes: 2000000000\n' >> w1.yaml
timeout 120 "$bin" predict "$root/results/timelines-20261127-001504" --what-if w1.yaml > out 2>&1; rc=$?
say "11 what-if check_nodes 2e9" "exit $rc $(first_error out)$(grep -m1 -o "at N = [0-9]*" out)"

# A symbolic link planted in a results directory
mkdir link && cp "$src" link/raw.jsonl && echo precious > victim && ln -s "$work/victim" link/summary.csv
timeout 120 "$bin" report link > out 2>&1; rc=$?
say "summary.csv -> a file elsewhere" "exit $rc, victim overwritten: $(grep -q precious victim && echo no || echo YES)"
