"""Label selectors as apimachinery's labels package compiles and matches them.

A selector is compiled once and matched per node or pod: matches() is a hot path.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from kubesched.api.names import qualified_name_error

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"


class SelectorError(ValueError):
    """A selector that cannot be parsed; the path names the offending field."""


_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST, _GT, _LT = range(6)
_LABEL_OPERATORS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _DOES_NOT_EXIST}
NODE_OPERATORS = dict(_LABEL_OPERATORS, Gt=_GT, Lt=_LT)
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


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


def requirement(key: str, operator: str, values: list, operators: dict[str, int],
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
        reqs.append(requirement(expr.get("key", ""), expr.get("operator", ""), expr.get("values"),
                                _LABEL_OPERATORS, f"{path}.matchExpressions[{i}]"))
    return Selector(reqs)
