"""Builders for pods and nodes, as upstream's st.MakePod/MakeNode, and the handle plugin tests give.

A pod gets one container per requests mapping, as st.MakePod().Req(...) does; a pod built
without requests has no containers at all, so no non-zero defaults apply to it.
"""

from __future__ import annotations

import itertools
from typing import Any

from kubesched_fakes import FakeClient

from kubesched.framework.handle import Handle
from kubesched.framework.interface import CycleState, NodeScore, Status, is_success
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo

_uids = itertools.count(1)


def make_pod(name: str = "pod", namespace: str = "default", *, uid: str | None = None,
             labels: dict | None = None, reqs: tuple | list = (), init_reqs: tuple | list = (),
             sidecar_reqs: tuple | list = (), node_name: str = "", priority: int | None = None,
             tolerations: list | None = None, node_selector: dict | None = None, affinity: dict | None = None,
             ports: list | None = None, tsc: list | None = None, overhead: dict | None = None,
             scheduling_gates: list | None = None, volumes: list | None = None, images: list | None = None,
             start_time: str | None = None, deleting: bool = False, conditions: list | None = None,
             owner: dict | None = None, preemption_policy: str | None = None, nominated: str = "",
             scheduler_name: str | None = None, pod_level: dict | None = None, spec: dict | None = None) -> PodInfo:
    containers: list[dict[str, Any]] = [{"name": f"c{i}", "resources": {"requests": dict(r)}} for i, r in enumerate(reqs)]
    for i, image in enumerate(images or ()):
        if i < len(containers):
            containers[i]["image"] = image
        else:
            containers.append({"name": f"img{i}", "image": image})
    if ports:
        if not containers:
            containers.append({"name": "ports"})
        containers[0]["ports"] = ports
    init = [{"name": f"i{i}", "resources": {"requests": dict(r)}} for i, r in enumerate(init_reqs)]
    init += [{"name": f"s{i}", "restartPolicy": "Always", "resources": {"requests": dict(r)}}
             for i, r in enumerate(sidecar_reqs)]
    pod_spec: dict[str, Any] = {"containers": containers}
    if init:
        pod_spec["initContainers"] = init
    for key, value in (("nodeName", node_name), ("priority", priority), ("tolerations", tolerations),
                       ("nodeSelector", node_selector), ("affinity", affinity),
                       ("topologySpreadConstraints", tsc), ("overhead", overhead),
                       ("schedulingGates", scheduling_gates), ("volumes", volumes),
                       ("preemptionPolicy", preemption_policy), ("schedulerName", scheduler_name)):
        if value:
            pod_spec[key] = value
    if pod_level:
        pod_spec["resources"] = {"requests": pod_level}
    pod_spec.update(spec or {})
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}-{next(_uids)}",
                            "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner:
        meta["ownerReferences"] = [dict(owner, controller=True)]
    status: dict[str, Any] = {}
    if start_time:
        status["startTime"] = start_time
    if conditions:
        status["conditions"] = conditions
    if nominated:
        status["nominatedNodeName"] = nominated
    return PodInfo({"metadata": meta, "spec": pod_spec, "status": status})


