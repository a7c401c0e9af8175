#!/usr/bin/env bash
# CI's smoke test of a Google Benchmark program (ctest -L bench): runs it briefly with its JSON
# written (--benchmark_out), and fails unless the JSON names at least one benchmark, none of
# them with an error, each with a positive time. The figures themselves mean nothing at this
# length; bench/README.md says how to run them for real.
#   bench/smoke.sh BINARY [benchmark flags...]
set -euo pipefail
bin=${1:?usage: smoke.sh BINARY [flags...]}
shift
out=$(mktemp /tmp/ringbench-bench-smoke.XXXXXX.json)
trap 'rm -f "$out"' EXIT
"$bin" --benchmark_out="$out" --benchmark_out_format=json "$@"
python3 - "$out" "$(basename "$bin")" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = doc.get("benchmarks", [])
bad = [b["name"] for b in runs if b.get("error_occurred") or not b.get("real_time", 0) > 0]
if not runs or bad:
    sys.exit(f"{sys.argv[2]}: {'no benchmark ran' if not runs else 'failed: ' + ', '.join(bad)}")
print(f"{sys.argv[2]}: {len(runs)} benchmark runs, JSON ok")
PY
