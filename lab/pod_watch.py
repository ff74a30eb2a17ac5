"""One list-then-watch loop over the pods of a namespace, for every harness that times or
checks bindings: the benchmark (when each measured pod was first seen bound) and the
reliability suites (every nodeName change, across API server restarts and 410 Gone).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any


def node_of(pod: dict | None) -> str:
    return ((pod or {}).get("spec") or {}).get("nodeName") or ""


class PodWatch:
    """Follows spec.nodeName of every pod in a namespace (optionally a label selection),
    relisting after a lost watch or a 410, so a change made while disconnected still counts.

    ``bound_at[name]`` is the monotonic time the binding was first seen: taken when the
    watch event arrives, the earliest moment a client can know. ``rebinds[name]`` counts
    nodeName changes after the first (a double bind).
    """

    LIST_PAGE = 1000

    def __init__(self, core_v1: Any, namespace: str, label_selector: str = ""):
        self.core_v1 = core_v1
        self.namespace = namespace
        self.label_selector = label_selector
        self.node: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.rebinds: dict[str, int] = {}
        self.deleted: set[str] = set()
        self.reconnects = 0
        self.error: Exception | None = None
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._stream: Any = None
        self._thread = threading.Thread(target=self._run, name=f"podwatch-{namespace}", daemon=True)

    def start(self, timeout: float = 60) -> "PodWatch":
        """Start, and return once the first list is in: what is bound already is settled."""
        self._thread.start()
        if not self._listed.wait(timeout):
            raise TimeoutError(f"the pod watch did not list within {timeout:.0f} s; is the API server overloaded?")
        if self.error is not None:
            raise self.error
        return self

    def close(self) -> None:
        """Stop, and close the watch at once: an open watch holds up the API server's shutdown."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.shutdown()
        self._thread.join(timeout=10)

    def _see(self, pod: dict, now: float, deleted: bool = False) -> None:
        name = pod["metadata"]["name"]
        node = node_of(pod)
        with self.lock:
            if deleted:
                self.deleted.add(name)
            previous = self.node.get(name, "")
            if node and node != previous:
                if previous:
                    self.rebinds[name] = self.rebinds.get(name, 0) + 1
                else:
                    self.bound_at.setdefault(name, now)
                self.node[name] = node
            elif name not in self.node:
                self.node[name] = ""
            self.changed.notify_all()

    def _list(self) -> str:
        token = None
        while True:
            page = json.loads(self.core_v1.list_namespaced_pod(
                self.namespace, label_selector=self.label_selector, limit=self.LIST_PAGE, _continue=token,
                _preload_content=False, _request_timeout=60).data)
            now = time.monotonic()
            for pod in page.get("items") or ():
                self._see(pod, now)
            token = page["metadata"].get("continue")
            if not token:
                return page["metadata"]["resourceVersion"]

    def _watch(self, resource_version: str) -> str:
        """Follow the watch until it ends; the resourceVersion to resume from ("" to relist)."""
        self._stream = self.core_v1.list_namespaced_pod(
            self.namespace, label_selector=self.label_selector, watch=True, resource_version=resource_version,
            timeout_seconds=60, allow_watch_bookmarks=True, _preload_content=False, _request_timeout=(10, 90))
        try:
            for line in self._stream:
                if self._stop.is_set():
                    return resource_version
                if not line.strip():
                    continue
                now = time.monotonic()
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return ""  # 410 Gone: the resourceVersion is too old; relist
                resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._see(obj, now, deleted=kind == "DELETED")
            return resource_version
        finally:
            self._stream.release_conn()
            self._stream = None

    def _run(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._list()
                    self._listed.set()
                resource_version = self._watch(resource_version)
            except Exception as err:  # noqa: BLE001 - the API server may be down on purpose; relist
                if not self._listed.is_set():
                    self.error = err
                    self._listed.set()
                    return
                resource_version = ""
                self.reconnects += 1
                self._stop.wait(0.2)

    def bound(self) -> int:
        with self.lock:
            return len(self.bound_at)

    def wait_changed(self, timeout: float) -> None:
        with self.changed:
            self.changed.wait(timeout)

    def wait_bound(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.bound_at) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 1.0))
        return True

    def first_bound_after(self, moment: float) -> float | None:
        with self.lock:
            later = [t for t in self.bound_at.values() if t > moment]
        return min(later) if later else None

    def double_binds(self) -> int:
        with self.lock:
            return sum(self.rebinds.values())