def make_node(name: str, *, cpu: str | None = None, memory: str | None = None, pods: int | None = None,
              labels: dict | None = None, taints: list | None = None, unschedulable: bool = False,
              images: list | None = None, extended: dict | None = None, ephemeral: str | None = None,
              declared_features: list | None = None, with_pods: tuple | list = ()) -> NodeInfo:
    allocatable: dict[str, Any] = {}
    for key, value in (("cpu", cpu), ("memory", memory), ("pods", pods), ("ephemeral-storage", ephemeral)):
        if value is not None:
            allocatable[key] = str(value)
    for key, value in (extended or {}).items():
        allocatable[key] = str(value)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": allocatable}
    if images:
        status["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    if declared_features:
        status["declaredFeatures"] = declared_features
    node = NodeInfo({"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec, "status": status})
    for pod in with_pods:
        node.add_pod(pod)
    return node


def place(node: NodeInfo, *pods: PodInfo) -> NodeInfo:
    for p in pods:
        p.node_name = node.name
        node.add_pod(p)
    return node


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def eventf(self, obj, type_, reason, action, message):
        self.events.append((obj["metadata"]["name"], type_, reason, action, message))


NAMESPACED = ("services", "replicationcontrollers", "replicasets", "statefulsets", "poddisruptionbudgets")


class FakeHandle(Handle):
    """The null Handle with what one plugin's test needs: a snapshot of the nodes, the fake
    client and event recorder, the objects (resource -> list, namespaced ones in "default"
    unless they say otherwise) in the informers as a watch would bring them, and the filter
    plugins given here behind the plugin runners preemption calls."""

    def __init__(self, nodes: list[NodeInfo] = (), *, pdbs: list | None = None, objects: dict | None = None,
                 filters: list | None = None):
        super().__init__(event_recorder=FakeRecorder(), parallelism=4, snapshot=Snapshot(list(nodes)))
        self.client = FakeClient(self.informers)
        for resource, items in {**(objects or {}), "poddisruptionbudgets": list(pdbs or ())}.items():
            for obj in items:
                if resource in NAMESPACED:
                    obj.setdefault("metadata", {}).setdefault("namespace", "default")
                self.informers.put(resource, obj)
        self.filters = list(filters or ())

    def add(self, resource: str, *objs: dict) -> "FakeHandle":
        for obj in objs:
            self.informers.put(resource, obj)
        return self

    def run_filter_plugins_with_nominated_pods(self, state, pod, node_info) -> Status | None:
        for plugin in self.filters:
            if plugin.name in state.skip_filter_plugins:
                continue
            status = plugin.filter(state, pod, node_info)
            if not is_success(status):
                return status
        return None

    def _extensions(self, state):
        for plugin in self.filters:
            if plugin.name not in state.skip_filter_plugins and hasattr(plugin, "pre_filter_extensions"):
                yield plugin.pre_filter_extensions()

    def run_pre_filter_extension_add_pod(self, state, pod, pod_to_add, node_info) -> Status | None:
        for ext in self._extensions(state):
            status = ext.add_pod(state, pod, pod_to_add, node_info)
            if not is_success(status):
                return status
        return None

    def run_pre_filter_extension_remove_pod(self, state, pod, pod_to_remove, node_info) -> Status | None:
        for ext in self._extensions(state):
            status = ext.remove_pod(state, pod, pod_to_remove, node_info)
            if not is_success(status):
                return status
        return None

    def run_pre_filters(self, state, pod) -> Status | None:
        """What the runtime's PreFilter loop does for these filters (skips, first rejection)."""
        nodes = self._snapshot.node_info_list
        for plugin in self.filters:
            if not hasattr(plugin, "pre_filter"):
                continue
            _unused, status = plugin.pre_filter(state, pod, nodes)
            if status is not None and status.is_skip():
                state.skip_filter_plugins.add(plugin.name)
            elif not is_success(status):
                return status
        return None


def run_filter(plugin, pod: PodInfo, node: NodeInfo, nodes: list[NodeInfo] | None = None,
               state: CycleState | None = None) -> Status | None:
    """PreFilter then Filter for one node, as the runtime runs them; filter_nodes must agree."""
    state = state or CycleState()
    if hasattr(plugin, "pre_filter"):
        _unused, status = plugin.pre_filter(state, pod, nodes if nodes is not None else [node])
        if status is not None and status.is_skip():
            return None
        if not is_success(status):
            return status
    status = plugin.filter(state, pod, node)
    if hasattr(plugin, "filter_nodes"):
        batch = plugin.filter_nodes(state, pod, [node])
        assert len(batch) == 1
        assert (batch[0] is None) == (status is None)
        if status is not None:
            assert (batch[0].code, batch[0].reasons) == (status.code, status.reasons)
    return status


def run_scores(plugin, pod: PodInfo, nodes: list[NodeInfo], state: CycleState | None = None) -> list[int] | None:
    """PreScore, Score and NormalizeScore over nodes; None when PreScore skips."""
    state = state or CycleState()
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, nodes)
        if status is not None and status.is_skip():
            return None
        assert is_success(status), status
    raw = [plugin.score(state, pod, n) for n in nodes]
    if hasattr(plugin, "score_nodes"):
        assert plugin.score_nodes(state, pod, nodes) == raw
    scores = [NodeScore(n.name, s) for n, s in zip(nodes, raw)]
    if hasattr(plugin, "normalize_score"):
        plugin.normalize_score(state, pod, scores)
    return [s.score for s in scores]


def code_and_reasons(status: Status | None) -> tuple | None:
    return None if status is None else (status.code, tuple(status.reasons))
