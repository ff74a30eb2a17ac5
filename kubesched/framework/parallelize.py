"""The scheduler's worker threads for plugins (upstream's framework/parallelize).

upstream hands plugins a Parallelizer (Handle.Parallelizer()) whose Until runs pieces of work
on `parallelism` goroutines, and plugins start a goroutine of their own for work that outlives
their call (preemption's asynchronous evictions). Here both run on threads started all at once
(kubesched/workers.py), so a scheduler's thread count does not climb to the busiest moment it
has lived through: `until` runs on one set, `go` on another, so work started with `go` that
waits for an `until` never waits for itself. At most `parallelism` pieces of `go` work run at
once (upstream starts a goroutine for each); more wait their turn, first come, first served.

The scheduler starts its Parallelizer with itself and gives it to every profile. A Handle made
without one (a plugin's own tests, the explain and whatif tools) gets a lazy one, whose threads
start at its first use: most never use it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, NamedTuple, Sequence

from kubesched.workers import WorkerPool


class _Pools(NamedTuple):
    pieces: WorkerPool
    background: WorkerPool


class Parallelizer:
    def __init__(self, parallelism: int, *, lazy: bool = False):
        self.parallelism = max(1, parallelism)
        self._lock = threading.Lock()
        self._pools: _Pools | None = None if lazy else self._start()

    def _start(self) -> _Pools:
        return _Pools(WorkerPool(self.parallelism, "parallelize"), WorkerPool(self.parallelism, "background"))

    def _get(self) -> _Pools:
        pools = self._pools
        if pools is None:
            with self._lock:
                if self._pools is None:
                    self._pools = self._start()
                pools = self._pools
        return pools

    def until(self, pieces: Sequence[Any], work: Callable[[Any], Any]) -> list[Any]:
        """work(piece) for every piece side by side; their results, in order. The first
        failure is raised once every piece has ended. A lone piece runs in the calling thread."""
        if len(pieces) <= 1:
            return [work(piece) for piece in pieces]
        futures = [self._get().pieces.submit(work, piece) for piece in pieces]
        for error in [f.exception() for f in futures]:
            if error is not None:
                raise error
        return [f.result() for f in futures]

    def go(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run fn(*args) in the background (upstream's `go`)."""
        return self._get().background.submit(fn, *args)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            pools, self._pools = self._pools, None
        if pools is not None:
            pools.pieces.shutdown(wait)
            pools.background.shutdown(wait)
