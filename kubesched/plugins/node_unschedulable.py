"""NodeUnschedulable: a cordoned node takes only pods tolerating its unschedulable taint."""

from __future__ import annotations

import operator

from kubesched.api.taint import NO_SCHEDULE, Taint, tolerations_tolerate_taint
from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import TOLERATIONS_KEY, Fragments, tolerations_signer
from kubesched.framework.types import NodeInfo, PodInfo

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE)


_UNSCHEDULABLE_OF = operator.attrgetter("unschedulable")


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def __init__(self, args: dict | None, handle: Handle):
        self._rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(TOLERATIONS_KEY, tolerations_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT,
                             hint=self.is_schedulable_after_node_change),
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATIONS)]

    @staticmethod
    def is_schedulable_after_node_change(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when a node is added schedulable or stops being unschedulable."""
        def cordoned(node: dict) -> bool:
            return bool((node.get("spec") or {}).get("unschedulable"))

        return new is not None and not cordoned(new) and (old is None or cordoned(old))

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        # Not upstream's PreFilter, an equivalent shortcut: a pod that tolerates the taint
        # passes every node, so its Filter need not run.
        if tolerations_tolerate_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
            return None, Status(Code.SKIP)
        return None, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if not node_info.unschedulable:
            return None
        if tolerations_tolerate_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
            return None
        return self._rejected

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        if tolerations_tolerate_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
            return [None] * len(nodes)
        flags = list(map(_UNSCHEDULABLE_OF, nodes))
        if not any(flags):  # hot path: C-level scans when no candidate is cordoned
            return [None] * len(nodes)
        rejected = self._rejected
        return [rejected if flag else None for flag in flags]
