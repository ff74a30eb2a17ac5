"""Small plugins and objects for testing the runtime apart from the real plugins.

Each fake plugin does one visible thing (rejects nodes by a label, scores by a label), so a
test reads as "this node is rejected because of that label".
"""

from __future__ import annotations

import itertools
from typing import Any

from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.types import PodInfo

_uid = itertools.count(1)


def pod_raw(name: str, namespace: str = "default", *, node: str = "", priority: int = 0, cpu: str = "",
            scheduler: str = "default-scheduler", labels: dict | None = None, gates: list[str] | None = None,
            uid: str | None = None, created: str = "2026-01-01T00:00:00Z", deleting: bool = False,
            phase: str = "Pending") -> dict:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": scheduler, "priority": priority}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{next(_uid)}",
                            "resourceVersion": "1", "creationTimestamp": created, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pod(name: str, **kwargs: Any) -> PodInfo:
    return PodInfo(pod_raw(name, **kwargs))


def node_raw(name: str, *, cpu: str = "4", pods: int = 110, labels: dict | None = None,
             taints: list[dict] | None = None, zone: str = "", rv: str = "1") -> dict:
    labels = dict(labels or {})
    labels.setdefault("kubernetes.io/hostname", name)
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "resourceVersion": rv},
            "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)},
                       "capacity": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)}}}


class FakeSort:
    name = "FakeSort"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def less(self, a: PodInfo, b: PodInfo) -> bool:
        return a.priority > b.priority or (a.priority == b.priority and a.timestamp < b.timestamp)


class FakeGates:
    name = "FakeGates"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if pod.scheduling_gates:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]


class FakeLabelFilter:
    """Rejects nodes labelled reject=yes (resolvably) and broken=yes (unresolvably)."""

    name = "FakeLabelFilter"

    def __init__(self, args: dict | None, handle: Any):
        from kubesched.framework.interface import PluginArgsError

        args = args or {}
        if "mode" in args and args["mode"] not in ("strict", "lenient"):
            raise PluginArgsError("mode", "must be one of strict, lenient")
        self.handle = handle

    def filter(self, state: Any, pod: PodInfo, node_info: Any) -> Status | None:
        if node_info.labels.get("broken") == "yes":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were broken")
        if node_info.labels.get("reject") == "yes":
            return Status(Code.UNSCHEDULABLE, "node(s) had reject label")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]


class FakeCpuFit:
    """Rejects nodes without room for the pod's cpu request."""

    name = "FakeCpuFit"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def filter(self, state: Any, pod: PodInfo, node_info: Any) -> Status | None:
        if node_info.requested.milli_cpu + pod.requests.milli_cpu > node_info.allocatable.milli_cpu:
            return Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return None

    def filter_nodes(self, state: Any, pod: PodInfo, nodes: list) -> list:
        return [self.filter(state, pod, n) for n in nodes]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                ClusterEvent(EventResource.POD, ActionType.DELETE)]


class FakeScore:
    """Scores a node by its integer label `score` (0..100)."""

    name = "FakeScore"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def score(self, state: Any, pod: PodInfo, node_info: Any) -> int:
        return int(node_info.labels.get("score", "0"))


class FakeLeastPods:
    """Prefers nodes with fewer pods; normalised to [0, 100]."""

    name = "FakeLeastPods"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def score(self, state: Any, pod: PodInfo, node_info: Any) -> int:
        return len(node_info.pods)

    def normalize_score(self, state: Any, pod: PodInfo, scores: list) -> None:
        top = max((s.score for s in scores), default=0)
        for s in scores:
            s.score = 100 - (s.score * 100 // top if top else 0)


class FakeBinder:
    """Binds through handle.client; records calls when the client is a FakeClient."""

    name = "FakeBinder"

    def __init__(self, args: dict | None, handle: Any):
        self.handle = handle

    def bind(self, state: Any, pod: PodInfo, node_name: str) -> Status | None:
        try:
            self.handle.client.bind(pod.namespace, pod.name, pod.uid, node_name)
        except Exception as err:  # noqa: BLE001
            return Status.as_error(err)
        return None


class FakePreemption:
    """PostFilter that nominates the node named by the pod's `nominate` label."""

    name = "FakePreemption"

    def __init__(self, args: dict | None, handle: Any):
        self.handle = handle

    def post_filter(self, state: Any, pod: PodInfo, statuses: dict) -> tuple[str | None, Status]:
        target = pod.labels.get("nominate")
        if target:
            return target, Status()
        n = self.handle.snapshot().num_nodes()
        # No candidate: clear any earlier nomination, as DefaultPreemption does.
        return "", Status(Code.UNSCHEDULABLE,
                          f"preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod.")


FAKE_REGISTRY = {cls.name: cls for cls in (FakeSort, FakeGates, FakeLabelFilter, FakeCpuFit, FakeScore,
                                           FakeLeastPods, FakeBinder, FakePreemption)}
FAKE_DEFAULT_PLUGINS = [("FakeGates", 0), ("FakeSort", 0), ("FakeLabelFilter", 0), ("FakeCpuFit", 0),
                        ("FakePreemption", 0), ("FakeScore", 2), ("FakeLeastPods", 1), ("FakeBinder", 0)]


class FakeClient:
    """Records the API calls the scheduler makes; bind fails for pods named in fail_binds."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str, str]] = []
        self.status_patches: list[tuple[str, str, dict]] = []
        self.events: list[dict] = []
        self.fail_binds: set[str] = set()

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        if name in self.fail_binds:
            raise RuntimeError(f"pods \"{name}\" binding refused")
        self.binds.append((f"{namespace}/{name}", node_name, uid))

    def patch_pod_status(self, namespace: str, name: str, patch: dict) -> dict:
        self.status_patches.append((f"{namespace}/{name}", name, patch))
        return {}

    def create_event(self, namespace: str, event: dict, api: str = "events.k8s.io/v1") -> dict:
        self.events.append(event)
        return event

    def patch_event(self, namespace: str, name: str, patch: dict) -> dict:
        self.events.append({"patch": patch, "name": name})
        return {}

    def list(self, path: str, params: dict | None = None, page_size: int = 0) -> dict:
        return {"items": []}
