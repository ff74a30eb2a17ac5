"""Go's integer arithmetic where Python's differs."""

from __future__ import annotations


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's / on int64 (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q
