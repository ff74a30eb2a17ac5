"""run_filter_plugins_on_nodes: batch filtering gives each node the first rejecting status,
keeps passing nodes in order, accepts explicit Success statuses and refuses errors."""

import pytest
from kubesched_fakes import node_raw, pod

from kubesched.framework.interface import Code, CycleState, Status
from kubesched.framework.runtime import FilterError, Framework
from kubesched.framework.types import NodeInfo


class ByName:
    """Answers a preset status per node name (None when not listed)."""

    def __init__(self, name, verdicts):
        self.name = name
        self.verdicts = verdicts

    def filter_nodes(self, state, pod_info, nodes):
        return [self.verdicts.get(n.name) for n in nodes]


def run(plugins, count=6):
    nodes = [NodeInfo(node_raw(f"n{i}")) for i in range(count)]
    fwk = Framework.__new__(Framework)
    return fwk.run_filter_plugins_on_nodes(CycleState(), pod("p"), nodes, plugins)


def test_first_rejection_wins_and_order_is_kept_with_shared_and_success_statuses():
    shared = Status(Code.UNSCHEDULABLE, "full")
    first = ByName("First", {"n1": shared, "n3": shared, "n4": Status(Code.SUCCESS)})
    second = ByName("Second", {"n0": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no"), "n1": Status(Code.PENDING)})
    feasible, rejected = run([first, second])
    assert [n.name for n in feasible] == ["n2", "n4", "n5"]
    assert [(n.name, s.plugin, s.reasons) for n, s in rejected] == [
        ("n1", "First", ["full"]), ("n3", "First", ["full"]), ("n0", "Second", ["no"])]


def test_every_node_passing_keeps_the_candidates():
    feasible, rejected = run([ByName("None", {})], count=3)
    assert [n.name for n in feasible] == ["n0", "n1", "n2"] and rejected == []


def test_an_error_status_fails_the_cycle():
    with pytest.raises(FilterError, match='running "Broken" filter plugin: boom'):
        run([ByName("Broken", {"n2": Status(Code.ERROR, "boom")})])
