"""PodTopologySpread: spread matching pods across topology domains.

DoNotSchedule constraints filter: a node is rejected when placing the pod there would make
its domain exceed the least-loaded domain by more than maxSkew (minDomains counts missing
domains as empty). ScheduleAnyway constraints score: fewer matching pods in the node's
domain score higher, each constraint weighted by the log of its number of domains.

A pod without constraints gets the plugin's default constraints; with the default
defaultingType System those are hostname (maxSkew 3) and zone (maxSkew 5), ScheduleAnyway,
over the pods selected by the pod's services and controller.
"""

from __future__ import annotations

import math

from kubesched.api.names import qualified_name_error
from kubesched.api.node_affinity import RequiredNodeAffinity
from kubesched.api.selectors import (
    LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
    Selector,
    SelectorError,
    label_selector,
    selector_from_set,
)
from kubesched.api.taint import find_untolerated_taint
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
from kubesched.framework.signers import Fragments
from kubesched.framework.snapshot import NodeMemos, Snapshot
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, list_arg
from kubesched.plugins.helper.cluster_objects import ClusterObjects

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
PRE_FILTER_STATE_KEY = "PreFilterPodTopologySpread"
PRE_SCORE_STATE_KEY = "PreScorePodTopologySpread"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
HONOR = "Honor"
IGNORE = "Ignore"
MAX_INT32 = 2**31 - 1

SYSTEM_DEFAULT_CONSTRAINTS = [
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
]

_CONTROLLER_KINDS = {
    ("v1", "ReplicationController"): "replicationcontrollers",
    ("apps/v1", "ReplicaSet"): "replicasets",
    ("apps/v1", "StatefulSet"): "statefulsets",
}


class Constraint:
    __slots__ = ("max_skew", "topology_key", "selector", "min_domains", "node_affinity_policy",
                 "node_taints_policy")

    def __init__(self, max_skew: int, topology_key: str, selector: Selector, min_domains: int,
                 node_affinity_policy: str, node_taints_policy: str):
        self.max_skew = max_skew
        self.topology_key = topology_key
        self.selector = selector
        self.min_domains = min_domains
        self.node_affinity_policy = node_affinity_policy
        self.node_taints_policy = node_taints_policy

    def matches_node_inclusion_policies(self, pod: PodInfo, node: NodeInfo, required: RequiredNodeAffinity) -> bool:
        if self.node_affinity_policy == HONOR and not required.matches(node):
            return False
        if self.node_taints_policy == HONOR and find_untolerated_taint(node.taints, pod.tolerations) is not None:
            return False
        return True


def node_labels_match_constraints(labels: dict[str, str], constraints: list[Constraint]) -> bool:
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


def _labels(raw: dict) -> dict[str, str]:
    return (raw.get("metadata") or {}).get("labels") or {}


def _involved_in_spreading(raw: dict, pod: PodInfo) -> bool:
    """involvedInTopologySpreading: a placed (or nominated) pod of the pod's namespace."""
    if not (raw.get("spec") or {}).get("nodeName") and not (raw.get("status") or {}).get("nominatedNodeName"):
        return False
    return ((raw.get("metadata") or {}).get("namespace") or "default") == pod.namespace


def _labels_change_matching(old_labels: dict[str, str], new_labels: dict[str, str], constraints: list[Constraint]) -> bool:
    """isSchedulableAfterPodLabelChange: the relabelled pod enters or leaves some constraint's selector."""
    if old_labels == new_labels:
        return False
    return any(c.selector.matches(old_labels) != c.selector.matches(new_labels) for c in constraints)


def count_pods_match_selector(pods: dict[str, PodInfo], selector: Selector, namespace: str) -> int:
    """countPodsMatchSelector: terminating pods and other namespaces do not count."""
    if selector.empty():
        return 0
    count = 0
    for p in pods.values():  # hot path
        if p.namespace == namespace and not p.deleting and selector.matches(p.labels):
            count += 1
    return count


