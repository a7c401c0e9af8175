#!/bin/sh
# In-guest, as user ringbench over ssh (busybox sh), before each scenario in a cluster that stays
# up (guest-scenario.sh): ends what an earlier scenario left running in this guest, e.g. a rank,
# perftest or mpirun whose test was killed before its own limit ended them. Every process of this
# user but this script and its ancestors (the ssh session running it) gets SIGKILL, by pid; each
# is named on stdout.
keep=" "
p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ]; do
  keep="$keep$p "
  p=$(awk '$1 == "PPid:" {print $2}' "/proc/$p/status" 2> /dev/null)
done
me=$(id -u)
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  case "$keep" in *" $pid "*) continue ;; esac
  # a child of this script that has exited since the glob, or another user's: no status of ours
  [ "$(awk '$1 == "Uid:" {print $2}' "$d/status" 2> /dev/null)" = "$me" ] || continue
  what=$(tr '\0' ' ' < "$d/cmdline" 2> /dev/null | cut -c1-160)
  kill -KILL "$pid" 2> /dev/null && echo "guest-reset: g$GUEST_INDEX: killed a leftover process $pid: $what"
done
exit 0
