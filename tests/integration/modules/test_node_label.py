"""node_label against the lab API server."""

from .helpers import node_state


def test_check_mode_apply_unchanged_and_removal(bare_nodes, core_v1, run_module):
    (node,) = bare_nodes(1)
    before = node_state(core_v1, node)["labels"]
    wanted = {"color": "blue", "example.com/size": "Large"}

    check = run_module("node_label", check_mode=True, name=node, labels=wanted)
    assert check["changed"] is True
    assert check["diff"] == [{"before_header": "node/" + node, "after_header": "node/" + node,
                              "before": {"labels": before}, "after": {"labels": dict(before, **wanted)}}]
    assert node_state(core_v1, node)["labels"] == before

    applied = run_module("node_label", name=node, labels=wanted)
    assert applied["changed"] is True and applied["diff"] == check["diff"]
    assert node_state(core_v1, node)["labels"] == dict(before, **wanted)
    assert run_module("node_label", name=node, labels={"color": "blue"})["changed"] is False

    removed = run_module("node_label", name=node, state="absent", labels=["color", "example.com/size"])
    assert removed["changed"] is True
    assert node_state(core_v1, node)["labels"] == before


def test_removing_a_missing_label_never_creates_it(bare_nodes, core_v1, run_module):
    (node,) = bare_nodes(1)
    before = node_state(core_v1, node)["labels"]
    for labels in (["never-there"], {"never-there": None}):
        result = run_module("node_label", name=node, state="absent", labels=labels)
        assert result["changed"] is False
        assert node_state(core_v1, node)["labels"] == before
    check = run_module("node_label", check_mode=True, name=node, state="absent", labels=["never-there"])
    assert check["changed"] is False and check["diff"][0]["before"] == check["diff"][0]["after"]


def test_empty_value_and_label_selector(bare_nodes, core_v1, run_module):
    workers = bare_nodes(2, labels={"role": "worker"})
    (other,) = bare_nodes(1)
    result = run_module("node_label", label_selector="role=worker", labels={"example.com/flag": ""})
    assert sorted(entry["name"] for entry in result["nodes"]) == sorted(workers)
    assert all(node_state(core_v1, name)["labels"]["example.com/flag"] == "" for name in workers)
    assert "example.com/flag" not in node_state(core_v1, other)["labels"]
