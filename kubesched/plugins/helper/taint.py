"""Taint effects and toleration matching (v1helper, helper/taint.go)."""

from __future__ import annotations

from kubesched.framework.types import Taint, Toleration

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


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
