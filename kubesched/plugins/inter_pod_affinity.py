"""InterPodAffinity: pod affinity and anti-affinity, the pod's own and that of pods in place.

Filter: the pod's required affinity terms need a matching pod in the node's topology domain
(or, for the first pod of a group, the pod itself to match); its required anti-affinity
terms must find no matching pod there; and no pod already placed may have a required
anti-affinity term that the pod matches within that domain. Score: preferred terms of the
pod and of existing pods add (affinity) or subtract (anti-affinity) their weight per
domain, existing pods' required affinity counting hardPodAffinityWeight; normalised to
[0, 100] between the lowest and highest node.
"""

from __future__ import annotations

from kubesched.api.selectors import NOTHING, Selector, SelectorError, label_selector
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    NodeScore,
    PluginArgsError,
    Status,
)
from kubesched.framework.signers import LABELS_KEY, Fragments
from kubesched.framework.snapshot import NodeMemos, Snapshot
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, int_arg
from kubesched.plugins.helper.cluster_objects import ClusterObjects

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
PRE_FILTER_STATE_KEY = "PreFilterInterPodAffinity"
PRE_SCORE_STATE_KEY = "PreScoreInterPodAffinity"
_CACHE_KEY = "InterPodAffinityTerms"
# Pod shapes (namespace, labels, namespace labels) whose per-node existing anti-affinity
# domains are remembered between cycles (InterPodAffinity._existing_memos).
EXISTING_MEMO_SHAPES = 8


class AffinityTerm:
    """A parsed PodAffinityTerm (fwk.AffinityTerm)."""

    __slots__ = ("namespaces", "selector", "topology_key", "namespace_selector")

    def __init__(self, namespaces: frozenset[str], selector: Selector, topology_key: str, namespace_selector: Selector):
        self.namespaces = namespaces
        self.selector = selector
        self.topology_key = topology_key
        self.namespace_selector = namespace_selector

    @classmethod
    def parse(cls, pod_namespace: str, term: dict, path: str) -> "AffinityTerm":
        selector = label_selector(term.get("labelSelector"), f"{path}.labelSelector")
        ns_selector_raw = term.get("namespaceSelector")
        namespaces = term.get("namespaces") or ()
        if not namespaces and ns_selector_raw is None:
            namespaces = (pod_namespace,)
        return cls(frozenset(namespaces), selector, term.get("topologyKey") or "",
                   label_selector(ns_selector_raw, f"{path}.namespaceSelector"))

    def matches(self, pod: PodInfo, ns_labels: dict[str, str] | None) -> bool:  # hot path
        if pod.namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(pod.labels)
        return False


class PodTerms:
    """A pod's parsed affinity terms; parse_error is set when a selector is invalid."""

    __slots__ = ("required_affinity", "required_anti_affinity", "preferred_affinity",
                 "preferred_anti_affinity", "parse_error")

    def __init__(self, pod: PodInfo):
        self.required_affinity: list[AffinityTerm] = []
        self.required_anti_affinity: list[AffinityTerm] = []
        self.preferred_affinity: list[tuple[AffinityTerm, int]] = []
        self.preferred_anti_affinity: list[tuple[AffinityTerm, int]] = []
        self.parse_error: str | None = None
        affinity = pod.affinity.get("podAffinity") or {}
        anti = pod.affinity.get("podAntiAffinity") or {}
        ns = pod.namespace
        required_key = "requiredDuringSchedulingIgnoredDuringExecution"
        preferred_key = "preferredDuringSchedulingIgnoredDuringExecution"
        try:
            self.required_affinity = [AffinityTerm.parse(ns, t, f"requiredAffinityTerms[{i}]")
                                      for i, t in enumerate(affinity.get(required_key) or ())]
            self.required_anti_affinity = [AffinityTerm.parse(ns, t, f"requiredAntiAffinityTerms[{i}]")
                                           for i, t in enumerate(anti.get(required_key) or ())]
            self.preferred_affinity = [
                (AffinityTerm.parse(ns, t.get("podAffinityTerm") or {}, f"preferredAffinityTerms[{i}]"),
                 t.get("weight") or 0) for i, t in enumerate(affinity.get(preferred_key) or ())]
            self.preferred_anti_affinity = [
                (AffinityTerm.parse(ns, t.get("podAffinityTerm") or {}, f"preferredAntiAffinityTerms[{i}]"),
                 t.get("weight") or 0) for i, t in enumerate(anti.get(preferred_key) or ())]
        except SelectorError as err:
            self.parse_error = str(err)

    @staticmethod
    def of(pod: PodInfo) -> "PodTerms":
        terms = pod.plugin_cache.get(_CACHE_KEY)
        if terms is None:
            terms = pod.plugin_cache[_CACHE_KEY] = PodTerms(pod)
        return terms


