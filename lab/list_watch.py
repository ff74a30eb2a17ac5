"""List, then watch, one collection of any resource for as long as a harness runs.

The soak follows pods, nodes, claims, volumes and Leases this way while the API server and
etcd restart under it: a lost connection resumes the watch from the last resourceVersion, a
410 Gone (or an error before any event) lists again. Handlers run on the watch's own
thread in the order the API server sent the events; a relist hands over the whole list, so
a handler can tell what changed while it was away.

It talks through anything with ``list_all(path, query) -> (items, resourceVersion)`` and
``stream(path, query)`` (a response that yields lines): ``lab.cluster.Cluster`` (raw
JSON over a pooled connection, the client every harness that moves thousands of objects uses),
or lab.pod_watch's adapter over kubernetes' CoreV1Api.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

ListHandler = Callable[[list[dict], str], None]      # (items, resourceVersion)
EventHandler = Callable[[str, dict], None]           # (ADDED | MODIFIED | DELETED, object)


class ListWatch:
    def __init__(self, cluster: Any, path: str, on_list: ListHandler, on_event: EventHandler,
                 query: dict | None = None, name: str = "", timeout_seconds: int = 60):
        self.cluster = cluster
        self.path = path
        self.query = dict(query or {})
        self.on_list = on_list
        self.on_event = on_event
        self.name = name or path
        self.timeout_seconds = timeout_seconds
        self.relists = 0
        self.reconnects = 0
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._stream: Any = None
        self._thread = threading.Thread(target=self._run, name=f"list-watch-{self.name}", daemon=True)

    def start(self, timeout: float = 120) -> "ListWatch":
        """Start, and return once the first list has been handed over."""
        self._thread.start()
        if not self._listed.wait(timeout):
            raise TimeoutError(f"{self.path}: the first list did not arrive within {timeout:.0f} s")
        if self.error is not None:
            raise self.error
        return self

    def close(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()
            except Exception:  # noqa: BLE001 - closing a stream that is already gone
                pass
        self._thread.join(10)

    def _list(self) -> str:
        items, resource_version = self.cluster.list_all(self.path, self.query)
        self.on_list(items, resource_version)
        self.relists += 1
        return resource_version

    def _watch(self, resource_version: str) -> str:
        """Follow one watch until it ends: the resourceVersion to resume from, "" to list again."""
        query = dict(self.query, watch="1", resourceVersion=resource_version, allowWatchBookmarks="true",
                     timeoutSeconds=str(self.timeout_seconds))
        self._stream = self.cluster.stream(self.path, query)
        try:
            for line in self._stream:
                if self._stop.is_set():
                    return resource_version
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return ""  # 410 Gone: too old a resourceVersion
                resource_version = (obj.get("metadata") or {}).get("resourceVersion", resource_version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.on_event(kind, obj)
            return resource_version
        finally:
            stream, self._stream = self._stream, None
            stream.release_conn()

    def _run(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._list()
                    self._listed.set()
                resource_version = self._watch(resource_version)
            except Exception as err:  # noqa: BLE001 - whatever a client raises while the API server is away
                # The API server is down or restarting (on purpose, in a soak): list again once it
                # answers, since what happened meanwhile may be past its watch window.
                if not self._listed.is_set():
                    self.error = err
                    self._listed.set()
                    return
                resource_version = ""
                self.reconnects += 1
                self._stop.wait(0.5)
