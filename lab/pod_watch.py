"""The pods of a namespace followed for every harness that times or checks bindings: the
benchmark (when each measured pod was first seen bound) and the reliability suites (every
nodeName change, across API server restarts and 410 Gone).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from lab.list_watch import ListWatch


def node_of(pod: dict | None) -> str:
    return ((pod or {}).get("spec") or {}).get("nodeName") or ""


class _NamespacedPods:
    """ListWatch's list_all and stream over kubernetes' CoreV1Api, for one namespace's pods."""

    LIST_PAGE = 1000

    def __init__(self, core_v1: Any, namespace: str):
        self.core_v1 = core_v1
        self.namespace = namespace

    def list_all(self, _path: str, query: dict) -> tuple[list[dict], str]:
        items: list[dict] = []
        token = None
        while True:
            page = json.loads(self.core_v1.list_namespaced_pod(
                self.namespace, label_selector=query.get("labelSelector", ""), limit=self.LIST_PAGE, _continue=token,
                _preload_content=False, _request_timeout=60).data)
            items.extend(page.get("items") or ())
            token = page["metadata"].get("continue")
            if not token:
                return items, page["metadata"]["resourceVersion"]

    def stream(self, _path: str, query: dict) -> Any:
        return self.core_v1.list_namespaced_pod(
            self.namespace, label_selector=query.get("labelSelector", ""), watch=True,
            resource_version=query["resourceVersion"], timeout_seconds=int(query["timeoutSeconds"]),
            allow_watch_bookmarks=True, _preload_content=False, _request_timeout=(10, 90))


class PodWatch:
    """Follows spec.nodeName of every pod in a namespace (optionally a label selection),
    relisting after a lost watch or a 410 (lab.list_watch.ListWatch), so a change made while
    disconnected still counts.

    ``bound_at[name]`` is the monotonic time the binding was first seen: taken when the
    watch event arrives, the earliest moment a client can know. ``rebinds[name]`` counts
    nodeName changes after the first (a double bind).
    """

    def __init__(self, core_v1: Any, namespace: str, label_selector: str = ""):
        self.namespace = namespace
        self.node: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.rebinds: dict[str, int] = {}
        self.deleted: set[str] = set()
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self._list_watch = ListWatch(_NamespacedPods(core_v1, namespace), f"pods in {namespace}", self._listed,
                                     self._event, query={"labelSelector": label_selector} if label_selector else {},
                                     name=f"podwatch-{namespace}")

    @property
    def reconnects(self) -> int:
        return self._list_watch.reconnects

    def start(self, timeout: float = 60) -> "PodWatch":
        """Start, and return once the first list is in: what is bound already is settled."""
        try:
            self._list_watch.start(timeout)
        except TimeoutError:
            raise TimeoutError(f"the pod watch did not list within {timeout:.0f} s; is the API server "
                               "overloaded?") from None
        return self

    def close(self) -> None:
        """Stop, and close the watch at once: an open watch holds up the API server's shutdown."""
        self._list_watch.close()

    def _listed(self, items: list[dict], _resource_version: str) -> None:
        now = time.monotonic()
        for pod in items:
            self._see(pod, now)

    def _event(self, kind: str, pod: dict) -> None:
        self._see(pod, time.monotonic(), deleted=kind == "DELETED")

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
