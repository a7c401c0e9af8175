#!/bin/sh
host=$1
shift
export OMPI_MCA_orte_tmpdir_base=/tmp/rb-bench-agent-$host
mkdir -p "$OMPI_MCA_orte_tmpdir_base"
exec ip netns exec ringbench-$host taskset -c $((${host#n} % 2)) /bin/sh -c "$*"
