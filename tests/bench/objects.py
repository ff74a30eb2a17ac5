"""What the benchmark makes on an API server, each object labelled kubesched.io/bench, and
how it is removed: node sets (kept from one workload to the next when equal), the objects a
workload needs before its pods and what the cluster makes from them, pods, priority classes
and the namespace. The API server itself is reached through lab.cluster.Cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Tuple

from lab.cluster import Cluster
from lab.fake_nodes import create_nodes

# Every object the benchmark creates carries this label, so cleanup finds exactly those.
BENCH_LABEL = "kubesched.io/bench"
BENCH_SELECTOR = {"labelSelector": f"{BENCH_LABEL}=true"}


@dataclass(frozen=True)
class NodeGroup:
    """Nodes that share one shape; a workload's node set is a tuple of groups."""

    count: int
    prefix: str = "bench-node-"
    cpu: str = "4"
    memory: str = "32Gi"  # scheduler_perf's node-default.yaml
    pods: int = 110
    zones: int = 3
    taints: tuple = ()
    labels: tuple = ()  # (key, value) pairs beyond the bench's own
    # A resource name with "{index}": each node gets one unit of its own (scheduler_perf's
    # node-with-extended-resource.yaml).
    resource_per_node: str = ""


class NodeSet:
    """The benchmark's fake nodes. Reused when the next workload asks for the same set,
    because creating 5,000 nodes is the slowest step of a run.

    Static on the benchmark's own lab (no heartbeat load, docs/performance.md); kwok nodes
    on a full lab (--kubeconfig), whose node lifecycle controller would mark static nodes
    unreachable after 50 s."""

    def __init__(self, cluster: Cluster, static: bool = False):
        self.cluster = cluster
        self.static = static
        self.current: tuple[NodeGroup, ...] | None = None

    def ensure(self, groups: tuple[NodeGroup, ...], progress: Callable[[str], None]) -> None:
        # On a shared API server a test may have wiped every node meanwhile: count them again.
        if groups == self.current and len(self.cluster.list_names("/api/v1/nodes", BENCH_SELECTOR)) == \
                sum(g.count for g in groups):
            return
        self.delete_all()
        total = sum(group.count for group in groups)
        start = time.monotonic()
        for group in groups:
            create_nodes(self.cluster.core, group.count, prefix=group.prefix, cpu=group.cpu,
                         memory=group.memory, pods=group.pods, zones=group.zones,
                         labels={BENCH_LABEL: "true", **dict(group.labels)},
                         taints=[dict(taint) for taint in group.taints] or None, workers=24, static=self.static,
                         extended_per_node=(lambda i, name=group.resource_per_node: {name.format(index=i): "1"})
                         if group.resource_per_node else None)
        self.cluster.lift_not_ready_taint(label_selector=BENCH_SELECTOR["labelSelector"])
        self.current = groups
        progress(f"created {total} nodes in {time.monotonic() - start:.1f} s")

    def delete_all(self) -> None:
        self.cluster.delete_all("/api/v1/nodes", BENCH_SELECTOR)
        self.current = None


# How long kwok may still act on pods that are gone. On a full lab kwok runs the pods bound
# to its nodes, and its delete of a pod it saw terminating is by name: one that lands after
# the next run created a pod of the same name deleted that new pod (seen: a whole run of 50
# pods deleted as they were created). Waiting out kwok's queue after the old pods are gone
# keeps a run's pods its own.
KWOK_SETTLE_S = 3.0


def delete_pods(cluster: Cluster, namespace: str) -> None:
    """Delete every pod of the namespace, wait until none is left and kwok has settled."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    if cluster.delete_all(path):
        _wait_gone(cluster, path)
        time.sleep(KWOK_SETTLE_S)
    # Events pile up at one or two per pod; dropping them keeps etcd small between runs.
    cluster.delete_all(f"/api/v1/namespaces/{namespace}/events")


def ensure_namespace(cluster: Cluster, namespace: str) -> None:
    cluster.ensure_namespace(namespace, {BENCH_LABEL: "true"})


def ensure_priority_class(cluster: Cluster, name: str, value: int) -> None:
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {BENCH_LABEL: "true"}}, "value": value,
            "description": "kubesched benchmark"}
    cluster.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body, ok=(201, 409))


# A workload's objects: [(API collection path, bodies)], in the order they are made.
ObjectGroups = List[Tuple[str, List[dict]]]


def create_objects(cluster: Cluster, groups: ObjectGroups) -> int:
    """What a workload's pods need, each labelled, in order (a claim's volume before the
    claim, a class before its slices); how many."""
    for path, bodies in groups:
        for body in bodies:
            body.setdefault("metadata", {}).setdefault("labels", {})[BENCH_LABEL] = "true"
        cluster.create_all(path, bodies)
    return sum(len(bodies) for _path, bodies in groups)


def remove_objects(cluster: Cluster, groups: ObjectGroups, made_for_pods: list[str] = ()) -> None:
    """The counterpart of create_objects: first what the cluster made for the pods from those
    objects (made_for_pods, collection paths emptied whole: the claims of a
    ResourceClaimTemplate), then the labelled objects of each group, in reverse order. The
    API server gives claims and volumes protection finalizers that only
    kube-controller-manager lifts, and only once nothing uses them; the benchmark's objects
    are fakes, so their finalizers are dropped and each deletion waits until it is done."""
    for path, selector in [(path, None) for path in made_for_pods] + [(path, BENCH_SELECTOR)
                                                                      for path, _bodies in reversed(groups)]:
        names = cluster.list_names(path, selector)
        cluster.fan_out(lambda name, path=path: cluster.request(
            "PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}}, ok=(200, 404)), names)
        cluster.delete_all(path, selector)
        _wait_gone(cluster, path, selector)


def remove_cluster_objects(cluster: Cluster, namespace: str, removals: list[tuple[ObjectGroups, list[str]]]) -> None:
    """Everything the benchmark created: pods, events, what the workloads' pods needed
    (removals: each workload's objects and what the cluster made from them), nodes, priority
    classes, the namespace."""
    delete_pods(cluster, namespace)
    for groups, made_for_pods in removals:
        remove_objects(cluster, groups, made_for_pods)
    cluster.delete_all("/api/v1/nodes", BENCH_SELECTOR)
    cluster.delete_all("/apis/scheduling.k8s.io/v1/priorityclasses", BENCH_SELECTOR)
    # The namespace controller finalizes it; a bench started right after must not recreate it
    # while that controller is still emptying the old one.
    cluster.delete_namespace(namespace, wait=True)


def _wait_gone(cluster: Cluster, path: str, selector: dict | None = None) -> None:
    deadline = time.monotonic() + 60
    while cluster.list_names(path, selector):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: bench objects still present 60 s after their deletion")
        time.sleep(0.2)