class MatchCounts:
    """count_pods_match_selector per node, remembered across cycles for each (selector, namespace).

    Hot path: PreFilter and PreScore count the matching pods on every node, every cycle,
    although between two cycles only the nodes the last binding touched change. An entry
    holds the generation of the NodeInfo it was counted on: every change to a node's pods or
    labels takes a new generation, so an entry is reused only for that very state (NodeMemos).
    """

    MAX_SELECTORS = 64  # distinct (selector, namespace) pairs kept, the oldest dropped first

    __slots__ = ("memos",)

    def __init__(self) -> None:
        self.memos = NodeMemos(self.MAX_SELECTORS)

    def table(self, snapshot: Snapshot, selector: Selector, namespace: str) -> dict[str, tuple[int, int]]:
        return self.memos.table(snapshot, (selector.requirements, selector.nothing, namespace))

    @staticmethod
    def count(table: dict[str, tuple[int, int]], node: NodeInfo, selector: Selector, namespace: str) -> int:
        entry = table.get(node.name)
        if entry is not None and entry[0] == node.generation:
            return entry[1]
        count = count_pods_match_selector(node.pods, selector, namespace) if node.pods else 0
        table[node.name] = (node.generation, count)
        return count


class CriticalPaths:
    """The two domains with the fewest matching pods, maintained as upstream's criticalPaths."""

    __slots__ = ("paths",)

    def __init__(self, paths: list[list] | None = None):
        self.paths = paths if paths is not None else [["", MAX_INT32], ["", MAX_INT32]]

    def min_match_num(self) -> int:
        return self.paths[0][1]

    def update(self, value: str, num: int) -> None:
        p = self.paths
        i = 0 if value == p[0][0] else 1 if value == p[1][0] else -1
        if i >= 0:
            p[i][1] = num
            if p[0][1] > p[1][1]:
                p[0], p[1] = p[1], p[0]
        elif num < p[0][1]:
            p[1] = p[0]
            p[0] = [value, num]
        elif num < p[1][1]:
            p[1] = [value, num]

    def clone(self) -> "CriticalPaths":
        return CriticalPaths([list(self.paths[0]), list(self.paths[1])])


class PreFilterState:
    __slots__ = ("constraints", "critical_paths", "tp_value_to_match_num", "required_affinity", "self_match")

    def __init__(self, constraints: list[Constraint], critical_paths: list[CriticalPaths],
                 tp_value_to_match_num: list[dict[str, int]], required_affinity: RequiredNodeAffinity | None,
                 self_match: list[int]):
        self.constraints = constraints
        self.critical_paths = critical_paths
        self.tp_value_to_match_num = tp_value_to_match_num
        self.required_affinity = required_affinity
        # 1 where the pod matches the constraint's own selector: fixed for the cycle.
        self.self_match = self_match

    def min_match_num(self, i: int, min_domains: int) -> int:
        if len(self.tp_value_to_match_num[i]) < min_domains:
            return 0
        return self.critical_paths[i].min_match_num()

    def clone(self) -> "PreFilterState":
        return PreFilterState(self.constraints, [p.clone() for p in self.critical_paths],
                              [dict(m) for m in self.tp_value_to_match_num], self.required_affinity,
                              self.self_match)


class PreScoreState:
    __slots__ = ("constraints", "ignored_nodes", "topology_value_to_pod_counts", "topology_normalizing_weight")

    def __init__(self) -> None:
        self.constraints: list[Constraint] = []
        self.ignored_nodes: set[str] = set()
        self.topology_value_to_pod_counts: list[dict[str, int]] = []
        self.topology_normalizing_weight: list[float] = []


