# Shared by bench/horovod_vs_ringbench.sh and bench/horovod_check.sh (sourced, not run): their
# arguments and the model's batch and size, the emulated cluster Horovod's ranks run in, and
# the alternating rounds.
# horovod_args SCRIPT DEFAULT_ROUNDS "$@": sets out nodes model rounds link, rb venv here,
# batch size params (the torch model's parameter count, checked by horovod_train.py) and cpus.
horovod_args() {
  local script=$1 default_rounds=$2
  shift 2
  out=${1:?usage: $script OUT [NODES] [MODEL] [ROUNDS] [LINK]}
  nodes=${2:-2} model=${3:-mobilenet_v1} rounds=${4:-$default_rounds} link=${5:-1gbit}
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  rb=${RINGBENCH:-$here/../build/runner/ringbench}
  venv=${HOROVOD_VENV:-/tmp/hvd-venv}
  case $model in
    mobilenet_v1) batch=8 size=96 params=4231976 ;;
    lenet) batch=32 size=28 params=1663370 ;;
    *) echo "$script: model must be mobilenet_v1 or lenet, not '$model'" >&2; exit 2 ;;
  esac
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  cpus=$(seq -s, 0 $(($(nproc) - 1)))
  made_hosts=() cluster_up=0
  trap horovod_cleanup EXIT
}

horovod_cleanup() {
  if ((cluster_up)); then "$rb" cluster down >/dev/null 2>&1 || true; fi
  for f in "${made_hosts[@]}"; do rm -f "$f"; rmdir "$(dirname "$f")" 2>/dev/null || true; done
}

# The emulated cluster for Horovod's ranks. Horovod 0.28.1's gloo device uses the address this
# host's name resolves to: in each node namespace it must be that node's own (`ip netns exec`
# binds /etc/netns/<ns>/hosts).
horovod_cluster_up() {
  "$rb" cluster up --nodes "$nodes" --link "$link" >/dev/null  # refuses if one is up already
  cluster_up=1
  local k d
  for ((k = 0; k < nodes; k++)); do
    d=/etc/netns/ringbench-n$k
    mkdir -p "$d"
    [[ -e $d/hosts ]] || made_hosts+=("$d/hosts")
    printf '127.0.0.1 localhost\n10.77.0.%d %s\n' $((k + 1)) "$(hostname)" > "$d/hosts"
  done
}

horovod_cluster_down() {
  "$rb" cluster down >/dev/null
  cluster_up=0
}

# One Horovod job of the model on the cluster's nodes: horovod_job NAME TIMEOUT_S WARMUP, its
# logs in OUT/NAME.logs, its results in OUT/NAME.json. HOROVOD_* settings of the caller's
# (VAR=value horovod_job ...) pass through; the response cache and hierarchical allgather are fixed.
# HVD_COMPRESSION=fp16 runs it with hvd.Compression.fp16 (default none).
horovod_job() {
  local name=$1 timeout=$2 warmup=$3
  HOROVOD_CACHE_CAPACITY=1024 HOROVOD_HIERARCHICAL_ALLGATHER=0 \
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread OMP_NUM_THREADS=1 \
    ip netns exec ringbench-sw "$venv/bin/python" "$here/horovod_launch.py" --nodes "$nodes" \
      --addr 10.77.0.254 --cpus "$cpus" --logdir "$out/$name.logs" --timeout "$timeout" -- \
      "$venv/bin/python" "$here/horovod_train.py" --model "$model" --batch "$batch" --image-size "$size" \
      --threads 1 --compression "${HVD_COMPRESSION:-none}" --warmup "$warmup" --steps 30 --expect-params "$params" --json "$out/$name.json"
}

# Rounds of run_ringbench R and run_horovod R (the caller's), alternating which goes first.
alternate_rounds() {
  local r
  for ((r = 1; r <= rounds; r++)); do
    echo "round $r start $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
    if ((r % 2)); then run_ringbench "$r"; run_horovod "$r"; else run_horovod "$r"; run_ringbench "$r"; fi
    echo "round $r end   $(date -u +%H:%M:%S) $(uptime)" >> "$out/uptime.txt"
  done
}
