"""A consistent view of all nodes for one scheduling cycle (upstream's cache.Snapshot)."""

from __future__ import annotations

from kubesched.framework.columns import NodeColumns
from kubesched.framework.types import NodeInfo


class Snapshot:
    """Node infos in a stable order, plus the lists that affinity plugins iterate."""

    __slots__ = ("node_info_list", "node_info_map", "have_pods_with_affinity_node_info_list",
                 "have_pods_with_required_anti_affinity_node_info_list", "generation",
                 "_columns")

    def __init__(self, node_infos: list[NodeInfo] | None = None, generation: int = 0):
        self.generation = generation
        self.node_info_list: list[NodeInfo] = []
        self.node_info_map: dict[str, NodeInfo] = {}
        self.have_pods_with_affinity_node_info_list: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity_node_info_list: list[NodeInfo] = []
        self._columns: NodeColumns | None = None
        self.set_nodes(node_infos or [])

    def set_nodes(self, node_infos: list[NodeInfo]) -> None:
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

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def list(self) -> list[NodeInfo]:
        return self.node_info_list
