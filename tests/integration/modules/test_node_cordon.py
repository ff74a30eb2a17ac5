"""node_cordon against the lab API server."""

from .helpers import node_state


def test_cordon_uncordon_with_check_mode_and_diff(bare_nodes, core_v1, run_module):
    first, second = bare_nodes(2)
    check = run_module("node_cordon", check_mode=True, name=[first, second])
    assert check["changed"] is True
    assert [entry["after"] for entry in check["diff"]] == [{"unschedulable": True}] * 2
    assert not node_state(core_v1, first)["unschedulable"] and not node_state(core_v1, second)["unschedulable"]

    applied = run_module("node_cordon", name=[first, second], state="cordoned")
    assert applied["changed"] is True
    assert applied["nodes"] == [{"name": first, "unschedulable": True}, {"name": second, "unschedulable": True}]
    assert node_state(core_v1, first)["unschedulable"] and node_state(core_v1, second)["unschedulable"]
    assert run_module("node_cordon", name=[first, second])["changed"] is False

    uncordon = run_module("node_cordon", name=first, state="uncordoned")
    assert uncordon["changed"] is True
    assert uncordon["diff"] == [{"before_header": "node/" + first, "after_header": "node/" + first,
                                 "before": {"unschedulable": True}, "after": {"unschedulable": False}}]
    assert not node_state(core_v1, first)["unschedulable"] and node_state(core_v1, second)["unschedulable"]
