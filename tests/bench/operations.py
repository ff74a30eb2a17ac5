"""What goes on beside the scheduler while a run is measured: scheduler_perf's churn and
deletePods operations (test/integration/scheduler_perf/operations.go, executor.go's
runChurnOp and runDeletePodsOp), on a fixed timetable from the scheduler's start until
every measured pod is bound.

An operation is called with the cluster, the namespace, the schedulerName, an event that
is set when the run ends and a collector of the API errors it meets; it returns once the
event is set, after removing what it left behind that a
shared API server (--kubeconfig) would keep (a churned Node, Service, a finalizer).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from lab.cluster import ApiError, Cluster

# (index, namespace, schedulerName) -> (collection path, body)
Template = Callable[[int, str, str], "tuple[str, dict]"]


@dataclass
class OperationErrors:
    """API errors an operation met: counted, the first few kept for the run's log."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, err: Exception) -> None:
        with self.lock:
            self.count += 1
            if len(self.first) < 3:
                self.first.append(str(err))


def _ticks(interval_s: float, stop: threading.Event):
    """0, 1, 2, ... at start + (n + 1) * interval_s, as Go's time.Ticker: the first tick after one interval."""
    start, tick = time.monotonic(), 0
    while not stop.wait(max(0.0, start + (tick + 1) * interval_s - time.monotonic())):
        yield tick
        tick += 1


@dataclass(frozen=True)
class Churn:
    """scheduler_perf's churnOp. recreate (number 1): every interval, each template's object
    is created if it does not exist and deleted if it does; create: every interval, one more
    of each, for the whole run."""

    mode: str  # "recreate" or "create"
    templates: tuple[Template, ...]
    interval_s: float

    def __call__(self, cluster: Cluster, namespace: str, scheduler_name: str, stop: threading.Event,
                 errors: OperationErrors) -> None:
        live: dict[int, str] = {}  # template -> the path of the object it has now (recreate)
        for tick in _ticks(self.interval_s, stop):
            for slot, template in enumerate(self.templates):
                if self.mode == "recreate" and slot in live:
                    _delete(cluster, live.pop(slot), errors)
                    continue
                path, body = template(tick, namespace, scheduler_name)
                try:
                    cluster.request("POST", path, body, ok=(201,))
                except Exception as err:  # noqa: BLE001 - counted; the churn goes on, as upstream's
                    errors.add(err)
                    continue
                if self.mode == "recreate":
                    live[slot] = f"{path}/{body['metadata']['name']}"
        for path in live.values():
            _delete(cluster, path, errors)


def _delete(cluster: Cluster, path: str, errors: OperationErrors) -> None:
    try:
        cluster.request("DELETE", path, query={"gracePeriodSeconds": 0}, ok=(200, 202, 404))
    except Exception as err:  # noqa: BLE001 - counted, as upstream logs and goes on
        errors.add(err)


@dataclass(frozen=True)
class DeletePods:
    """scheduler_perf's deletePodsOp with deletePodsPerSecond: the named pods, one by one at a
    fixed rate. strip_finalizers: the pods carry a finalizer no controller removes, so once the
    run ends it is removed here and the deleted pods go."""

    per_second: float
    names: Callable[[], list[str]]
    strip_finalizers: bool = False

    def __call__(self, cluster: Cluster, namespace: str, scheduler_name: str, stop: threading.Event,
                 errors: OperationErrors) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods"
        names = self.names()
        for tick in _ticks(1 / self.per_second, stop):
            if tick >= len(names):
                break
            _delete(cluster, f"{path}/{names[tick]}", errors)
        stop.wait()
        if self.strip_finalizers:
            cluster.fan_out(lambda name: _drop_finalizers(cluster, f"{path}/{name}"), names)


def _drop_finalizers(cluster: Cluster, path: str) -> None:
    try:
        cluster.request("PATCH", path, {"metadata": {"finalizers": None}}, ok=(200, 404))
    except ApiError as err:
        if err.status != 404:
            raise


Operation = Callable[[Cluster, str, str, threading.Event, OperationErrors], None]


class RunningOperations:
    """A workload's operations, each on its own thread, for one run."""

    def __init__(self, operations: tuple[Operation, ...], cluster: Cluster, namespace: str, scheduler_name: str):
        self.operations = operations
        self.stop_event = threading.Event()
        self.errors = [OperationErrors() for _operation in operations]
        self.threads = [threading.Thread(target=operation, name=f"operation-{index}", daemon=True,
                                         args=(cluster, namespace, scheduler_name, self.stop_event, errors))
                        for index, (operation, errors) in enumerate(zip(operations, self.errors))]
        for thread in self.threads:
            thread.start()

    def stop(self, timeout_s: float = 120) -> list[str]:
        """End every operation; returns what went wrong, one line per operation that met errors."""
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout_s)
        return [f"{type(operation).__name__}: {errors.count} API errors, e.g. {errors.first[0]}"
                for operation, errors in zip(self.operations, self.errors) if errors.count]
