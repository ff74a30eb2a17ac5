"""NodeAffinity: spec.nodeSelector and required node affinity filter; preferred terms score.

The addedAffinity arg applies scheduler-enforced affinity to every pod of the profile.
"""

from __future__ import annotations

import operator

from kubesched.api.node_affinity import (
    OBJECT_NAME_FIELD,
    NodeSelector,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
)
from kubesched.api.selectors import SelectorError
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    NodeScore,
    PluginArgsError,
    PreFilterResult,
    Status,
)
from kubesched.framework.signers import NODE_AFFINITY_KEY, NODE_SELECTOR_KEY, Fragments, node_affinity_signer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, dict_arg
from kubesched.plugins.helper.normalize_score import default_normalize_score, default_normalize_values

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
PRE_FILTER_STATE_KEY = "PreFilterNodeAffinity"
PRE_SCORE_STATE_KEY = "PreScoreNodeAffinity"


def _preferred_terms(pod: PodInfo) -> PreferredSchedulingTerms | None:
    terms = (pod.affinity.get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution")
    if terms is None:
        return None
    cached = pod.plugin_cache.get("PreferredSchedulingTerms")
    if cached is None:
        cached = pod.plugin_cache["PreferredSchedulingTerms"] = PreferredSchedulingTerms(terms)
    return cached


_LABELS_OF = operator.attrgetter("labels")


class NodeAffinity:
    name = "NodeAffinity"

    def __init__(self, args: dict | None, handle: Handle):
        args = args_dict(args, self.name)
        check_known_fields(args, ("addedAffinity",))
        self.added_node_selector: NodeSelector | None = None
        self.added_pref_sched_terms: PreferredSchedulingTerms | None = None
        added = dict_arg(args, "addedAffinity")
        if added:
            check_known_fields(added, ("requiredDuringSchedulingIgnoredDuringExecution",
                                       "preferredDuringSchedulingIgnoredDuringExecution"), "addedAffinity.")
            required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
            if required is not None:
                path = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                self.added_node_selector = NodeSelector(required, path)
                errors = self.added_node_selector.errors()
                if errors:
                    field, _unused, message = errors[0].partition(": ")
                    raise PluginArgsError(field, message)
            preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution")
            if preferred:
                path = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                try:
                    self.added_pref_sched_terms = PreferredSchedulingTerms(preferred, path)
                except SelectorError as err:
                    field, _unused, message = str(err).partition(": ")
                    raise PluginArgsError(field, message) from err
        self._rejected_pod = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD, plugin=self.name)
        self._rejected_enforced = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(NODE_AFFINITY_KEY, node_affinity_signer(pod)),
                (NODE_SELECTOR_KEY, (pod.raw.get("spec") or {}).get("nodeSelector"))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                             hint=self.is_schedulable_after_node_change)]

    def is_schedulable_after_node_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when the node now matches the pod's required affinity and did not before."""
        if new is None:
            return False
        modified = NodeInfo(new)
        if self.added_node_selector is not None and not self.added_node_selector.matches(modified):
            return False
        required = RequiredNodeAffinity.of_pod(pod)
        if not required.matches(modified):
            return False
        return old is None or not required.matches(NodeInfo(old))

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        required = (pod.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None and self.added_node_selector is None and not pod.node_selector:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, RequiredNodeAffinity.of_pod(pod))
        terms = (required or {}).get("nodeSelectorTerms") or ()
        if not terms:
            return None, None
        # Terms that name nodes by metadata.name restrict the nodes to evaluate.
        node_names: set[str] | None = None
        for term in terms:
            term_names: set[str] | None = None
            for req in term.get("matchFields") or ():
                if req.get("key") == OBJECT_NAME_FIELD and req.get("operator") == "In":
                    values = set(req.get("values") or ())
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, None
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT, plugin=self.name)
        return PreFilterResult(node_names), None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if self.added_node_selector is not None and not self.added_node_selector.matches(node_info):
            return self._rejected_enforced
        required = state.get(PRE_FILTER_STATE_KEY) or RequiredNodeAffinity.of_pod(pod)
        if not required.matches(node_info):
            return self._rejected_pod
        return None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        added, rejected_enforced, rejected_pod = self.added_node_selector, self._rejected_enforced, self._rejected_pod
        required = state.get(PRE_FILTER_STATE_KEY) or RequiredNodeAffinity.of_pod(pod)
        labels_match = required.labels_matcher() if added is None else None
        if labels_match is not None:  # hot path: one call per node, iterated in C
            fits = list(map(labels_match, map(_LABELS_OF, nodes)))
            return [None if fit else rejected_pod for fit in fits]
        matches = required.matches
        out: list[Status | None] = []
        for node in nodes:  # hot path
            if added is not None and not added.matches(node):
                out.append(rejected_enforced)
            elif not matches(node):
                out.append(rejected_pod)
            else:
                out.append(None)
        return out

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        try:
            preferred = _preferred_terms(pod)
        except SelectorError as err:
            return Status.as_error(err, plugin=self.name)
        if preferred is None and self.added_pref_sched_terms is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, preferred)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        count = 0
        if self.added_pref_sched_terms is not None:
            count += self.added_pref_sched_terms.score(node_info)
        preferred = state.get(PRE_SCORE_STATE_KEY)
        if preferred is not None:
            count += preferred.score(node_info)
        return count

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        return [self.score(state, pod, n) for n in nodes]

    def normalize_score(self, state, pod: PodInfo, scores: list[NodeScore]) -> None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)

    def normalize_scores(self, state, pod: PodInfo, scores: list[int]) -> list[int]:
        """normalize_score on plain ints, for the runtime's batch path."""
        return default_normalize_values(MAX_NODE_SCORE, False, scores)
