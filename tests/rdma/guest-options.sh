# shellcheck shell=bash disable=SC2034  # the variables are the sourcing script's
# Sourced by the host scripts (*-in-guests.sh), once they have set HERE: the defaults and
# the options they share. guest_option "$@" takes $1 when it is one of these options and sets
# TAKEN to the number of words it took; for any other it returns 1. open_summary makes OUT
# (absolute from then on) and an empty OUT/summary.txt, to which say LINE... appends as it prints.
REPO=$(cd "$HERE/../.." && pwd)
BUILD=$REPO/build  # --build-dir DIR
OUT=""             # --out DIR (empty: a new folder under results/)
STATE=""           # --state DIR: run in the cluster up there (guest-fixture.sh up); else boot one
GUEST_OPTS=()      # --cache-dir DIR, --mem SIZE, --no-install: for guest-hosts.sh
guest_option() {
  case "$1" in
    --build-dir) BUILD=${2:?}; TAKEN=2 ;;
    --out) OUT=${2:?}; TAKEN=2 ;;
    --state) STATE=${2:?}; TAKEN=2 ;;
    --cache-dir | --mem) GUEST_OPTS+=("$1" "${2:?}"); TAKEN=2 ;;
    --no-install) GUEST_OPTS+=("$1"); TAKEN=1 ;;
    *) return 1 ;;
  esac
}
open_summary() {
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd -P)
  SUMMARY=$OUT/summary.txt
  : > "$SUMMARY"
}
say() { echo "$*" | tee -a "$SUMMARY"; }
