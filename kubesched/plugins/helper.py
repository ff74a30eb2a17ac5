"""What several plugins share, as upstream's plugins/helper and apimachinery's labels package.

Label selectors, node selector terms, taint matching, score normalisation, pluginConfig
args parsing and the read-only view of cluster objects (namespaces, services, workload
controllers) that affinity and spreading need. Selectors are compiled once per pod and
matched per node or pod: the matching functions are hot paths, written for speed.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterable

from kubesched.framework.interface import NodeScore, PluginArgsError
from kubesched.framework.types import NodeInfo, Taint, Toleration

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
OBJECT_NAME_FIELD = "metadata.name"

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's / on int64 (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> None:
    """helper.DefaultNormalizeScore: scale to [0, max_priority] by the highest score."""
    max_count = 0
    for s in scores:
        if s.score > max_count:
            max_count = s.score
    if max_count == 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return
    for s in scores:
        score = max_priority * s.score // max_count
        s.score = max_priority - score if reverse else score


def default_normalize_values(max_priority: int, reverse: bool, values: list[int]) -> list[int]:
    """default_normalize_score on plain ints, returning the new scores (the runtime's batch
    path builds no NodeScore objects). Same arithmetic, node for node."""
    max_count = max(values, default=0)
    if max_count <= 0:  # default_normalize_score's running maximum starts at 0
        return [max_priority] * len(values) if reverse else list(values)
    if reverse:
        return [max_priority - max_priority * s // max_count for s in values]
    return [max_priority * s // max_count for s in values]


# --- label selectors --------------------------------------------------------------------

class SelectorError(ValueError):
    """A selector that cannot be parsed; the path names the offending field."""


_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST, _GT, _LT = range(6)
_LABEL_OPERATORS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _DOES_NOT_EXIST}
_NODE_OPERATORS = dict(_LABEL_OPERATORS, Gt=_GT, Lt=_LT)
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_error(value: str) -> str | None:
    """Why value is not a valid label key / qualified name (ValidateLabelName), or None."""
    prefix, _unused, name = value.rpartition("/")
    if "/" in value and not prefix:
        return f"{value!r}: prefix part must be non-empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{value!r}: prefix part must be a lowercase DNS subdomain (e.g. example.com)"
    if not name or len(name) > 63 or not _NAME_PART.match(name):
        return (f"{value!r}: name part must be 1-63 characters of alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric character")
    return None


class Selector:
    """A compiled labels.Selector: requirements ANDed; `nothing` never matches."""

    __slots__ = ("requirements", "nothing")

    def __init__(self, requirements: Iterable[tuple[str, int, Any]] = (), nothing: bool = False):
        self.requirements = tuple(requirements)
        self.nothing = nothing

    def empty(self) -> bool:
        """labels.Selector.Empty(): true only for the match-everything selector."""
        return not self.nothing and not self.requirements

    def matches(self, labels: dict[str, str]) -> bool:  # hot path: called per pod per node
        if self.nothing:
            return False
        for key, op, values in self.requirements:
            if op == _IN:
                value = labels.get(key)
                if value is None or value not in values:
                    return False
            elif op == _NOT_IN:
                value = labels.get(key)
                if value is not None and value in values:
                    return False
            elif op == _EXISTS:
                if key not in labels:
                    return False
            elif op == _DOES_NOT_EXIST:
                if key in labels:
                    return False
            else:
                value = labels.get(key)
                if value is None or not _INTEGER.match(value):
                    return False
                number = int(value)
                if (op == _GT and not number > values) or (op == _LT and not number < values):
                    return False
        return True

    def add(self, other: "Selector") -> "Selector":
        """A selector requiring both (labels.Selector.Add of other's requirements)."""
        if self.nothing or other.nothing:
            return NOTHING
        return Selector(self.requirements + other.requirements)

    def __repr__(self) -> str:
        return "Selector(nothing)" if self.nothing else f"Selector({self.requirements!r})"


EVERYTHING = Selector()
NOTHING = Selector(nothing=True)


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _check_key(key: str, path: str) -> None:
    err = qualified_name_error(key)
    if err:
        raise SelectorError(f"{path}: Invalid value: {err}")


def _check_value(value: Any, path: str) -> None:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise SelectorError(f"{path}: Invalid value: {value!r}: a valid label value must be 63 characters or "
                            "less and consist of alphanumerics, '-', '_' or '.', starting and ending with an "
                            "alphanumeric character")


def _requirement(key: str, operator: str, values: list, operators: dict[str, int],
                 path: str) -> tuple[str, int, Any]:
    _check_key(key, f"{path}.key")
    op = operators.get(operator)
    if op is None:
        raise SelectorError(f"{path}.operator: Unsupported value: {operator!r}: supported values: "
                            + ", ".join(f'"{o}"' for o in operators))
    values = list(values or ())
    if op in (_IN, _NOT_IN):
        if not values:
            raise SelectorError(f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty")
        for i, v in enumerate(values):
            _check_value(v, f"{path}.values[{i}]")
        return key, op, frozenset(values)
    if op in (_EXISTS, _DOES_NOT_EXIST):
        if values:
            raise SelectorError(f"{path}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        return key, op, None
    if len(values) != 1 or not _INTEGER.match(str(values[0])):
        raise SelectorError(f"{path}.values: Invalid value: {values!r}: for 'Gt', 'Lt' operators, "
                            "exactly one integer value is required")
    return key, op, int(values[0])


def selector_from_set(labels: dict[str, str]) -> Selector:
    """labels.SelectorFromSet: every key equal to its value (an empty set matches everything)."""
    return Selector((k, _IN, frozenset((v,))) for k, v in sorted(labels.items()))


def label_selector(selector: dict | None, path: str = "labelSelector") -> Selector:
    """metav1.LabelSelectorAsSelector: None matches nothing, {} matches everything."""
    if selector is None:
        return NOTHING
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or ()
    if not match_labels and not expressions:
        return EVERYTHING
    reqs = []
    for k, v in sorted(match_labels.items()):
        _check_key(k, f"{path}.matchLabels")
        _check_value(v, f"{path}.matchLabels[{k}]")
        reqs.append((k, _IN, frozenset((v,))))
    for i, expr in enumerate(expressions):
        reqs.append(_requirement(expr.get("key", ""), expr.get("operator", ""), expr.get("values"),
                                 _LABEL_OPERATORS, f"{path}.matchExpressions[{i}]"))
    return Selector(reqs)


# --- node selectors (component-helpers/scheduling/corev1/nodeaffinity) --------------------

class NodeSelectorTerm:
    """One nodeSelectorTerm: matchExpressions on labels AND matchFields on metadata.name."""

    __slots__ = ("labels", "fields", "error")

    def __init__(self, term: dict, path: str):
        self.labels: Selector | None = None
        self.fields: tuple[tuple[str, bool, str], ...] | None = None
        self.error: str | None = None
        try:
            expressions = term.get("matchExpressions") or ()
            if expressions:
                self.labels = Selector(
                    _requirement(e.get("key", ""), e.get("operator", ""), e.get("values"), _NODE_OPERATORS,
                                 f"{path}.matchExpressions[{i}]") for i, e in enumerate(expressions))
            match_fields = term.get("matchFields") or ()
            if match_fields:
                fields = []
                for i, e in enumerate(match_fields):
                    op, values = e.get("operator", ""), list(e.get("values") or ())
                    if op not in ("In", "NotIn"):
                        raise SelectorError(f"{path}.matchFields[{i}].operator: Unsupported value: {op!r}: "
                                            'supported values: "In", "NotIn"')
                    if len(values) != 1:
                        raise SelectorError(f"{path}.matchFields[{i}].values: Invalid value: {values!r}: "
                                            "must have one element")
                    fields.append((e.get("key", ""), op == "In", values[0]))
                self.fields = tuple(fields)
        except SelectorError as err:
            self.error = str(err)

    def matches(self, node: NodeInfo) -> bool:  # hot path
        if self.error is not None:
            return False
        if self.labels is not None and not self.labels.matches(node.labels):
            return False
        if self.fields is not None and node.name:
            for key, is_in, value in self.fields:
                actual = node.name if key == OBJECT_NAME_FIELD else ""
                if (actual == value) != is_in:
                    return False
        return True


def _is_empty_term(term: dict) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


class NodeSelector:
    """A required nodeSelector: ORed terms; empty terms are dropped, no terms match nothing."""

    __slots__ = ("terms",)

    def __init__(self, node_selector: dict, path: str = ""):
        prefix = f"{path}.nodeSelectorTerms" if path else "nodeSelectorTerms"
        self.terms = [NodeSelectorTerm(t, f"{prefix}[{i}]")
                      for i, t in enumerate(node_selector.get("nodeSelectorTerms") or ()) if not _is_empty_term(t)]

    def errors(self) -> list[str]:
        return [t.error for t in self.terms if t.error]

    def matches(self, node: NodeInfo) -> bool:  # hot path
        for term in self.terms:
            if term.matches(node):
                return True
        return False


class PreferredSchedulingTerms:
    """Weighted preferred terms; a node scores the sum of the weights of the terms it matches."""

    __slots__ = ("terms",)

    def __init__(self, terms: list[dict], path: str = ""):
        self.terms: list[tuple[NodeSelectorTerm, int]] = []
        for i, t in enumerate(terms or ()):
            preference = t.get("preference") or {}
            weight = t.get("weight") or 0
            if weight == 0 or _is_empty_term(preference):
                continue
            term = NodeSelectorTerm(preference, f"{path}[{i}].preference" if path else f"[{i}].preference")
            if term.error:
                raise SelectorError(term.error)
            self.terms.append((term, weight))

    def score(self, node: NodeInfo) -> int:  # hot path
        total = 0
        for term, weight in self.terms:
            if term.matches(node):
                total += weight
        return total


class RequiredNodeAffinity:
    """nodeaffinity.RequiredNodeAffinity: spec.nodeSelector AND required node affinity terms."""

    __slots__ = ("selector", "node_selector")

    def __init__(self, node_selector: dict | None, affinity: dict | None):
        self.selector = selector_from_set(node_selector) if node_selector else None
        required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        self.node_selector = NodeSelector(required) if required is not None else None

    @classmethod
    def of_pod(cls, pod) -> "RequiredNodeAffinity":
        cached = pod.plugin_cache.get("RequiredNodeAffinity")
        if cached is None:
            cached = pod.plugin_cache["RequiredNodeAffinity"] = cls(pod.node_selector, pod.affinity)
        return cached

    def matches(self, node: NodeInfo) -> bool:  # hot path
        if self.selector is not None and not self.selector.matches(node.labels):
            return False
        if self.node_selector is not None:
            return self.node_selector.matches(node)
        return True

    def labels_matcher(self) -> Callable[[dict[str, str]], bool] | None:
        """matches() as a function of the node's labels alone, with as few calls per node as
        the shape allows; None when a term reads the node's name (matchFields)."""
        parts: list[Callable[[dict[str, str]], bool]] = []
        if self.selector is not None:
            parts.append(self.selector.matches)
        if self.node_selector is not None:
            selectors = []
            for term in self.node_selector.terms:
                if term.fields is not None:
                    return None
                if term.error is not None:
                    continue  # a term that cannot be parsed matches nothing
                if term.labels is None:
                    selectors = None  # a term with no label requirements matches every node
                    break
                selectors.append(term.labels.matches)
            if selectors is not None:
                if len(selectors) == 1:
                    parts.append(selectors[0])
                else:
                    parts.append(lambda labels: any(match(labels) for match in selectors))
        if not parts:
            return lambda labels: True
        if len(parts) == 1:
            return parts[0]
        return lambda labels: all(match(labels) for match in parts)


# --- taints ---------------------------------------------------------------------------

def tolerations_tolerate_taint(tolerations: list[Toleration], taint: Taint) -> bool:
    for t in tolerations:
        if t.tolerates(taint):
            return True
    return False


def find_untolerated_taint(taints: list[Taint], tolerations: list[Toleration],
                           effects: tuple[str, ...] = DO_NOT_SCHEDULE_EFFECTS) -> Taint | None:
    """v1helper.FindMatchingUntoleratedTaint restricted to the given effects."""
    for taint in taints:
        if taint.effect in effects and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


# --- pluginConfig args ----------------------------------------------------------------

def check_known_fields(args: dict, known: Iterable[str], path: str = "") -> None:
    """Reject fields the args type does not define, as the strict decoder does."""
    known = set(known)
    for key in args:
        if key not in known and key not in ("apiVersion", "kind"):
            raise PluginArgsError(f"{path}{key}", f"unknown field {key!r}; valid fields: {', '.join(sorted(known))}")


def int_arg(args: dict, key: str, default: int, path: str = "") -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise PluginArgsError(f"{path}{key}", f"must be an integer, got {value!r}")
    return value


def list_arg(args: dict, key: str, path: str = "") -> list:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise PluginArgsError(f"{path}{key}", f"must be a list, got {type(value).__name__}")
    return value


def dict_arg(args: dict, key: str, path: str = "") -> dict | None:
    value = args.get(key)
    if value is not None and not isinstance(value, dict):
        raise PluginArgsError(f"{path}{key}", f"must be a mapping, got {type(value).__name__}")
    return value


def args_dict(args: Any, plugin: str) -> dict:
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise PluginArgsError("", f"{plugin} args must be a mapping, got {type(args).__name__}")
    return args


def resource_specs(raw: list, path: str) -> list[tuple[str, int]]:
    """[{name, weight}] with weight 0 or unset defaulted to 1, as SetDefaults_* does."""
    specs = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise PluginArgsError(f"{path}[{i}]", "must be a mapping with name and weight")
        check_known_fields(item, ("name", "weight"), f"{path}[{i}].")
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise PluginArgsError(f"{path}[{i}].name", "must be a resource name such as cpu or memory")
        weight = int_arg(item, "weight", 0, f"{path}[{i}].")
        specs.append((name, weight or 1))
    return specs


# --- cluster objects the affinity and spreading plugins read ----------------------------

_LIST_PATHS = {
    "namespaces": "/api/v1/namespaces",
    "services": "/api/v1/namespaces/{ns}/services",
    "replicationcontrollers": "/api/v1/namespaces/{ns}/replicationcontrollers",
    "replicasets": "/apis/apps/v1/namespaces/{ns}/replicasets",
    "statefulsets": "/apis/apps/v1/namespaces/{ns}/statefulsets",
}


class ClusterObjects:
    """Raw namespaces, services and controllers, from the runtime's informer cache.

    The runtime provides ``handle.list_objects(resource, namespace=None) -> list[dict]``
    from its caches. A handle without it is served by ``handle.client.list`` with a short
    time-to-live cache, correct but slower.
    """

    TTL_SECONDS = 2.0

    def __init__(self, handle: Any):
        self._handle = handle
        self._cache: dict[tuple[str, str | None], tuple[float, list[dict]]] = {}

    def list(self, resource: str, namespace: str | None = None) -> list[dict]:
        lister: Callable | None = getattr(self._handle, "list_objects", None)
        if lister is not None:
            return lister(resource, namespace)
        key = (resource, namespace)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.TTL_SECONDS:
            return hit[1]
        items = (self._handle.client.list(_LIST_PATHS[resource].format(ns=namespace)) or {}).get("items") or []
        self._cache[key] = (now, items)
        return items

    def namespace_labels(self, name: str) -> dict[str, str]:
        for ns in self.list("namespaces"):
            if (ns.get("metadata") or {}).get("name") == name:
                return dict((ns.get("metadata") or {}).get("labels") or {})
        return {}

    def namespaces_matching(self, selector: Selector) -> set[str]:
        return {(ns.get("metadata") or {}).get("name", "") for ns in self.list("namespaces")
                if selector.matches((ns.get("metadata") or {}).get("labels") or {})}

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        for obj in self.list(resource, namespace):
            if (obj.get("metadata") or {}).get("name") == name:
                return obj
        return None


# --- what kubesched does not implement: DRA claims -------------------------------------------

UNSUPPORTED_CLAIMS_ADVICE = "schedule this pod with kube-scheduler"
