"""The cluster objects the affinity and spreading plugins read: namespaces, services,
workload controllers, as the scheduler's informers hold them (the plugins declare them in
INFORMERS)."""

from __future__ import annotations

from kubesched.api.selectors import Selector
from kubesched.backend.informers import InformerRegistry


class ClusterObjects:
    """Listers over the informers' stores (upstream's listers of the SharedInformerFactory)."""

    def __init__(self, informers: InformerRegistry):
        self._informers = informers

    def list(self, resource: str, namespace: str | None = None) -> list[dict]:
        return self._informers.list(resource, namespace)

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        return self._informers.get(resource, f"{namespace}/{name}")

    def namespace_labels(self, name: str) -> dict[str, str]:
        namespace = self._informers.get("namespaces", name)
        return dict(((namespace or {}).get("metadata") or {}).get("labels") or {})

    def namespaces_matching(self, selector: Selector) -> set[str]:
        return {(ns.get("metadata") or {}).get("name", "") for ns in self._informers.list("namespaces")
                if selector.matches((ns.get("metadata") or {}).get("labels") or {})}
