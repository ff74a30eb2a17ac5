"""Micro-benchmark: how far the scheduling process's reader of an API child falls behind while
the scheduling loop keeps the GIL busy, reading with ``Connection.recv_bytes`` (two recv calls,
so two GIL hand-backs, per message) and with kubesched.apiproc.read_messages (one recv for
everything waiting).

Not a test. Run from the repository root:

    .venv/bin/python tests/bench/micro/busy_reader.py [--seconds 5] [--rates 200,1000,5000]

A child process sends small messages (300 bytes, its send time inside) at each rate for the
given seconds; the parent's main thread computes without pause, as a scheduling loop with
pods to retry does, while a reader thread takes the messages. For each reader and rate it
prints how many messages arrived and their delay from send to read (median and worst).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection

sys.path.insert(0, ".")

from kubesched.apiproc import read_messages  # noqa: E402

END = b"END"


def send(sock: socket.socket, rate: int, seconds: float) -> None:
    conn = Connection(sock.detach())
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        conn.send_bytes(b"%f;" % time.monotonic() + b"x" * 300)
        time.sleep(1 / rate)
    conn.send_bytes(END)


def measure(reader: str, rate: int, seconds: float) -> str:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        send(theirs, rate, seconds)
        os._exit(0)
    theirs.close()
    delays: list[float] = []
    done = threading.Event()

    def read() -> None:
        if reader == "read_messages":
            messages = read_messages(ours)
        else:
            conn = Connection(ours.fileno())
            messages = iter(conn.recv_bytes, None)
        for message in messages:
            if message == END:
                break
            delays.append(time.monotonic() - float(message[:message.index(b";")]))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    busy = 0
    while not done.is_set():
        for i in range(1000):
            busy += i * i
    os.waitpid(pid, 0)
    delays.sort()
    return (f"{reader:15} {rate:6}/s  {len(delays):6} messages  delay median {delays[len(delays) // 2] * 1000:7.1f} ms"
            f"  worst {delays[-1] * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="200,1000,5000")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, switch interval {sys.getswitchinterval() * 1000:.0f} ms, "
          f"{args.seconds:g} s per run, main thread busy throughout")
    for rate in (int(r) for r in args.rates.split(",")):
        for reader in ("recv_bytes", "read_messages"):
            print(measure(reader, rate, args.seconds), flush=True)


if __name__ == "__main__":
    main()
