"""NodeName: a pod with spec.nodeName fits only the node of that name."""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PreFilterResult,
    Status,
)
from kubesched.framework.signers import NODE_NAME_KEY, Fragments
from kubesched.framework.types import NodeInfo, PodInfo

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"

    def __init__(self, args: dict | None, handle: Handle):
        self._rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(NODE_NAME_KEY, (pod.raw.get("spec") or {}).get("nodeName") or "")]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD)]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        if pod.node_name:
            return PreFilterResult({pod.node_name}), None
        # Upstream still runs Filter here; it is a no-op for pods without nodeName.
        return None, Status(Code.SKIP)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if pod.node_name and pod.node_name != node_info.name:
            return self._rejected
        return None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        wanted, rejected = pod.node_name, self._rejected
        if not wanted:
            return [None] * len(nodes)
        return [None if n.name == wanted else rejected for n in nodes]
