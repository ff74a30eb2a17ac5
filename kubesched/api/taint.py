"""Taints, tolerations and their matching (core/v1 Taint and Toleration.ToleratesTaint,
component-helpers' FindMatchingUntoleratedTaint, helper/taint.go)."""

from __future__ import annotations

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


class Taint:
    __slots__ = ("key", "value", "effect")

    def __init__(self, key: str, value: str = "", effect: str = ""):
        self.key = key
        self.value = value
        self.effect = effect

    @classmethod
    def from_dict(cls, d: dict) -> "Taint":
        return cls(d.get("key", ""), d.get("value", "") or "", d.get("effect", "") or "")

    def __repr__(self) -> str:
        return f"Taint({self.key}={self.value}:{self.effect})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Taint) and (self.key, self.value, self.effect) == (
            other.key, other.value, other.effect)

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.effect))


class Toleration:
    __slots__ = ("key", "operator", "value", "effect", "toleration_seconds")

    def __init__(self, key: str = "", operator: str = "", value: str = "", effect: str = "",
                 toleration_seconds: int | None = None):
        self.key = key
        self.operator = operator
        self.value = value
        self.effect = effect
        self.toleration_seconds = toleration_seconds

    @classmethod
    def from_dict(cls, d: dict) -> "Toleration":
        return cls(d.get("key", "") or "", d.get("operator", "") or "", d.get("value", "") or "",
                   d.get("effect", "") or "", d.get("tolerationSeconds"))

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint: an empty effect matches all effects; an empty key
        with Exists matches every key."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        return False

    def __repr__(self) -> str:
        return f"Toleration({self.key} {self.operator} {self.value}:{self.effect})"


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
