# Sourced by the bench scripts that compare ours with Open MPI under mpirun: where the ranks run.
#
#   bench_net_setup BIN NODES OUTDIR
# Without LINK: loopback. With LINK (a tc rate such as 1gbit; needs root): an emulated cluster
# of NODES nodes (`ringbench cluster up`, removed on exit), run as a sweep runs its MPI points
# there: mpirun in the switch namespace starts rank k in node k's namespace, on CPU k mod this
# machine's CPUs, through an rsh agent, with Open MPI on the cluster's subnet only and every
# ringbench rank on the node's eth0 (the MPI baseline's too: its job store listens there). Then,
# for a run of N ranks:
#   "${BENCH_LAUNCH[@]}" mpirun -np N "${BENCH_MCA[@]}" $(bench_hosts N) BIN ... "${BENCH_IFACE[@]}"
# BENCH_NETNS is the cluster's namespace prefix (empty on loopback).
bench_net_setup() {
  local bin=$1 nodes=$2 out=$3
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  BENCH_MCA=(--oversubscribe --mca pml ob1 --mca btl tcp,self)
  BENCH_LAUNCH=() BENCH_IFACE=() BENCH_NETNS=
  if [ -z "${LINK:-}" ]; then
    BENCH_MCA+=(--mca btl_tcp_if_include lo)
    return 0
  fi
  "$bin" cluster up --nodes "$nodes" --link "$LINK" >"$out/cluster.txt"
  trap '"'"$bin"'" cluster down >/dev/null' EXIT
  local agent=$out/agent.sh
  printf '%s\n' '#!/bin/sh' 'host=$1' 'shift' \
    'export OMPI_MCA_orte_tmpdir_base=/tmp/rb-bench-agent-$host' 'mkdir -p "$OMPI_MCA_orte_tmpdir_base"' \
    "exec ip netns exec ringbench-\$host taskset -c \$((\${host#n} % $(nproc))) /bin/sh -c \"\$*\"" >"$agent"
  chmod 755 "$agent"
  BENCH_MCA+=(--bind-to none --mca mpi_yield_when_idle 1 --mca btl_tcp_if_include 10.77.0.0/24
              --mca oob_tcp_if_include 10.77.0.0/24 --mca plm_rsh_agent "$agent")
  BENCH_LAUNCH=(ip netns exec ringbench-sw)
  BENCH_IFACE=(--iface eth0)
  BENCH_NETNS=ringbench
}

bench_hosts() {  # bench_hosts N: mpirun's host list for N ranks (nothing on loopback)
  [ -n "${LINK:-}" ] && echo "-H $(seq -s, -f 'n%.0f' 0 $(($1 - 1)))"
  return 0
}
