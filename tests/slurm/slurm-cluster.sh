#!/usr/bin/env bash
# A Slurm cluster of NODES nodes on this machine for the test, each node a network namespace of
# its own (its own address, its own hostname through a UTS namespace, its own slurmd), joined by
# a bridge in a switch namespace, as the emulated cluster's nodes are; slurmctld and srun run on
# a login node ("ctl") on the same bridge. Debian's slurm-wlm with a config of its own in DIR and
# munged with a key made here, so a Slurm the machine may already run is left alone. The node
# names n0..n(NODES-1) and ctl resolve through DIR/hosts, bound over /etc/hosts in the caller's
# private mount namespace (the caller must run under `unshare -m --propagation private`), as a
# cluster's DNS would name them. Sourced by slurm-in-ci.sh:
#   slurm_up DIR NODES    starts it and waits until every node is idle; exports SLURM_CONF
#   on_login CMD...       runs CMD on the login node (srun, sinfo)
#   slurm_down            stops the daemons and deletes the namespaces
slurm_prefix=rbslurm$$
slurm_subnet=10.213.7

slurm_netns() {  # NAME ADDR: a node namespace with eth0 on the switch's bridge
  local ns=$slurm_prefix-$1
  ip netns add "$ns" &&
    ip -n "$slurm_prefix-sw" link add name "p$1" type veth peer name eth0 netns "$ns" &&
    ip -n "$slurm_prefix-sw" link set "p$1" master br0 &&
    ip -n "$slurm_prefix-sw" link set "p$1" up &&
    ip -n "$ns" addr add "$2/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up
}

# NODE CMD...: CMD in NODE's network namespace under NODE's hostname. nsenter rather than
# `ip netns exec`, which remounts /sys and would hide the cgroup filesystem slurmd reads.
on_node() {
  local node=$1
  shift
  nsenter --net="/run/netns/$slurm_prefix-$node" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}
on_login() { on_node ctl "$@"; }

slurm_up() {
  local dir=$1 nodes=$2 i addrs=""
  SLURM_DIR=$dir SLURM_NODES=$nodes
  mkdir -p "$dir/state" "$dir/munge"
  {
    echo "127.0.0.1 localhost"
    echo "$slurm_subnet.100 ctl"
    for i in $(seq 0 $((nodes - 1))); do echo "$slurm_subnet.$((i + 1)) n$i"; done
  } > "$dir/hosts"
  mount --bind "$dir/hosts" /etc/hosts || { echo "slurm-cluster: cannot bind $dir/hosts over /etc/hosts"; return 1; }
  ip netns add "$slurm_prefix-sw" && ip -n "$slurm_prefix-sw" link add name br0 type bridge &&
    ip -n "$slurm_prefix-sw" link set br0 up && slurm_netns ctl "$slurm_subnet.100" ||
    { echo "slurm-cluster: cannot make the nodes' network namespaces"; return 1; }
  for i in $(seq 0 $((nodes - 1))); do
    slurm_netns "n$i" "$slurm_subnet.$((i + 1))" || { echo "slurm-cluster: cannot make node n$i's namespace"; return 1; }
    addrs+=${addrs:+,}$slurm_subnet.$((i + 1))
    mkdir -p "$dir/spool-n$i"
  done
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  # A unix socket on the shared filesystem: every namespace's daemons reach the one munged.
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" 2> /dev/null ||
    { echo "slurm-cluster: munged did not start:"; cat "$dir/munge/munged.log"; return 1; }
  # Each node a namespace of its own, so every slurmd takes the same ports; %n: the node's name.
  cat > "$dir/slurm.conf" <<CONF
ClusterName=ringbenchci
SlurmctldHost=ctl($slurm_subnet.100)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=n[0-$((nodes - 1))] NodeAddr=$addrs CPUs=2 State=UNKNOWN
PartitionName=ci Nodes=n[0-$((nodes - 1))] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
  export SLURM_CONF=$dir/slurm.conf
  on_login slurmctld -f "$SLURM_CONF" || { echo "slurm-cluster: slurmctld did not start:"; cat "$dir/slurmctld.log"; return 1; }
  for i in $(seq 0 $((nodes - 1))); do
    on_node "n$i" slurmd -f "$SLURM_CONF" || { echo "slurm-cluster: slurmd of n$i did not start:"; cat "$dir/slurmd-n$i.log"; return 1; }
  done
  for i in $(seq 60); do
    [ "$(on_login sinfo -h -t idle -o '%D' 2> /dev/null)" = "$nodes" ] && return 0
    sleep 1
  done
  echo "slurm-cluster: not every node is idle after 60 s:"; on_login sinfo; tail -20 "$dir"/slurm*.log
  return 1
}

slurm_down() {
  local f pid i n left pids=()
  [ -n "${SLURM_DIR:-}" ] || return 0
  trap '' TERM INT  # a second signal must not leave daemons behind halfway through
  # Every daemon told at once (a slurmd takes about 2 s to stop), then each waited for.
  for f in "$SLURM_DIR"/slurmd-*.pid "$SLURM_DIR/slurmctld.pid"; do
    [ -f "$f" ] && pid=$(cat "$f") && kill "$pid" 2> /dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
  done
  [ -f "$SLURM_DIR/munge/munged.pid" ] && kill "$(cat "$SLURM_DIR/munge/munged.pid")" 2> /dev/null
  # What a failed or killed run left on the nodes (a job step's slurmstepd, ranks) goes too.
  for n in ctl sw $(seq -f 'n%g' 0 $((SLURM_NODES - 1))); do
    left=$(ip netns pids "$slurm_prefix-$n" 2> /dev/null)
    # shellcheck disable=SC2086  # a list of pids
    [ -n "$left" ] && kill -9 $left 2> /dev/null
    ip netns delete "$slurm_prefix-$n" 2> /dev/null
  done
  return 0
}
