"""The cluster objects the affinity and spreading plugins read: namespaces, services,
workload controllers."""

from __future__ import annotations

import time
from typing import Any, Callable

from kubesched.plugins.helper.selectors import Selector

_LIST_PATHS = {
    "namespaces": "/api/v1/namespaces",
    "services": "/api/v1/namespaces/{ns}/services",
    "replicationcontrollers": "/api/v1/namespaces/{ns}/replicationcontrollers",
    "replicasets": "/apis/apps/v1/namespaces/{ns}/replicasets",
    "statefulsets": "/apis/apps/v1/namespaces/{ns}/statefulsets",
}


class ClusterObjects:
    """Raw namespaces, services and controllers, from the runtime's informer cache.

    The runtime provides ``handle.list_objects(resource, namespace=None) -> list[dict]``
    from its caches. A handle without it is served by ``handle.client.list`` with a short
    time-to-live cache, correct but slower.
    """

    TTL_SECONDS = 2.0

    def __init__(self, handle: Any):
        self._handle = handle
        self._cache: dict[tuple[str, str | None], tuple[float, list[dict]]] = {}

    def list(self, resource: str, namespace: str | None = None) -> list[dict]:
        lister: Callable | None = getattr(self._handle, "list_objects", None)
        if lister is not None:
            return lister(resource, namespace)
        key = (resource, namespace)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.TTL_SECONDS:
            return hit[1]
        items = (self._handle.client.list(_LIST_PATHS[resource].format(ns=namespace)) or {}).get("items") or []
        self._cache[key] = (now, items)
        return items

    def namespace_labels(self, name: str) -> dict[str, str]:
        for ns in self.list("namespaces"):
            if (ns.get("metadata") or {}).get("name") == name:
                return dict((ns.get("metadata") or {}).get("labels") or {})
        return {}

    def namespaces_matching(self, selector: Selector) -> set[str]:
        return {(ns.get("metadata") or {}).get("name", "") for ns in self.list("namespaces")
                if selector.matches((ns.get("metadata") or {}).get("labels") or {})}

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        for obj in self.list(resource, namespace):
            if (obj.get("metadata") or {}).get("name") == name:
                return obj
        return None
