#!/usr/bin/env bash
# paired per-size runs: ring (I/O thread), ring (caller sends), Open MPI; N=$N
cd "$(dirname "$0")/../../../../.."  # the repository root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/runner/ringbench
mca=(${BIND:+--bind-to $BIND} --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
N=${N:-2}; REPS=${REPS:-8}; SIZES=${SIZES:-"1M 2M"}
uptime
for rep in $(seq 1 $REPS); do
  arms=(${ARMS:-io caller mpi}); ((rep % 2)) || arms=($(printf "%s\n" "${arms[@]}" | tac))
  for s in $SIZES; do
    for a in "${arms[@]}"; do
      case $a in
        io) args=(--impl ring --algo auto); E=() ;;
        caller) args=(--impl ring --algo auto); E=(-x RINGBENCH_TCP_CALLER_SENDS=1) ;;
        direct) args=(--impl ring --algo direct); E=() ;;
        rd) args=(--impl ring --algo rd); E=() ;;
        mpi|mpi2) args=(--impl mpi); E=() ;;
      esac
      line=$(timeout 120 mpirun --oversubscribe -np $N "${mca[@]}" "${E[@]}" $B allreduce "${args[@]}" -b $s -e $s -n 20 -w 3 -c 1 2>&1 | grep -E '^ +[0-9]' | head -1)
      echo "$rep $s $a $(echo $line | awk '{print $8, $12, $10+$14}')"
    done
  done
done
uptime
