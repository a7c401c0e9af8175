#!/usr/bin/env bash
# Regenerates docs/cli/ (one page per command, from its --help) with the given ringbench binary
# (default build/runner/ringbench); run it after changing a command's options, and commit
# docs/cli/. ctest's Docs.CommandReferenceAndResultsIndex fails until the pages match.
#   scripts/docs.sh [RINGBENCH]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/runner/ringbench}
[ -x "$bin" ] || { echo "scripts/docs.sh: no ringbench at $bin (build it first: scripts/build.sh)" >&2; exit 1; }
exec python3 "$root/scripts/cli_docs.py" generate "$bin" "$root"
