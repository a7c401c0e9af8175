#!/usr/bin/env python3
"""Loopback TCP between two processes pinned to given CPUs: 1 MiB one way, a 1-byte reply, for
--seconds; prints GB/s for every half second. On this project's 2-vCPU VM it shows what no
ringbench knob controls: across the two vCPUs loopback runs at ~4 GB/s with stretches of
seconds at ~1.7; on one vCPU it is steady within a run, at ~7 or ~4 GB/s from one run to the
next (results/algo-auto-vs-mpi-quiet-20261129/loopback-modes.txt).

  bench/loopback_modes.py --seconds 15 --cpus 0,1     # across vCPUs
  bench/loopback_modes.py --seconds 15 --cpus 0,0     # on one vCPU
"""
import argparse
import os
import socket
import time

BYTES = 1 << 20


def receiver(port, cpu):
    os.sched_setaffinity(0, {cpu})
    c = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(BYTES)
    while True:
        got = 0
        while got < BYTES:
            k = c.recv_into(memoryview(buf)[got:])
            if k == 0:
                os._exit(0)
            got += k
        c.sendall(b"k")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=15)
    p.add_argument("--cpus", default="0,1", help="sender's and receiver's CPU")
    a = p.parse_args()
    send_cpu, recv_cpu = (int(x) for x in a.cpus.split(","))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    if os.fork() == 0:
        receiver(ls.getsockname()[1], recv_cpu)
    os.sched_setaffinity(0, {send_cpu})
    s, _ = ls.accept()
    s.settimeout(10)
    payload = b"x" * BYTES
    end = time.time() + a.seconds
    rates = []
    while time.time() < end:
        t0, n = time.time(), 0
        while time.time() - t0 < 0.5:
            s.sendall(payload)
            s.recv(1)
            n += 1
        rates.append(n * BYTES / (time.time() - t0) / 1e9)
    s.close()
    print(f"cpus {a.cpus}: GB/s per 0.5 s: " + " ".join(f"{r:.2f}" for r in rates))
    print(f"cpus {a.cpus}: median {sorted(rates)[len(rates) // 2]:.2f}, min {min(rates):.2f}, max {max(rates):.2f}")


if __name__ == "__main__":
    main()
