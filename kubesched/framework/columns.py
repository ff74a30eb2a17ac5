"""Per-node resource columns as numpy arrays, so the resource filter and scores run as array
expressions over a cycle's candidate nodes instead of Python loops.

One row per snapshot index. A row remembers the NodeInfo (and its generation) it was read
from; the cache replaces a changed node's NodeInfo in the snapshot, so a row is stale
exactly when the snapshot holds another object (or the same one was changed in place).
Stale rows are re-read on use: only the nodes that changed since the last cycle cost work.

Values are exact: every column is int64 and every value must stay below 2**53, so that
products with MAX_NODE_SCORE fit in int64 and the float fractions BalancedAllocation takes
equal Python's. Nodes outside that range (or not in the snapshot) make `rows` answer None
and the caller takes its per-node path.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from kubesched.framework.types import NodeInfo

# Below 2**53 an int64 converts to float64 exactly, and times 100 it stays far from overflow.
EXACT_LIMIT = 1 << 53

_INDEX_OF = operator.attrgetter("index")
_GENERATION_OF = operator.attrgetter("generation")

# Column names, in the order _row reads them from a NodeInfo.
FIELDS = ("alloc_cpu", "alloc_mem", "alloc_eph", "alloc_pods", "req_cpu", "req_mem", "req_eph",
          "nz_cpu", "nz_mem", "pod_count")


def _row(node: NodeInfo) -> tuple[int, ...]:
    alloc, req, nz = node.allocatable, node.requested, node.non_zero_requested
    return (alloc.milli_cpu, alloc.memory, alloc.ephemeral_storage, alloc.allowed_pod_number,
            req.milli_cpu, req.memory, req.ephemeral_storage, nz.milli_cpu, nz.memory, len(node.pods))


class NodeColumns:
    """numpy columns (FIELDS) over a snapshot's node list, refreshed row by row on use."""

    __slots__ = ("nodes", "sources", "generations", "inexact", "table", *FIELDS)

    def __init__(self, nodes: list[NodeInfo]):
        self.nodes = nodes  # the snapshot's own list: entries are replaced when nodes change
        size = len(nodes)
        self.table = np.zeros((len(FIELDS), size), dtype=np.int64)
        self.sources: list[Any] = [None] * size
        self.generations = [0] * size
        self.inexact: set[int] = set()
        for i, node in enumerate(nodes):
            self._read(i, node)
        for k, field in enumerate(FIELDS):
            setattr(self, field, self.table[k])

    def _read(self, index: int, node: NodeInfo) -> None:
        row = _row(node)
        if within_exact_range(*row):
            self.table[:, index] = row
            self.inexact.discard(index)
        else:
            self.inexact.add(index)
        self.sources[index] = node
        self.generations[index] = node.generation

    def rows(self, nodes: list[NodeInfo]) -> np.ndarray | None:
        """The row index of each node, after refreshing stale rows; None when a node is not
        the snapshot's current NodeInfo or its values are out of the exact range."""
        # hot path: C-level maps compare each node with its row's source and generation
        index = list(map(_INDEX_OF, nodes))
        try:
            fresh = (list(map(self.sources.__getitem__, index)) == nodes
                     and list(map(self.generations.__getitem__, index)) == list(map(_GENERATION_OF, nodes)))
        except (IndexError, TypeError):
            return None
        if not fresh:
            current, sources, generations = self.nodes, self.sources, self.generations
            for i, node in zip(index, nodes):
                if sources[i] is node and generations[i] == node.generation:
                    continue
                if i < 0 or current[i] is not node:
                    return None  # a clone (preemption, nominated pods) or another snapshot's node
                self._read(i, node)
        if self.inexact and not self.inexact.isdisjoint(index):
            return None
        return np.fromiter(index, dtype=np.int64, count=len(index))


_ROWS_KEY = "kubesched/NodeColumnsRows"


def columns_and_rows(columns_of: Callable[[], NodeColumns], state: Any,
                     nodes: list[NodeInfo]) -> tuple[NodeColumns, np.ndarray] | None:
    """The snapshot's columns (columns_of: Snapshot.columns) and the rows of nodes, or None
    (take the per-node path).

    Remembered in the cycle state for the last node list asked about: the score plugins of
    a cycle all get the same list of feasible nodes, and the snapshot does not change
    within a cycle.
    """
    cached = state.get(_ROWS_KEY) if state is not None else None
    if cached is not None and cached[0] is nodes and cached[1] == len(nodes):
        return cached[2]
    columns = columns_of()
    rows = columns.rows(nodes)
    found = (columns, rows) if rows is not None else None
    if state is not None:
        state.write(_ROWS_KEY, (nodes, len(nodes), found))
    return found


def within_exact_range(*values: int) -> bool:
    """True when every value can take part in the column arithmetic exactly."""
    return all(-EXACT_LIMIT < v < EXACT_LIMIT for v in values)
