#!/usr/bin/env bash
# Every checked-in report regenerates byte for byte from its raw data:
#   scripts/check_reports.sh RINGBENCH [SOURCE_DIR]
# For each results/**/raw.jsonl, a copy of its folder is reported again (`ringbench report`) and
# its report.md, summary.csv and plots' data and scripts (plots/*.dat, *.gp) must equal the
# checked-in ones (the SVGs are gnuplot's, whose version may differ). Exit 77 (skipped) without
# gnuplot: the reports were made with it, and without it report.md says so instead.
set -euo pipefail
bin=$(realpath "$1")
src=$(realpath "${2:-$(dirname "$0")/..}")
command -v gnuplot >/dev/null || { echo "check_reports: gnuplot not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0 failed=0
while IFS= read -r raw; do
  dir=$(dirname "$raw") rel=${raw#"$src"/}
  rel=$(dirname "$rel")
  copy="$tmp/$checked"
  mkdir -p "$copy"
  cp "$raw" "$copy/raw.jsonl"
  checked=$((checked + 1))
  if ! "$bin" report "$copy" >"$copy.log" 2>&1; then
    echo "$rel: ringbench report failed:"; cat "$copy.log"; failed=$((failed + 1)); continue
  fi
  wrong=()
  for f in report.md summary.csv; do
    [ -f "$dir/$f" ] && ! cmp -s "$dir/$f" "$copy/$f" && wrong+=("$f")
  done
  if [ -d "$dir/plots" ]; then
    for f in "$dir"/plots/*.dat "$dir"/plots/*.gp; do
      [ -e "$f" ] || continue
      cmp -s "$f" "$copy/plots/$(basename "$f")" || wrong+=("plots/$(basename "$f")")
    done
  fi
  if [ ${#wrong[@]} -gt 0 ]; then
    echo "$rel: differs when regenerated: ${wrong[*]}"
    diff "$dir/${wrong[0]}" "$copy/${wrong[0]}" | head -20 || true
    failed=$((failed + 1))
  fi
done < <(find "$src/results" -name raw.jsonl -type f | sort)
echo "check_reports: $checked checked-in reports regenerated, $failed differ"
[ "$checked" -gt 0 ] && [ "$failed" -eq 0 ]
