"""Worker pools whose threads all start at once and stay for the life of the process.

A ThreadPoolExecutor starts a thread whenever work arrives and none is idle, up to its
maximum, and keeps every thread it started. Its thread count therefore climbs to the
highest concurrency the process has ever seen: the first burst of preemptions, or an API
server restart that holds every request at once, adds threads that are never given back.
Over hours, that looks like a leak, and a check for leaks cannot tell it from one. A
WorkerPool starts all its threads when it is made, so a process holds the same number of
threads from its start to its end, and no work waits for a thread to be started.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

_STOP = object()


class WorkerPool:
    """``workers`` daemon threads named ``<name>_<i>`` that run what ``submit`` gives them,
    first come, first served; each call returns a concurrent.futures.Future."""

    def __init__(self, workers: int, name: str):
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {workers}")
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
                         for i in range(workers)]
        self._closed = False
        for thread in self._threads:
            thread.start()

    @property
    def workers(self) -> int:
        return len(self._threads)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        if self._closed:
            raise RuntimeError("cannot submit to a worker pool after shutdown")
        future: Future = Future()
        self._tasks.put((future, fn, args))
        return future

    def shutdown(self, wait: bool = True) -> None:
        """Run what was submitted, then end the threads; with wait, return when they have ended."""
        self._closed = True
        for _thread in self._threads:
            self._tasks.put(_STOP)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _work(self) -> None:
        while (task := self._tasks.get()) is not _STOP:
            _run(*task)
            del task  # nothing of the last task stays alive while the thread waits


def _run(future: Future, fn: Callable[..., Any], args: tuple) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args)
    except BaseException as err:  # noqa: BLE001 - the caller gets it from the future
        future.set_exception(err)
    else:
        future.set_result(result)
