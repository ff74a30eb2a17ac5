"""The reliability suites' pods: small, with no grace period, labelled app=reliability."""

from __future__ import annotations

from lab.cluster import Cluster

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# The suites' namespaces carry it, so that one left behind by a killed run is found.
RELIABILITY_LABELS = {"kubesched.io/reliability": "true"}


def pod_manifest(name: str, scheduler_name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "reliability"}},
            "spec": {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": PAUSE_IMAGE,
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                     **spec}}


def create_pods(cluster: Cluster, namespace: str, count: int, scheduler_name: str, prefix: str = "p",
                **spec) -> list[str]:
    """count pods named prefix-00000.. for scheduler_name; their names."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    cluster.create_all(f"/api/v1/namespaces/{namespace}/pods", [pod_manifest(n, scheduler_name, **spec) for n in names],
                       workers=16)
    return names
