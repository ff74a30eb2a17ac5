"""TaintToleration: NoSchedule/NoExecute taints filter; PreferNoSchedule taints score.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate; 1.37
words this "node(s) had untolerated taint(s)" without naming the taint. Score counts the
PreferNoSchedule taints the pod does not tolerate; normalisation reverses it, so fewer
intolerable taints score higher.
"""

from __future__ import annotations

import operator

from kubesched.api.taint import DO_NOT_SCHEDULE_EFFECTS, PREFER_NO_SCHEDULE, Taint, tolerations_tolerate_taint
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    NodeScore,
    Status,
)
from kubesched.framework.signers import TOLERATIONS_KEY, Fragments, tolerations_signer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.normalize_score import default_normalize_score, default_normalize_values

ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
PRE_SCORE_STATE_KEY = "PreScoreTaintToleration"


_TAINTS_OF = operator.attrgetter("taints")


class TaintToleration:
    name = "TaintToleration"

    def __init__(self, args: dict | None, handle: Handle):
        self._rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNTOLERATED, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(TOLERATIONS_KEY, tolerations_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT,
                             hint=self.is_schedulable_after_node_change),
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATIONS)]

    @staticmethod
    def is_schedulable_after_node_change(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue only when the node's NoSchedule/NoExecute taints were not all tolerated and now are."""
        def untolerated(node: dict) -> bool:
            return any(taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerations_tolerate_taint(pod.tolerations, taint)
                       for taint in map(Taint.from_dict, (node.get("spec") or {}).get("taints") or ()))

        return new is not None and (old is None or untolerated(old)) and not untolerated(new)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        for taint in node_info.taints:
            if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerations_tolerate_taint(pod.tolerations, taint):
                return self._rejected
        return None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        # Hot path: most nodes have no taints; a taint seen once is decided once per pod.
        if not any(map(_TAINTS_OF, nodes)):  # hot path: a C-level scan when no candidate is tainted
            return [None] * len(nodes)
        tolerations, rejected = pod.tolerations, self._rejected
        decided: dict = {}
        out: list[Status | None] = []
        for node in nodes:
            result = None
            for taint in node.taints:
                if taint.effect not in DO_NOT_SCHEDULE_EFFECTS:
                    continue
                key = (taint.key, taint.value, taint.effect)
                tolerated = decided.get(key)
                if tolerated is None:
                    tolerated = decided[key] = tolerations_tolerate_taint(tolerations, taint)
                if not tolerated:
                    result = rejected
                    break
            out.append(result)
        return out

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)])
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        if not node_info.taints:  # hot path: most nodes have no taints
            return 0
        tolerations = state.read(PRE_SCORE_STATE_KEY)
        return sum(1 for taint in node_info.taints
                   if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, taint))

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        if not any(map(_TAINTS_OF, nodes)):  # hot path: a C-level scan when no candidate is tainted
            return [0] * len(nodes)
        tolerations = state.read(PRE_SCORE_STATE_KEY)
        out = []
        for node in nodes:  # hot path: untainted nodes cost one truth test
            count = 0
            if node.taints:
                for taint in node.taints:
                    if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, taint):
                        count += 1
            out.append(count)
        return out

    def normalize_score(self, state, pod: PodInfo, scores: list[NodeScore]) -> None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)

    def normalize_scores(self, state, pod: PodInfo, scores: list[int]) -> list[int]:
        """normalize_score on plain ints, for the runtime's batch path."""
        return default_normalize_values(MAX_NODE_SCORE, True, scores)
