#!/usr/bin/env python3
"""Starts a Horovod gloo job with one rank per emulated node (network namespace).

horovodrun wants ssh; this does what its gloo launcher (horovod.runner.gloo_run) does without
it: it runs Horovod's rendezvous server here (run it in the cluster's switch namespace, so
every node reaches it) and starts rank k with `ip netns exec PREFIX-n<k> taskset -c CPU`, with
the environment horovodrun gives a rank. Every rank's output goes to LOGDIR/rank<k>.log. A rank
that fails stops the others; the whole job has a deadline.

  ip netns exec ringbench-sw VENV/bin/python bench/horovod_launch.py --nodes 2 --addr 10.77.0.254 \
      --cpus 0,1 --logdir DIR -- VENV/bin/python bench/horovod_train.py ...
"""
import argparse
import os
import subprocess
import sys
import time

from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.gloo_run import create_slot_env_vars
from horovod.runner.http.http_server import RendezvousServer


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, required=True, help="ranks, one per node PREFIX-n0 .. n<N-1>")
    p.add_argument("--prefix", default="ringbench", help="namespaces PREFIX-n<k> (`ringbench cluster up`)")
    p.add_argument("--addr", required=True, help="this namespace's address the ranks reach the rendezvous at")
    p.add_argument("--iface", default="eth0", help="the nodes' interface (HOROVOD_GLOO_IFACE)")
    p.add_argument("--cpus", required=True, help="comma-separated CPU of each node k, used modulo its length")
    p.add_argument("--logdir", required=True)
    p.add_argument("--timeout", type=float, default=1800, help="seconds before the job is stopped")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the rank's command")
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if a.nodes < 1 or not cmd:
        sys.exit("horovod_launch.py: need --nodes >= 1 and a command after --")
    cpus = a.cpus.split(",")
    os.makedirs(a.logdir, exist_ok=True)

    hosts = parse_hosts(",".join(f"n{k}:1" for k in range(a.nodes)))
    plan = get_host_assignments(hosts, a.nodes)
    server = RendezvousServer()
    port = server.start()
    server.init(plan)
    procs = []
    for slot in plan:
        k = int(slot.hostname[1:])
        env = dict(os.environ)
        env.update(create_slot_env_vars(slot))
        env.update({"HOROVOD_GLOO_RENDEZVOUS_ADDR": a.addr, "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
                    "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo",
                    "HOROVOD_GLOO_IFACE": a.iface})
        argv = ["ip", "netns", "exec", f"{a.prefix}-n{k}", "taskset", "-c", cpus[k % len(cpus)]] + cmd
        log = open(os.path.join(a.logdir, f"rank{slot.rank}.log"), "w")
        procs.append((slot.rank, subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT), log))

    deadline = time.monotonic() + a.timeout
    failed = None
    while any(pr.poll() is None for _, pr, _ in procs):
        failed = next(((r, pr.returncode) for r, pr, _ in procs if pr.returncode not in (None, 0)), None)
        if failed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for _, pr, _ in procs:
        if pr.poll() is None:
            pr.terminate()
    for _, pr, log in procs:
        try:
            pr.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.wait()
        log.close()
    server.stop()
    if failed is None:
        failed = next(((r, pr.returncode) for r, pr, _ in procs if pr.returncode != 0), None)
    if time.monotonic() > deadline:
        sys.exit(f"horovod_launch.py: the job ran past {a.timeout:.0f} s and was stopped (logs in {a.logdir})")
    if failed:
        sys.exit(f"horovod_launch.py: rank {failed[0]} exited with {failed[1]} (its log: {a.logdir}/rank{failed[0]}.log)")


if __name__ == "__main__":
    main()
