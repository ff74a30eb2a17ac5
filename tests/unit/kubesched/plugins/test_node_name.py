import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, run_filter

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.node_name import NodeName

REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match the requested node name",))


@pytest.mark.parametrize("node_name, node, want", [
    ("", "foo", None),
    ("foo", "foo", None),
    ("bar", "foo", REJECTED),
])
def test_filter(node_name, node, want):
    status = run_filter(NodeName(None, Handle()), make_pod(node_name=node_name), make_node(node))
    assert code_and_reasons(status) == want


def test_pre_filter_restricts_to_the_named_node():
    result, status = NodeName(None, Handle()).pre_filter(CycleState(), make_pod(node_name="n1"), [])
    assert status is None and result.node_names == {"n1"}


def test_filter_without_pre_filter_still_rejects():
    status = NodeName(None, Handle()).filter(CycleState(), make_pod(node_name="bar"), make_node("foo"))
    assert code_and_reasons(status) == REJECTED
