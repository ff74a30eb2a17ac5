"""PrioritySort: the queue order, highest spec.priority first, then the earliest queued."""

from __future__ import annotations

from typing import Any

from kubesched.framework.types import PodInfo


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, args: dict | None = None, handle: Any = None):
        self.handle = handle

    def less(self, a: PodInfo, b: PodInfo) -> bool:  # hot path: every heap comparison
        return a.priority > b.priority or (a.priority == b.priority and a.timestamp < b.timestamp)
