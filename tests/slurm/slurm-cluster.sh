#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for the test: munged with a key made here, slurmctld
# and slurmd (Debian's slurm-wlm) with a config of their own in DIR, the node oversubscribed
# (8 CPUs declared whatever it has, OverSubscribe=FORCE), on ports of their own, so a Slurm the
# machine may already run is left alone. Sourced by slurm-in-ci.sh:
#   slurm_up DIR        starts it and waits until the node is idle; exports SLURM_CONF
#   slurm_down          stops what slurm_up started (by the pids it recorded)
slurm_up() {
  local dir=$1 host port
  host=$(hostname -s)
  port=$((17000 + RANDOM % 2000))
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" ||
    { echo "slurm-cluster: munged did not start:"; cat "$dir/munge/munged.log"; return 1; }
  cat > "$dir/slurm.conf" <<CONF
ClusterName=ringbenchci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" || { echo "slurm-cluster: slurmctld did not start:"; cat "$dir/slurmctld.log"; return 1; }
  slurmd -f "$SLURM_CONF" -N "$host" || { echo "slurm-cluster: slurmd did not start:"; cat "$dir/slurmd.log"; return 1; }
  SLURM_DIR=$dir
  local i
  for i in $(seq 60); do
    sinfo -h -o '%T' 2> /dev/null | grep -qE '^(idle|mixed)' && return 0
    sleep 1
  done
  echo "slurm-cluster: the node is not idle after 60 s:"; sinfo; tail -20 "$dir/slurmctld.log" "$dir/slurmd.log"
  return 1
}

slurm_down() {
  local f pid i
  for f in "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2> /dev/null || continue
    for i in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
  done
  return 0
}
