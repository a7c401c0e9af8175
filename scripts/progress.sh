#!/usr/bin/env bash
# A build's progress on one line: reads a build's output (ninja's "[n/N] ..." lines) on stdin,
# keeps all of it in LOG, and shows "LABEL [n/N] P%  elapsed, ~T left" (the time left from the
# rate so far). On a terminal the line is rewritten in place; elsewhere (CI, a pipe) a line is
# printed at every tenth of the work, and at least every 30 s (a unity batch can take a minute).
# Lines that are not progress (warnings, errors) are shown as they come, so a failure is never
# hidden.
#   some-build 2>&1 | scripts/progress.sh LOG [LABEL]
set -uo pipefail
log=${1:?usage: progress.sh LOG [LABEL]}
label=${2:-build}
: > "$log"
start=$(date +%s) tty=0 shown=-1 last="" printed=0  # printed: elapsed seconds at the last line
[ -t 1 ] && tty=1
fmt() {  # SECONDS -> 1m05s
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}
show() {  # DONE TOTAL
  local done=$1 total=$2 pct elapsed left
  pct=$((100 * done / total))
  elapsed=$(($(date +%s) - start))
  left=$((done > 0 ? elapsed * (total - done) / done : 0))
  last=$(printf '%s [%d/%d] %3d%%  elapsed %s, ~%s left' "$label" "$done" "$total" "$pct" \
    "$(fmt $elapsed)" "$(fmt $left)")
  if [ $tty = 1 ]; then printf '\r\033[K%s' "$last"
  elif [ $((pct / 10)) -gt $shown ] || [ $((elapsed - printed)) -ge 30 ]; then
    echo "$last"
    shown=$((pct / 10)) printed=$elapsed
  fi
}
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$log"
  if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
    show "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  elif [[ $line =~ ^(ninja: no work to do|ninja: build stopped) ]] || [[ ! $line =~ ^(\[|--|ninja: Entering) ]]; then
    [ $tty = 1 ] && [ -n "$last" ] && printf '\r\033[K'
    printf '%s\n' "$line"
    [ $tty = 1 ] && [ -n "$last" ] && printf '%s' "$last"
  fi
done
[ $tty = 1 ] && [ -n "$last" ] && echo
echo "$label: ended after $(fmt $(($(date +%s) - start))) (full output: $log)"
