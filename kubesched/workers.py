"""Thread pools whose threads all start at once and stay for the life of the pool.

A ThreadPoolExecutor starts a thread whenever work arrives and none is idle, up to its
maximum, and keeps every thread it started. Its thread count therefore climbs to the
highest concurrency the process has ever seen: the first burst of preemptions, or an API
server restart that holds every request at once, adds threads that are never given back.
Over hours, that looks like a leak, and a check for leaks cannot tell it from one. A pool
from started_executor has all its threads from the start, so the process holds as many
threads from its start to its end, and no work waits for a thread to be started.

It is a ThreadPoolExecutor (one that reuses idle threads, as every Python this project runs
on does), not a queue and threads of our own: with a hand-made pool, bench
Preemption/500Nodes made 544 to 621 asynchronous preemptions for its 500 preemptors (more
preempted twice), against 501 to 518 with an executor, lazy or started whole; the cause was
not found.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

START_TIMEOUT_S = 60.0


def started_executor(workers: int, name: str) -> ThreadPoolExecutor:
    """A ThreadPoolExecutor of `workers` threads named `<name>_<i>`, all started."""
    if workers < 1:
        raise ValueError(f"a thread pool needs at least one worker, not {workers}")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    # Each task holds its thread until all are held, so every submit finds no idle thread
    # and starts one more.
    everyone = threading.Barrier(workers, timeout=START_TIMEOUT_S)
    for _unused in range(workers):
        pool.submit(everyone.wait)
    return pool
