# Sourced by the in-guest scripts (busybox sh): barrier NAME waits (up to 300 s) until every
# guest of the cluster has arrived, each leaving a file in the shared directory; returns 1 on
# the timeout.
count() { [ -e "$1" ] && echo $# || echo 0; }  # count GLOB-EXPANSION: existing files
barrier() {
  echo "$GUEST_INDEX" > "$GUEST_SHARED/barrier-$1-$GUEST_INDEX"
  n=0
  while [ "$(count "$GUEST_SHARED/barrier-$1-"*)" -lt "$GUEST_COUNT" ]; do
    n=$((n + 1)); [ $n -gt 1200 ] && { echo "barrier $1: timed out"; return 1; }
    sleep 0.25
  done
}
