"""When each measured pod gets bound, seen through one watch on the benchmark namespace."""

from __future__ import annotations

import json
import math
import threading
import time

from bench.cluster import Cluster


class BindWatcher:
    """Records the monotonic time at which each measured pod is first seen bound.

    Start it before the scheduler: the initial list settles what is already bound, and
    every later binding is timed at the watch event, the earliest moment a client can know.
    """

    def __init__(self, cluster: Cluster, namespace: str, label_selector: str):
        self.cluster = cluster
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.query = {"labelSelector": label_selector}
        self.bound_at: dict[str, float] = {}
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._stream = None
        self._listed = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="bind-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._listed.wait(timeout=60):
            raise TimeoutError("the pod watch did not start within 60 s; is the API server overloaded?")
        if self.error:
            raise self.error

    def stop(self) -> None:
        """Stop, and close the watch at once: an open watch holds up the API server's shutdown."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.shutdown()
        self._thread.join(timeout=10)

    def _record(self, pod: dict, now: float) -> None:
        name = pod["metadata"]["name"]
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound_at:
            self.bound_at[name] = now
            with self._changed:
                self._changed.notify_all()

    def _run(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    items, resource_version = self.cluster.list_all(self.path, self.query)
                    now = time.monotonic()
                    for pod in items:
                        self._record(pod, now)
                    self._listed.set()
                self._stream = self.cluster.stream(self.path, dict(
                    self.query, watch="true", resourceVersion=resource_version, allowWatchBookmarks="true",
                    timeoutSeconds=300))
                try:
                    for line in self._stream:
                        if self._stop.is_set():
                            return
                        if not line.strip():
                            continue
                        now = time.monotonic()
                        event = json.loads(line)
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            # 410 Gone: our resourceVersion is too old; relist.
                            resource_version = ""
                            break
                        resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                        if kind in ("ADDED", "MODIFIED"):
                            self._record(obj, now)
                finally:
                    self._stream.release_conn()
                    self._stream = None
            except Exception as err:  # noqa: BLE001 - a dropped stream of any kind is rewatched
                if not self._listed.is_set():
                    self.error = err
                    self._listed.set()
                    return
                if not self._stop.is_set():
                    time.sleep(0.2)

    def wait_changed(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile, the definition scheduler_perf's latency summaries use."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]
