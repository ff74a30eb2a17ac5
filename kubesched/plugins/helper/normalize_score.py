"""helper.DefaultNormalizeScore, on NodeScore objects and on plain ints."""

from __future__ import annotations

from kubesched.framework.interface import NodeScore


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
