"""A consistent view of all nodes for one scheduling cycle (upstream's cache.Snapshot)."""

from __future__ import annotations

from collections.abc import Hashable

from kubesched.framework.columns import NodeColumns
from kubesched.framework.types import NodeInfo, PodInfo


class Snapshot:
    """Node infos in a stable order, plus the lists that affinity plugins iterate."""

    __slots__ = ("node_info_list", "node_info_map", "have_pods_with_affinity_node_info_list",
                 "have_pods_with_required_anti_affinity_node_info_list", "node_set",
                 "_columns")

    def __init__(self, node_infos: list[NodeInfo] | None = None):
        # Counts set_nodes calls: each one brings every node as a new NodeInfo (NodeMemos).
        self.node_set = 0
        self.node_info_list: list[NodeInfo] = []
        self.node_info_map: dict[str, NodeInfo] = {}
        self.have_pods_with_affinity_node_info_list: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity_node_info_list: list[NodeInfo] = []
        self._columns: NodeColumns | None = None
        self.set_nodes(node_infos or [])

    def set_nodes(self, node_infos: list[NodeInfo]) -> None:
        self.node_set += 1
        self.node_info_list = list(node_infos)
        self._columns = None
        self.node_info_map = {n.name: n for n in self.node_info_list}
        for i, n in enumerate(self.node_info_list):
            n.index = i
        self.refresh_affinity_lists()
        self.refresh_image_counts()

    def refresh_affinity_lists(self) -> None:
        self.have_pods_with_affinity_node_info_list = [
            n for n in self.node_info_list if n.pods_with_affinity]
        self.have_pods_with_required_anti_affinity_node_info_list = [
            n for n in self.node_info_list if n.pods_with_required_anti_affinity]

    def refresh_image_counts(self) -> None:
        counts: dict[str, int] = {}
        for n in self.node_info_list:
            for image in n.image_states:
                counts[image] = counts.get(image, 0) + 1
        for n in self.node_info_list:
            for image, state in n.image_states.items():
                state.num_nodes = counts[image]

    def columns(self) -> NodeColumns:
        """numpy resource columns over node_info_list (built on first use, rows refreshed as
        nodes change); see kubesched/framework/columns.py."""
        if self._columns is None or self._columns.nodes is not self.node_info_list:
            self._columns = NodeColumns(self.node_info_list)
        return self._columns

    def get(self, name: str) -> NodeInfo | None:
        return self.node_info_map.get(name)

    # -- a fork to simulate in (upstream's MutableSnapshotSharedLister) ------------------------

    def fork(self) -> "Snapshot":
        """A snapshot holding the same NodeInfos, whose pods add_pod and remove_pod change
        without touching this one (a preemption's what-if)."""
        fork = Snapshot.__new__(Snapshot)
        fork.node_set = self.node_set
        fork.node_info_list = list(self.node_info_list)
        fork.node_info_map = dict(self.node_info_map)
        fork.have_pods_with_affinity_node_info_list = list(self.have_pods_with_affinity_node_info_list)
        fork.have_pods_with_required_anti_affinity_node_info_list = list(
            self.have_pods_with_required_anti_affinity_node_info_list)
        fork._columns = None
        return fork

    def add_pod(self, pod: PodInfo, node_name: str) -> NodeInfo:
        """Put pod on node_name; the node's NodeInfo is replaced by a changed clone, so that what
        plugins remember of the old object (NodeMemos, columns) is not taken for the new."""
        return self._change(node_name, lambda node: node.add_pod(pod))

    def remove_pod(self, pod: PodInfo, node_name: str) -> NodeInfo:
        """Take pod off node_name (a changed clone replaces the NodeInfo, as in add_pod)."""
        return self._change(node_name, lambda node: node.remove_pod(pod))

    def _change(self, node_name: str, change) -> NodeInfo:
        old = self.node_info_map.get(node_name)
        if old is None:
            raise KeyError(f"node {node_name!r} is not in the snapshot")
        node = old.clone()
        change(node)
        self.node_info_list[old.index] = self.node_info_map[node_name] = node
        if old.pods_with_affinity or node.pods_with_affinity or \
                old.pods_with_required_anti_affinity or node.pods_with_required_anti_affinity:
            self.refresh_affinity_lists()
        return node

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def list(self) -> list[NodeInfo]:
        return self.node_info_list


class NodeMemos:
    """What a plugin remembers between cycles about the snapshot's NodeInfos, so that the
    nodes the last bindings did not touch cost a lookup, not a walk over their pods.

    Per key (a selector, a pod's shape), a table of node name -> entry, where an entry starts
    with the generation of the NodeInfo it was worked out on; its user reuses it only while
    the node's NodeInfo has that generation (every change to a node or its pods takes a new
    one, types.next_generation) and whatever else the entry records holds. An entry never
    holds the NodeInfo itself: a table not looked up for a while would keep the replaced
    clones of every node, and every pod on them, alive. When the snapshot's node set is
    rebuilt (a node added or deleted), the tables are emptied, so a deleted node's entries go
    with it. At most max_keys tables are kept; the oldest goes first.
    """

    __slots__ = ("max_keys", "tables", "_snapshot", "_node_set")

    def __init__(self, max_keys: int = 1):
        self.max_keys = max_keys
        self.tables: dict[Hashable, dict[str, tuple]] = {}
        self._snapshot: Snapshot | None = None
        self._node_set = 0

    def table(self, snapshot: Snapshot, key: Hashable = None) -> dict[str, tuple]:
        if snapshot is not self._snapshot or snapshot.node_set != self._node_set:
            self.tables = {}
            self._snapshot, self._node_set = snapshot, snapshot.node_set
        table = self.tables.get(key)
        if table is None:
            if len(self.tables) >= self.max_keys:
                del self.tables[next(iter(self.tables))]
            table = self.tables[key] = {}
        return table
