"""PrioritySort: the queue order, highest spec.priority first, then the earliest queued."""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.types import PodInfo


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, args: dict | None, handle: Handle):
        pass  # no args, nothing of the handle

    def less(self, a: PodInfo, b: PodInfo) -> bool:  # hot path: every heap comparison
        return a.priority > b.priority or (a.priority == b.priority and a.timestamp < b.timestamp)
