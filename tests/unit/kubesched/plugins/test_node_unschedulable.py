import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, run_filter

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.node_unschedulable import NodeUnschedulable

REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) were unschedulable",))
UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize("unschedulable, tolerations, want", [
    (False, None, None),
    (True, None, REJECTED),
    (True, [UNSCHEDULABLE_TOLERATION], None),
    (True, [{"operator": "Exists"}], None),                                   # tolerates everything
    (True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], None),  # any effect
    (True, [dict(UNSCHEDULABLE_TOLERATION, effect="NoExecute")], REJECTED),   # wrong effect
    (True, [{"key": "node.kubernetes.io/unschedulable", "value": "x", "effect": "NoSchedule"}], REJECTED),
])
def test_filter(unschedulable, tolerations, want):
    status = run_filter(NodeUnschedulable(None, Handle()), make_pod(tolerations=tolerations),
                        make_node("n", unschedulable=unschedulable))
    assert code_and_reasons(status) == want


def test_filter_nodes_matches_filter_over_a_mix():
    plugin = NodeUnschedulable(None, Handle())
    nodes = [make_node("a"), make_node("b", unschedulable=True)]
    out = plugin.filter_nodes(CycleState(), make_pod(), nodes)
    assert [code_and_reasons(s) for s in out] == [None, REJECTED]