def pod_matches_all_terms(terms: list[AffinityTerm], pod: PodInfo) -> bool:
    if not terms:
        return False
    for t in terms:
        if not t.matches(pod, None):
            return False
    return True


def pod_matches_any_term(terms: list[AffinityTerm], pod: PodInfo) -> bool:
    for t in terms:
        if t.matches(pod, None):
            return True
    return False


def _add(counts: dict[tuple[str, str], int], node: NodeInfo, topology_key: str, value: int) -> None:
    topology_value = node.labels.get(topology_key)
    if topology_value is not None:
        pair = (topology_key, topology_value)
        total = counts.get(pair, 0) + value
        if total:
            counts[pair] = total
        else:
            counts.pop(pair, None)


class PreFilterState:
    __slots__ = ("existing_anti_affinity_counts", "affinity_counts", "anti_affinity_counts", "pod",
                 "namespace_labels", "affinity_terms", "anti_affinity_terms")

    def __init__(self, pod: PodInfo, namespace_labels: dict[str, str], affinity_terms: list[AffinityTerm],
                 anti_affinity_terms: list[AffinityTerm]):
        self.pod = pod
        self.namespace_labels = namespace_labels
        self.affinity_terms = affinity_terms
        self.anti_affinity_terms = anti_affinity_terms
        self.existing_anti_affinity_counts: dict[tuple[str, str], int] = {}
        self.affinity_counts: dict[tuple[str, str], int] = {}
        self.anti_affinity_counts: dict[tuple[str, str], int] = {}

    def clone(self) -> "PreFilterState":
        c = PreFilterState(self.pod, self.namespace_labels, self.affinity_terms, self.anti_affinity_terms)
        c.existing_anti_affinity_counts = dict(self.existing_anti_affinity_counts)
        c.affinity_counts = dict(self.affinity_counts)
        c.anti_affinity_counts = dict(self.anti_affinity_counts)
        return c

    def update_with_pod(self, other: PodInfo, node: NodeInfo, multiplier: int) -> None:
        for t in PodTerms.of(other).required_anti_affinity:
            if t.matches(self.pod, self.namespace_labels):
                _add(self.existing_anti_affinity_counts, node, t.topology_key, multiplier)
        if pod_matches_all_terms(self.affinity_terms, other):
            for t in self.affinity_terms:
                _add(self.affinity_counts, node, t.topology_key, multiplier)
        for t in self.anti_affinity_terms:
            if t.matches(other, None):
                _add(self.anti_affinity_counts, node, t.topology_key, multiplier)


