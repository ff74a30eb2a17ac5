"""The scheduler's threads for plugins (upstream's framework/parallelize).

upstream hands plugins a Parallelizer (Handle.Parallelizer()) whose Until runs pieces of work
on up to `parallelism` goroutines started for that call, and plugins start a goroutine of
their own for work that outlives their call (preemption's asynchronous evictions).

Here `until` starts its threads for the call too, as many as the pieces up to `parallelism`,
and they end with it, so a call's pieces never wait behind another call's. `go` runs on
`parallelism` threads started with the Parallelizer and kept (kubesched/workers.py), so a
scheduler's thread count does not climb to the busiest moment it has lived through; at most
`parallelism` pieces of background work run at once (upstream starts a goroutine for each);
more wait their turn, first come, first served.

The scheduler starts its Parallelizer with itself and gives it to every profile. A Handle made
without one (a plugin's own tests, the explain and whatif tools) gets a lazy one, whose
background threads start at its first `go`: most never call it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

from kubesched.workers import started_executor


class Parallelizer:
    def __init__(self, parallelism: int, *, lazy: bool = False):
        self.parallelism = max(1, parallelism)
        self._lock = threading.Lock()
        self._background: ThreadPoolExecutor | None = None if lazy else self._start()

    def _start(self) -> ThreadPoolExecutor:
        return started_executor(self.parallelism, "background")

    def until(self, pieces: Sequence[Any], work: Callable[[Any], Any]) -> list[Any]:
        """work(piece) for every piece side by side; their results, in order. The first
        failure is raised once every piece has ended. A lone piece runs in the calling thread."""
        if len(pieces) <= 1:
            return [work(piece) for piece in pieces]
        with ThreadPoolExecutor(max_workers=min(len(pieces), self.parallelism),
                                thread_name_prefix="parallelize") as pool:
            futures = [pool.submit(work, piece) for piece in pieces]
        for error in [f.exception() for f in futures]:
            if error is not None:
                raise error
        return [f.result() for f in futures]

    def go(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run fn(*args) in the background (upstream's `go`)."""
        background = self._background
        if background is None:
            with self._lock:
                if self._background is None:
                    self._background = self._start()
                background = self._background
        return background.submit(fn, *args)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            background, self._background = self._background, None
        if background is not None:
            background.shutdown(wait)
