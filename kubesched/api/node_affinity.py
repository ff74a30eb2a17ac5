"""Node selectors and node affinity (component-helpers/scheduling/corev1/nodeaffinity)."""

from __future__ import annotations

from typing import Callable, Protocol

from kubesched.api.selectors import NODE_OPERATORS, Selector, SelectorError, requirement, selector_from_set

OBJECT_NAME_FIELD = "metadata.name"


class Node(Protocol):
    """What node affinity reads of a node (the scheduler's NodeInfo has both)."""

    name: str
    labels: dict[str, str]


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
                    requirement(e.get("key", ""), e.get("operator", ""), e.get("values"), NODE_OPERATORS,
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

    def matches(self, node: Node) -> bool:  # hot path
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

    def matches(self, node: Node) -> bool:  # hot path
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

    def score(self, node: Node) -> int:  # hot path
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

    def matches(self, node: Node) -> bool:  # hot path
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