class InterPodAffinity:
    name = "InterPodAffinity"
    INFORMERS = ("namespaces",)  # namespaceSelector

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"))
        self.hard_pod_affinity_weight = int_arg(args, "hardPodAffinityWeight", 1)
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise PluginArgsError("hardPodAffinityWeight",
                                  f"Invalid value: {self.hard_pod_affinity_weight}: not in valid range [0, 100]")
        ignore = args.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ignore, bool):
            raise PluginArgsError("ignorePreferredTermsOfExistingPods", f"must be true or false, got {ignore!r}")
        self.ignore_preferred_terms_of_existing_pods = ignore
        self.objects = ClusterObjects(handle.informers)
        # shape -> node name -> (the generation of the node's NodeInfo, the domains its pods'
        # required anti-affinity terms count against a pod of that shape). Every change to a
        # node's pods or labels takes a new generation, so an entry holds while the node is as
        # it was; the unchanged nodes then cost a lookup, not a match per pod.
        self._existing_memos = NodeMemos(EXISTING_MEMO_SHAPES)
        self._affinity_rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH,
                                         plugin=self.name)
        self._anti_affinity_rejected = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
                                              plugin=self.name)
        self._existing_rejected = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
                                         plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        """A pod with affinity terms depends on the pods already placed; existing pods' terms may
        match this pod's labels."""
        affinity = (pod.raw.get("spec") or {}).get("affinity") or {}
        if affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None:
            return None
        if self.ignore_preferred_terms_of_existing_pods:
            return []
        return [(LABELS_KEY, dict(sorted(pod.labels.items())))]

    def events_to_register(self) -> list[ClusterEvent]:
        # The pod's own label change always queues: a placed pod's anti-affinity may have
        # matched its old labels only.
        return [ClusterEvent(EventResource.ASSIGNED_POD,
                             ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                             hint=self.is_schedulable_after_assigned_pod_change),
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL),
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                             hint=self.is_schedulable_after_node_change)]

    @staticmethod
    def is_schedulable_after_assigned_pod_change(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when a placed pod now matches all of the pod's affinity terms (added, or
        relabelled to match), no longer matches one of its anti-affinity terms (relabelled),
        or, deleted, matched one of them or had an anti-affinity term the pod matches."""
        original = None if old is None else PodInfo(old)
        modified = None if new is None else PodInfo(new)
        # A bind or a nomination arrives as an add or a delete, never as this update.
        if any(p is not None and not p.node_name and not p.nominated_node_name for p in (original, modified)):
            return False
        terms = PodTerms.of(pod)
        if terms.parse_error:
            return True
        if original is not None and modified is not None:
            if not pod_matches_all_terms(terms.required_affinity, original) and \
                    pod_matches_all_terms(terms.required_affinity, modified):
                return True
            return pod_matches_any_term(terms.required_anti_affinity, original) and \
                not pod_matches_any_term(terms.required_anti_affinity, modified)
        if modified is not None:
            return pod_matches_all_terms(terms.required_affinity, modified)
        if original is None:
            return True
        if pod_matches_any_term(terms.required_anti_affinity, original):
            return True
        deleted_terms = PodTerms.of(original)
        return bool(deleted_terms.parse_error) or pod_matches_any_term(deleted_terms.required_anti_affinity, pod)

    @staticmethod
    def is_schedulable_after_node_change(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when a node gains a topology key of the pod's affinity or moves to another
        domain of it; for anti-affinity, when any node is added or one loses the key or moves."""
        if new is None:
            return True
        terms = PodTerms.of(pod)
        if terms.parse_error:
            return True
        new_labels = (new.get("metadata") or {}).get("labels") or {}
        old_labels = None if old is None else (old.get("metadata") or {}).get("labels") or {}
        for term in terms.required_affinity:
            key = term.topology_key
            if old_labels is None:
                if key in new_labels:
                    return True
                continue
            if key in new_labels and (key not in old_labels or old_labels[key] != new_labels[key]):
                return True
        for term in terms.required_anti_affinity:
            if old_labels is None:
                # A node without the key always takes the pod; one with it may join a domain
                # free of the pods it avoids, which this hint does not look up.
                return True
            key = term.topology_key
            if key in old_labels and (key not in new_labels or old_labels[key] != new_labels[key]):
                return True
        return False

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """mergeAffinityTermNamespacesIfNotEmpty: resolve a non-empty namespaceSelector to names."""
        if term.namespace_selector.empty():
            return term
        names = term.namespaces | self.objects.namespaces_matching(term.namespace_selector)
        return AffinityTerm(frozenset(names), term.selector, term.topology_key, NOTHING)

    # --- filter ----------------------------------------------------------------------

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        terms = PodTerms.of(pod)
        if terms.parse_error:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {terms.parse_error}",
                                plugin=self.name)
        affinity_terms = [self._merge_namespaces(t) for t in terms.required_affinity]
        anti_terms = [self._merge_namespaces(t) for t in terms.required_anti_affinity]
        s = PreFilterState(pod, self.objects.namespace_labels(pod.namespace), affinity_terms, anti_terms)
        snapshot = self.handle.snapshot()
        with_anti = snapshot.have_pods_with_required_anti_affinity_node_info_list
        if with_anti:
            self._count_existing_anti_affinity(s, pod, snapshot, with_anti)
        if affinity_terms or anti_terms:
            for node in nodes:
                for existing in node.pods.values():
                    if affinity_terms and pod_matches_all_terms(affinity_terms, existing):
                        for t in affinity_terms:
                            _add(s.affinity_counts, node, t.topology_key, 1)
                    for t in anti_terms:
                        if t.matches(existing, None):
                            _add(s.anti_affinity_counts, node, t.topology_key, 1)
        if not s.existing_anti_affinity_counts and not affinity_terms and not anti_terms:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, None

    def _count_existing_anti_affinity(self, s: PreFilterState, pod: PodInfo, snapshot: Snapshot,
                                      nodes: list[NodeInfo]) -> None:
        """The domains where placed pods' required anti-affinity terms match the pod."""
        ns_labels = s.namespace_labels
        shape = (pod.namespace, frozenset(pod.labels.items()), frozenset(ns_labels.items()) if ns_labels else None)
        memo = self._existing_memos.table(snapshot, shape)
        counts = s.existing_anti_affinity_counts
        for node in nodes:
            entry = memo.get(node.name)
            if entry is None or entry[0] != node.generation:
                domains: dict[tuple[str, str], int] = {}
                for existing in node.pods_with_required_anti_affinity.values():
                    for t in PodTerms.of(existing).required_anti_affinity:
                        if t.matches(pod, ns_labels):
                            _add(domains, node, t.topology_key, 1)
                entry = memo[node.name] = (node.generation, tuple(domains.items()))
            for pair, count in entry[1]:
                counts[pair] = counts.get(pair, 0) + count

    def pre_filter_extensions(self) -> "InterPodAffinity":
        return self

    def add_pod(self, state, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.update_with_pod(pod_to_add, node_info, 1)
        return None

    def remove_pod(self, state, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.update_with_pod(pod_to_remove, node_info, -1)
        return None

    @staticmethod
    def _node_topology_matches_affinity(s: PreFilterState, node: NodeInfo) -> bool:
        if not s.affinity_terms:
            return True
        pods_exist = True
        for t in s.affinity_terms:
            value = node.labels.get(t.topology_key)
            if value is None:
                return False
            if s.affinity_counts.get((t.topology_key, value), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # The first pod of a group that selects itself may go anywhere the topology keys exist.
        return not s.affinity_counts and pod_matches_all_terms(s.affinity_terms, s.pod)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found',
                          plugin=self.name)
        if not self._node_topology_matches_affinity(s, node_info):
            return self._affinity_rejected
        labels = node_info.labels
        if s.anti_affinity_counts:
            for t in s.anti_affinity_terms:
                value = labels.get(t.topology_key)
                if value is not None and s.anti_affinity_counts.get((t.topology_key, value), 0) > 0:
                    return self._anti_affinity_rejected
        existing = s.existing_anti_affinity_counts
        if existing:
            # Hot path: look the node's few labels up rather than scan every counted domain.
            for pair in labels.items():
                if existing.get(pair, 0) > 0:
                    return self._existing_rejected
        return None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        """filter() over many nodes (hot path): the same status per node, in one call.

        When every count is positive (_add drops a zero; only removing a pod that was never
        added could leave one below), a domain's presence is the test, and each node's few
        labels are looked up as a set against the counted domains."""
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None or s.affinity_terms:
            return [self.filter(state, pod, node) for node in nodes]
        anti_counts, existing = s.anti_affinity_counts, s.existing_anti_affinity_counts
        if min(anti_counts.values(), default=1) <= 0 or min(existing.values(), default=1) <= 0:
            return [self.filter(state, pod, node) for node in nodes]
        anti_keys = [t.topology_key for t in s.anti_affinity_terms] if anti_counts else []
        anti_rejected, existing_rejected = self._anti_affinity_rejected, self._existing_rejected
        results: list[Status | None] = []
        append = results.append
        for node in nodes:
            labels = node.labels
            status = None
            for key in anti_keys:
                value = labels.get(key)
                if value is not None and (key, value) in anti_counts:
                    status = anti_rejected
                    break
            if status is None and existing and not existing.keys().isdisjoint(labels.items()):
                status = existing_rejected
            append(status)
        return results

    # --- score -----------------------------------------------------------------------

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        terms = PodTerms.of(pod)
        if terms.parse_error:
            return Status(Code.ERROR, f"failed to parse pod: {terms.parse_error}", plugin=self.name)
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        snapshot = self.handle.snapshot()
        all_nodes = snapshot.node_info_list if has_constraints else snapshot.have_pods_with_affinity_node_info_list
        preferred = [(self._merge_namespaces(t), w) for t, w in terms.preferred_affinity]
        preferred_anti = [(self._merge_namespaces(t), w) for t, w in terms.preferred_anti_affinity]
        ns_labels = self.objects.namespace_labels(pod.namespace)
        hard_weight = self.hard_pod_affinity_weight
        scores: dict[str, dict[str, int]] = {}

        def process(term: AffinityTerm, weight: int, target: PodInfo, target_ns_labels, labels: dict) -> None:
            if term.matches(target, target_ns_labels):
                value = labels.get(term.topology_key)
                if value is not None:
                    by_value = scores.setdefault(term.topology_key, {})
                    by_value[value] = by_value.get(value, 0) + weight

        for node in all_nodes:
            labels = node.labels
            if not labels:
                continue
            existing_pods = node.pods if has_constraints else node.pods_with_affinity
            for existing in existing_pods.values():
                for t, w in preferred:
                    process(t, w, existing, None, labels)
                for t, w in preferred_anti:
                    process(t, -w, existing, None, labels)
                existing_terms = PodTerms.of(existing)
                if hard_weight > 0:
                    for t in existing_terms.required_affinity:
                        process(t, hard_weight, pod, ns_labels, labels)
                # As upstream, existing pods' preferred terms count even with
                # ignorePreferredTermsOfExistingPods once the pod has preferred terms itself.
                for t, w in existing_terms.preferred_affinity:
                    process(t, w, pod, ns_labels, labels)
                for t, w in existing_terms.preferred_anti_affinity:
                    process(t, -w, pod, ns_labels, labels)
        if not scores:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, scores)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        scores: dict[str, dict[str, int]] = state.read(PRE_SCORE_STATE_KEY)
        total = 0
        labels = node_info.labels
        for key, by_value in scores.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        return [self.score(state, pod, n) for n in nodes]

    def normalize_score(self, state, pod: PodInfo, scores: list[NodeScore]) -> None:
        if not state.get(PRE_SCORE_STATE_KEY):
            return
        if not scores:
            return
        min_count = min(s.score for s in scores)
        max_count = max(s.score for s in scores)
        diff = max_count - min_count
        for s in scores:
            s.score = int(MAX_NODE_SCORE * ((s.score - min_count) / diff)) if diff > 0 else 0
