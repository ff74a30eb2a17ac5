"""Pods a Permit plugin asked to wait (upstream framework/runtime/waiting_pods_map.go).

A waiting pod is assumed on its node and holds no thread: its binding cycle resumes from
``on_done`` once every waiting plugin allowed it, one rejected it, or a plugin's timeout
rejected it. Plugins reach waiting pods through the framework handle
(``iterate_over_waiting_pods``, ``get_waiting_pod``) and call ``allow``/``reject`` from any
thread.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable

from kubesched.framework.interface import Code, Status
from kubesched.framework.types import PodInfo

# Upstream's maxTimeout for a Permit plugin's wait.
MAX_PERMIT_TIMEOUT = 15 * 60.0


def go_duration(seconds: float) -> str:
    """time.Duration.String(): "500ms", "2s", "1.5s", "1m0s", "1h0m0s"."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


class DeadlineTimers:
    """One thread runs every waiting pod's timeouts (upstream starts a time.AfterFunc each)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, list]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def after(self, seconds: float, callback: Callable[[], None]) -> list:
        """Run callback after seconds; returns a handle for cancel()."""
        entry = [callback]
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), entry))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="permit-timeouts", daemon=True)
                self._thread.start()
            self._cond.notify()
        return entry

    @staticmethod
    def cancel(handle: list) -> None:
        handle[0] = None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic()))
                _deadline, _seq, entry = heapq.heappop(self._heap)
            callback = entry[0]
            if callback is not None:
                callback()


TIMERS = DeadlineTimers()


class WaitingPod:
    """A pod waiting in Permit (upstream waitingPod)."""

    def __init__(self, pod: PodInfo, plugins_wait_time: dict[str, float], timers: DeadlineTimers = TIMERS):
        self.pod = pod
        self.since = time.monotonic()
        self._lock = threading.RLock()
        self._status: Status | None = None  # the first signal wins, as the 1-slot channel upstream
        self._done = False
        self._callbacks: list[Callable[[Status], None]] = []
        self._timers = timers
        self._pending: dict[str, list] = {}
        with self._lock:  # timers fire only once the map is complete
            for plugin, wait in plugins_wait_time.items():
                self._pending[plugin] = timers.after(wait, self._timeout(plugin, wait))

    def _timeout(self, plugin: str, wait: float) -> Callable[[], None]:
        return lambda: self.reject(plugin, f"rejected due to timeout after waiting {go_duration(wait)} at plugin "
                                           f"{plugin}")

    def get_pod(self) -> PodInfo:
        return self.pod

    def get_pending_plugins(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def allow(self, plugin_name: str) -> None:
        """plugin_name allows the pod; the last pending plugin's allow lets it bind."""
        with self._lock:
            handle = self._pending.pop(plugin_name, None)
            if handle is not None:
                self._timers.cancel(handle)
            if self._pending:
                return
            self._signal(Status(Code.SUCCESS))
            self._done = True

    def reject(self, plugin_name: str, msg: str) -> bool:
        """The pod is unschedulable; False when it was already allowed or rejected."""
        return self._stop(Code.UNSCHEDULABLE, plugin_name, msg)

    def preempt(self, plugin_name: str, msg: str) -> bool:
        """The pod is preempted: back to the queue without being marked unschedulable."""
        return self._stop(Code.ERROR, plugin_name, msg)

    def _stop(self, code: Code, plugin_name: str, msg: str) -> bool:
        with self._lock:
            for handle in self._pending.values():
                self._timers.cancel(handle)
            self._signal(Status(code, msg, plugin=plugin_name))
            if self._done:
                return False
            self._done = True
            return True

    def _signal(self, status: Status) -> None:
        if self._status is not None:
            return
        self._status = status
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(status)

    def on_done(self, callback: Callable[[Status], None]) -> None:
        """callback(status) once the pod is allowed or rejected (at once if it already is)."""
        with self._lock:
            if self._status is None:
                self._callbacks.append(callback)
                return
            status = self._status
        callback(status)

    def status(self) -> Status | None:
        return self._status


class WaitingPodsMap:
    """uid -> WaitingPod, safe across threads."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}
        self._lock = threading.Lock()

    def add(self, waiting: WaitingPod) -> None:
        with self._lock:
            self._pods[waiting.pod.uid] = waiting

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid) if self._pods else None  # hot path: usually empty

    def iterate(self, callback: Callable[[WaitingPod], None]) -> None:
        with self._lock:
            pods = list(self._pods.values())
        for waiting in pods:
            callback(waiting)

    def __len__(self) -> int:
        return len(self._pods)


def permit_outcome(status: Status) -> Status | None:
    """What WaitOnPermit returns for the signal a waiting pod got: None when allowed."""
    if status.is_success():
        return None
    if status.is_rejected():
        return status
    return Status(Code.ERROR, f"waiting on permit for pod: {status.message()}", plugin=status.plugin,
                  error=status.error)
