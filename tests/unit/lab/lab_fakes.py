"""The lab tests' stand-in for the kubernetes client's CoreV1Api: the list calls the demo's
tables make, over objects given per namespace (pods, events, claims) or cluster-wide (volumes)."""

from __future__ import annotations

from types import SimpleNamespace


class FakeCoreV1:
    def __init__(self, pods: dict | None = None, events: dict | None = None, claims: dict | None = None,
                 volumes: list | None = None):
        self.pods, self.events, self.claims = pods or {}, events or {}, claims or {}
        self.volumes = volumes or []
        self.api_client = SimpleNamespace(sanitize_for_serialization=lambda volume: volume.raw)

    def list_namespaced_pod(self, namespace):
        return SimpleNamespace(items=self.pods.get(namespace, []))

    def list_namespaced_event(self, namespace, field_selector=None):
        return SimpleNamespace(items=self.events.get(namespace, []))

    def list_namespaced_persistent_volume_claim(self, namespace):
        return SimpleNamespace(items=self.claims.get(namespace, []))

    def list_persistent_volume(self):
        return SimpleNamespace(items=self.volumes)