def _validate_default_constraints(raw: list, defaulting_type: str) -> None:
    if defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise PluginArgsError("defaultingType", f'Unsupported value: {defaulting_type!r}: supported values: '
                              f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"')
    if defaulting_type == SYSTEM_DEFAULTING and raw:
        raise PluginArgsError("defaultingType", f'Invalid value: "{SYSTEM_DEFAULTING}": '
                              "when .defaultConstraints are not empty")
    for i, c in enumerate(raw):
        p = f"defaultConstraints[{i}]"
        if not isinstance(c, dict):
            raise PluginArgsError(p, "must be a topology spread constraint mapping")
        check_known_fields(c, ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                               "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys"), f"{p}.")
        max_skew = c.get("maxSkew", 0)
        if not isinstance(max_skew, int) or max_skew <= 0:
            raise PluginArgsError(f"{p}.maxSkew", f"Invalid value: {max_skew!r}: not in valid range (0, inf)")
        key = c.get("topologyKey") or ""
        if not key:
            raise PluginArgsError(f"{p}.topologyKey", "Required value: can not be empty")
        err = qualified_name_error(key)
        if err:
            raise PluginArgsError(f"{p}.topologyKey", f"Invalid value: {err}")
        action = c.get("whenUnsatisfiable") or ""
        if not action:
            raise PluginArgsError(f"{p}.whenUnsatisfiable", "Required value: can not be empty")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise PluginArgsError(f"{p}.whenUnsatisfiable", f'Unsupported value: {action!r}: supported values: '
                                  f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"')
        if c.get("labelSelector") is not None:
            raise PluginArgsError(f"{p}.labelSelector",
                                  "Forbidden: constraint must not define a selector, as they deduced for each pod")
        for other in raw[:i]:
            if other.get("topologyKey") == key and other.get("whenUnsatisfiable") == action:
                raise PluginArgsError(f"defaultConstraints[{i}]", f"Duplicate value: \"{{{key}, {action}}}\"")


class PodTopologySpread:
    name = "PodTopologySpread"
    # The owners of a pod, whose selectors the default constraints spread by.
    INFORMERS = ("services", "replicationcontrollers", "replicasets", "statefulsets")

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("defaultConstraints", "defaultingType"))
        raw = list_arg(args, "defaultConstraints")
        defaulting_type = args.get("defaultingType") or SYSTEM_DEFAULTING
        _validate_default_constraints(raw, defaulting_type)
        self.system_defaulted = defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints = SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else raw
        self.objects = ClusterObjects(handle.informers)
        self._label_missing = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH,
                                     plugin=self.name)
        self._skewed = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=self.name)
        self.match_counts = MatchCounts()

    def sign_pod(self, pod: PodInfo) -> Fragments:
        """Spreading depends on every pod of the domain, not on the pod and node alone."""
        if (pod.raw.get("spec") or {}).get("topologySpreadConstraints") or self.default_constraints:
            return None
        return []

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.ASSIGNED_POD,
                             ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                             hint=self.is_schedulable_after_assigned_pod_change),
                # A new toleration counts only under a constraint with nodeTaintsPolicy Honor.
                ClusterEvent(EventResource.UNSCHEDULED_POD,
                             ActionType.UPDATE_POD_TOLERATIONS | ActionType.UPDATE_POD_LABEL,
                             hint=self.is_schedulable_after_target_pod_change),
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.DELETE
                             | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                             hint=self.is_schedulable_after_node_change)]

    # --- QueueingHints -----------------------------------------------------------------

    def is_schedulable_after_target_pod_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when the pod got other tolerations under a Honor taints policy, or its labels
        changed whether it matches a constraint's selector."""
        if old is None or new is None:
            return True
        try:
            constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return True
        if (old.get("spec") or {}).get("tolerations") != (new.get("spec") or {}).get("tolerations") and \
                any(c.node_taints_policy == HONOR for c in constraints):
            return True
        return _labels_change_matching(_labels(old), _labels(new), constraints)

    def is_schedulable_after_assigned_pod_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when a placed pod of the pod's namespace that matches a constraint's selector
        is added or deleted, or is relabelled into or out of one."""
        if any(raw is not None and not _involved_in_spreading(raw, pod) for raw in (old, new)):
            return False
        try:
            constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return True
        if old is not None and new is not None:
            return _labels_change_matching(_labels(old), _labels(new), constraints)
        changed = new if new is not None else old
        if changed is None:
            return True
        labels = _labels(changed)
        return any(c.selector.matches(labels) for c in constraints)

    def is_schedulable_after_node_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when a node enters or leaves the constraints' topology (it has every topology
        key), or a node in it changes a topology value or its taints."""
        try:
            constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return True
        old_labels = None if old is None else _labels(old)
        new_labels = None if new is None else _labels(new)
        old_matching = old_labels is not None and node_labels_match_constraints(old_labels, constraints)
        new_matching = new_labels is not None and node_labels_match_constraints(new_labels, constraints)
        if old_labels is not None and new_labels is not None:
            if old_matching != new_matching:
                return True
            return new_matching and (
                any(old_labels.get(c.topology_key) != new_labels.get(c.topology_key) for c in constraints)
                or (old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints"))
        return new_matching if new_labels is not None else old_matching

    # --- constraints -----------------------------------------------------------------

    @staticmethod
    def filter_constraints(raw: list[dict], pod_labels: dict[str, str], action: str) -> list[Constraint]:
        """filterTopologySpreadConstraints; raises SelectorError for a bad labelSelector."""
        out = []
        for c in raw:
            if c.get("whenUnsatisfiable") != action:
                continue
            selector = label_selector(c.get("labelSelector"))
            match_label_keys = c.get("matchLabelKeys") or ()
            if match_label_keys:
                match_labels = {k: pod_labels[k] for k in match_label_keys if k in pod_labels}
                if match_labels:
                    selector = selector_from_set(match_labels).add(selector)
            min_domains = c.get("minDomains")
            out.append(Constraint(c.get("maxSkew") or 0, c.get("topologyKey") or "", selector,
                                  1 if min_domains is None else min_domains,
                                  c.get("nodeAffinityPolicy") or HONOR, c.get("nodeTaintsPolicy") or IGNORE))
        return out

    def default_selector(self, pod: PodInfo) -> Selector:
        """helper.DefaultSelector: the pod's services' selectors plus its controller's selector."""
        label_set: dict[str, str] = {}
        for service in self.objects.list("services", pod.namespace):
            selector = (service.get("spec") or {}).get("selector")
            if selector is None:
                continue
            if all(pod.labels.get(k) == v for k, v in selector.items()):
                label_set.update(selector)
        selector = selector_from_set(label_set)
        owner = next((o for o in (pod.raw.get("metadata") or {}).get("ownerReferences") or () if o.get("controller")),
                     None)
        if owner is None:
            return selector
        resource = _CONTROLLER_KINDS.get((owner.get("apiVersion", ""), owner.get("kind", "")))
        if resource is None:
            return selector
        controller = self.objects.get(resource, pod.namespace, owner.get("name", ""))
        if controller is None:
            return selector
        controller_selector = (controller.get("spec") or {}).get("selector")
        if resource == "replicationcontrollers":
            label_set.update(controller_selector or {})
            return selector_from_set(label_set)
        try:
            other = label_selector(controller_selector)
        except SelectorError:
            return selector
        return selector if other.nothing else selector.add(other)

    def build_default_constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        constraints = self.filter_constraints(self.default_constraints, pod.labels, action)
        if not constraints:
            return []
        selector = self.default_selector(pod)
        if selector.empty():
            return []
        for c in constraints:
            c.selector = selector
        return constraints

    def get_constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        if pod.topology_spread_constraints:
            return self.filter_constraints(pod.topology_spread_constraints, pod.labels, action)
        return self.build_default_constraints(pod, action)

    @staticmethod
    def _policies_matter(constraints: list[Constraint], required: RequiredNodeAffinity) -> bool:
        """False when no constraint can exclude a node: the common case skips the per-node check."""
        affinity_matters = required.selector is not None or required.node_selector is not None
        return any(c.node_taints_policy == HONOR or (affinity_matters and c.node_affinity_policy == HONOR)
                   for c in constraints)

    # --- filter ----------------------------------------------------------------------

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        try:
            constraints = self.get_constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as err:
            return None, Status.as_error(err, plugin=self.name)
        if not constraints:
            return None, Status(Code.SKIP)
        required = RequiredNodeAffinity.of_pod(pod)
        tp_maps: list[dict[str, int]] = [{} for _unused in constraints]
        namespace = pod.namespace
        policies_matter = self._policies_matter(constraints, required)
        count = self.match_counts.count
        snapshot = self.handle.snapshot()
        tables = [self.match_counts.table(snapshot, c.selector, namespace) for c in constraints]
        for node in nodes:  # hot path: every node, every cycle
            labels = node.labels
            if not node_labels_match_constraints(labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if policies_matter and not c.matches_node_inclusion_policies(pod, node, required):
                    continue
                value = labels[c.topology_key]
                entry = tables[i].get(node.name)  # MatchCounts.count inlined: most nodes hit
                if entry is not None and entry[0] == node.generation:
                    matched = entry[1]
                else:
                    matched = count(tables[i], node, c.selector, namespace)
                tp_maps[i][value] = tp_maps[i].get(value, 0) + matched
        paths = []
        for tp_map in tp_maps:
            p = CriticalPaths()
            for value, num in tp_map.items():
                p.update(value, num)
            paths.append(p)
        self_match = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(constraints, paths, tp_maps, required, self_match))
        return None, None

    def pre_filter_extensions(self) -> "PodTopologySpread":
        return self

    def _update_with_pod(self, state, updated: PodInfo, preemptor: PodInfo, node: NodeInfo | None, delta: int) -> None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None or node is None or updated.namespace != preemptor.namespace:
            return
        if not node_labels_match_constraints(node.labels, s.constraints):
            return
        required = s.required_affinity or RequiredNodeAffinity.of_pod(preemptor)
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if not c.matches_node_inclusion_policies(preemptor, node, required):
                continue
            value = node.labels[c.topology_key]
            num = s.tp_value_to_match_num[i].get(value, 0) + delta
            s.tp_value_to_match_num[i][value] = num
            s.critical_paths[i].update(value, num)

    def add_pod(self, state, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod_to_add, pod_to_schedule, node_info, 1)
        return None

    def remove_pod(self, state, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod_to_remove, pod_to_schedule, node_info, -1)
        return None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found',
                          plugin=self.name)
        labels = node_info.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return self._label_missing
            skew = s.tp_value_to_match_num[i].get(value, 0) + s.self_match[i] - s.min_match_num(i, c.min_domains)
            if skew > c.max_skew:
                return self._skewed
        return None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        """filter over many nodes: the answer depends only on each constraint's domain of the
        node, so it is worked out once per domain (hot path: a few zones, thousands of nodes)."""
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return [self.filter(state, pod, node) for node in nodes]
        checks = [(c.topology_key, {}, s.tp_value_to_match_num[i], s.self_match[i] - s.min_match_num(i, c.min_domains),
                   c.max_skew) for i, c in enumerate(s.constraints)]
        label_missing, skewed = self._label_missing, self._skewed
        out: list[Status | None] = []
        for node in nodes:
            labels = node.labels
            result = None
            for key, decided, match_num, offset, max_skew in checks:
                value = labels.get(key)
                if value is None:
                    result = label_missing
                    break
                verdict = decided.get(value, False)
                if verdict is False:
                    verdict = decided[value] = skewed if match_num.get(value, 0) + offset > max_skew else None
                if verdict is not None:
                    result = verdict
                    break
            out.append(result)
        return out

    # --- score -----------------------------------------------------------------------

    def pre_score(self, state, pod: PodInfo, filtered_nodes: list[NodeInfo]) -> Status | None:
        snapshot = self.handle.snapshot()
        all_nodes = snapshot.node_info_list
        if not all_nodes:
            return Status(Code.SKIP)
        s = PreScoreState()
        require_all_topologies = bool(pod.topology_spread_constraints) or not self.system_defaulted
        try:
            s.constraints = self.get_constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as err:
            return Status.as_error(err, plugin=self.name)
        if not s.constraints:
            return Status(Code.SKIP)
        constraints = s.constraints
        counts: list[dict[str, int]] = [{} for _unused in constraints]
        for node in filtered_nodes:
            if require_all_topologies and not node_labels_match_constraints(node.labels, constraints):
                s.ignored_nodes.add(node.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue
                counts[i].setdefault(node.labels.get(c.topology_key, ""), 0)
        weights = []
        for i, c in enumerate(constraints):
            size = len(counts[i])
            if c.topology_key == LABEL_HOSTNAME:
                size = len(filtered_nodes) - len(s.ignored_nodes)
            weights.append(math.log(size + 2))
        required = RequiredNodeAffinity.of_pod(pod)
        policies_matter = self._policies_matter(constraints, required)
        count = self.match_counts.count
        tables = [self.match_counts.table(snapshot, c.selector, pod.namespace) for c in constraints]
        for node in all_nodes:  # hot path: every node, every cycle
            if require_all_topologies and not node_labels_match_constraints(node.labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if policies_matter and not c.matches_node_inclusion_policies(pod, node, required):
                    continue
                value = node.labels.get(c.topology_key, "")
                if value not in counts[i]:
                    continue
                if node.pods:
                    counts[i][value] += count(tables[i], node, c.selector, pod.namespace)
        s.topology_value_to_pod_counts = counts
        s.topology_normalizing_weight = weights
        state.write(PRE_SCORE_STATE_KEY, s)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        s: PreScoreState = state.read(PRE_SCORE_STATE_KEY)
        if node_info.name in s.ignored_nodes:
            return 0
        score = 0.0
        labels = node_info.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = count_pods_match_selector(node_info.pods, c.selector, pod.namespace)
            else:
                count = s.topology_value_to_pod_counts[i].get(value, 0)
            score += count * s.topology_normalizing_weight[i] + (c.max_skew - 1)
        return math.floor(score + 0.5)  # Go's math.Round for non-negative values

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        return [self.score(state, pod, n) for n in nodes]

    def normalize_score(self, state, pod: PodInfo, scores: list[NodeScore]) -> None:
        s: PreScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        if s is None:
            return
        ignored = s.ignored_nodes
        valid = [ns.score for ns in scores if ns.name not in ignored]
        min_score = min(valid) if valid else 0
        max_score = max([0, *valid])
        for ns in scores:
            if ns.name in ignored:
                ns.score = 0
            elif max_score == 0:
                ns.score = MAX_NODE_SCORE
            else:
                ns.score = MAX_NODE_SCORE * (max_score + min_score - ns.score) // max_score
