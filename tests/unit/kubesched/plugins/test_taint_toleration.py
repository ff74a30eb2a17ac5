import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, run_filter, run_scores

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code
from kubesched.plugins.taint_toleration import TaintToleration

REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint(s)",))


def taint(key, value="", effect="NoSchedule"):
    return {"key": key, "value": value, "effect": effect}


def tol(key="", operator="", value="", effect=""):
    t = {"key": key, "operator": operator, "value": value, "effect": effect}
    return {k: v for k, v in t.items() if v}


@pytest.mark.parametrize("tolerations, taints, want", [
    ([], [], None),
    ([], [taint("dedicated", "user1")], REJECTED),
    ([tol("dedicated", "Equal", "user1", "NoSchedule")], [taint("dedicated", "user1")], None),
    ([tol("dedicated", "Equal", "user2", "NoSchedule")], [taint("dedicated", "user1")], REJECTED),
    ([tol("dedicated", "", "user1", "NoSchedule")], [taint("dedicated", "user1")], None),   # "" means Equal
    ([tol("foo", "Exists", effect="NoSchedule")], [taint("foo", "bar")], None),
    ([tol("foo", "Exists", effect="NoSchedule")], [taint("foo", "bar", "NoExecute")], REJECTED),
    ([tol("foo", "Exists")], [taint("foo", "bar", "NoExecute")], None),                    # empty effect: all
    ([tol(operator="Exists")], [taint("a"), taint("b", "x", "NoExecute")], None),           # tolerates everything
    ([tol(operator="Exists", effect="NoSchedule")], [taint("a"), taint("b", "", "NoExecute")], REJECTED),
    ([tol("foo", "Equal", "bar", "NoSchedule")], [taint("foo", "bar"), taint("baz", "1")], REJECTED),
    ([tol("foo", "Equal", "bar")], [taint("foo", "bar"), taint("none", "x", "PreferNoSchedule")], None),
    ([tol("foo", "Lt", "5", "NoSchedule")], [taint("foo", "3")], REJECTED),  # comparison operators are gated off
    ([tol("foo", "Bogus", "bar")], [taint("foo", "bar")], REJECTED),
    ([], [taint("node.kubernetes.io/not-ready")], REJECTED),
])
def test_filter(tolerations, taints, want):
    node = make_node("n", taints=taints)
    assert code_and_reasons(run_filter(TaintToleration(None, Handle()), make_pod(tolerations=tolerations), node)) == want


@pytest.mark.parametrize("tolerations, node_taints, want", [
    # Tolerated taints score higher than intolerable ones.
    ([tol("foo", "Equal", "bar", "PreferNoSchedule")],
     [[taint("foo", "bar", "PreferNoSchedule")], [taint("foo", "blah", "PreferNoSchedule")]], [100, 0]),
    # All taints tolerated: same score whatever their number.
    ([tol("cpu-type", "Equal", "arm64", "PreferNoSchedule"), tol("disk-type", "Equal", "ssd", "PreferNoSchedule")],
     [[], [taint("cpu-type", "arm64", "PreferNoSchedule")],
      [taint("cpu-type", "arm64", "PreferNoSchedule"), taint("disk-type", "ssd", "PreferNoSchedule")]], [100, 100, 100]),
    # The more intolerable taints, the lower the score.
    ([tol("foo", "Equal", "bar", "PreferNoSchedule")],
     [[], [taint("cpu-type", "arm64", "PreferNoSchedule")],
      [taint("cpu-type", "arm64", "PreferNoSchedule"), taint("disk-type", "ssd", "PreferNoSchedule")]], [100, 50, 0]),
    # Only PreferNoSchedule taints and tolerations count.
    ([tol("cpu-type", "Equal", "arm64", "NoSchedule"), tol("disk-type", "Equal", "ssd", "NoSchedule")],
     [[], [taint("cpu-type", "arm64", "NoSchedule")],
      [taint("cpu-type", "arm64", "PreferNoSchedule"), taint("disk-type", "ssd", "PreferNoSchedule")]], [100, 100, 0]),
    # A toleration with an empty effect counts for PreferNoSchedule.
    ([tol("foo", "Exists")], [[taint("foo", "x", "PreferNoSchedule")], [taint("bar", "x", "PreferNoSchedule")]],
     [100, 0]),
    # No intolerable taint anywhere: everyone gets the maximum.
    ([], [[], []], [100, 100]),
])
def test_score(tolerations, node_taints, want):
    nodes = [make_node(f"n{i}", taints=t) for i, t in enumerate(node_taints)]
    assert run_scores(TaintToleration(None, Handle()), make_pod(tolerations=tolerations), nodes) == want


def test_prefer_no_schedule_never_blocks():
    node = make_node("n", taints=[taint("foo", "bar", "PreferNoSchedule")])
    assert run_filter(TaintToleration(None, Handle()), make_pod(), node) is None


def test_filter_nodes_decides_each_distinct_taint_once_and_agrees_with_filter():
    from kubesched.framework.interface import CycleState
    plugin = TaintToleration(None, Handle())
    pod = make_pod(tolerations=[tol("gpu", "Exists", effect="NoSchedule")])
    nodes = [make_node("a"), make_node("b", taints=[taint("gpu", "x")]),
             make_node("c", taints=[taint("gpu", "x"), taint("team", "blue")]),
             make_node("d", taints=[taint("spot", "1", "PreferNoSchedule")]), make_node("e", taints=[taint("gpu", "y")])]
    state = CycleState()
    batch = plugin.filter_nodes(state, pod, nodes)
    assert [code_and_reasons(s) for s in batch] == [code_and_reasons(plugin.filter(state, pod, n)) for n in nodes]
    assert [s is None for s in batch] == [True, True, False, True, True]
