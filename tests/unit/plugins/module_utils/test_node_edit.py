import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils import node_edit
from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.labels import label_operations, label_view
from ansible_collections.kubesched.scheduler.plugins.module_utils.taints import (
    TaintSpec,
    eviction_preview_for,
    taint_operations,
    taint_view,
)

from ..fake_kube import FakeKubeApi, make_node, make_pod


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(node_edit, "_conflict_backoff", lambda attempt: None)


def add_taint(key, effect="NoSchedule", value=""):
    return taint_operations([TaintSpec(key, value, effect)], "present", False)


class TestTargets:
    def test_unknown_names_are_all_reported_with_the_known_nodes(self):
        api = FakeKubeApi([make_node("a"), make_node("b")])
        with pytest.raises(ModuleFailure) as failure:
            node_edit.resolve_nodes(api, ["a", "x", "y"], None)
        assert failure.value.message == (
            "name: nodes 'x', 'y' not found on the API server at https://fake.invalid:6443. "
            "Fix name; the cluster's nodes are: a, b")

    def test_duplicate_names_target_one_node(self):
        api = FakeKubeApi([make_node("a")])
        assert len(node_edit.resolve_nodes(api, ["a", "a"], None)) == 1

    def test_selector_targets_are_sorted_by_name(self):
        api = FakeKubeApi([make_node("b", {"role": "w"}), make_node("a", {"role": "w"}), make_node("c", {"role": "x"})])
        assert [n["metadata"]["name"] for n in node_edit.resolve_nodes(api, None, "role=w")] == ["a", "b"]

    @pytest.mark.parametrize("names, selector, fragment", [
        ([], None, "name must list at least one node"),
        (["Bad_Node"], None, "name: 'Bad_Node' is not a valid node name"),
        (None, "color in (", "label_selector 'color in (' is malformed"),
    ])
    def test_local_target_validation(self, names, selector, fragment):
        with pytest.raises(ModuleFailure) as failure:
            node_edit.validate_target(names, selector)
        assert fragment in failure.value.message


class TestConflicts:
    def test_conflict_rereads_and_keeps_the_concurrent_change(self):
        api = FakeKubeApi([make_node("a")])

        def concurrent_writer(fake):
            node = fake.read_node("a")
            node["spec"]["taints"] = [{"key": "theirs", "effect": "NoSchedule"}]
            fake.set_node(node)

        api.before_write = concurrent_writer
        report = node_edit.edit_nodes(api, [api.read_node("a")], add_taint("ours"), taint_view, check_mode=False)
        keys = [taint["key"] for taint in api.nodes["a"]["spec"]["taints"]]
        assert keys == ["theirs", "ours"]
        assert report["changed"] is True
        assert report["diff"][0]["before"] == {"taints": [{"key": "theirs", "effect": "NoSchedule"}]}
        assert api.writes == [("node", "a"), ("node", "a")]

    def test_conflict_where_the_other_writer_did_our_change_reports_unchanged(self):
        api = FakeKubeApi([make_node("a")])

        def same_change(fake):
            node = fake.read_node("a")
            node["spec"]["taints"] = [{"key": "ours", "effect": "NoSchedule"}]
            fake.set_node(node)

        api.before_write = same_change
        report = node_edit.edit_nodes(api, [api.read_node("a")], add_taint("ours"), taint_view, check_mode=False)
        assert report["changed"] is False
        assert api.writes == [("node", "a")]

    def test_label_removed_by_another_writer_first_is_a_clean_no_op(self):
        api = FakeKubeApi([make_node("a", labels={"color": "blue", "keep": "x"})])

        def other_removes_it(fake):
            node = fake.read_node("a")
            del node["metadata"]["labels"]["color"]
            fake.set_node(node)

        api.before_write = other_removes_it
        report = node_edit.edit_nodes(api, [api.read_node("a")], label_operations(["color"], "absent"), label_view,
                                      check_mode=False)
        assert report["changed"] is False
        assert api.nodes["a"]["metadata"]["labels"] == {"keep": "x"}

    def test_gives_up_after_max_attempts_with_a_clear_message(self, monkeypatch):
        api = FakeKubeApi([make_node("a")])
        original = api.patch_node

        def always_stale(name, operations, dry_run=False):
            node = api.read_node(name)
            api.set_node(node)
            return original(name, operations, dry_run)

        monkeypatch.setattr(api, "patch_node", always_stale)
        with pytest.raises(ModuleFailure) as failure:
            node_edit.write_node(api, api.read_node("a"), add_taint("x"), dry_run=False)
        assert "changed under every one of 10 write attempts" in failure.value.message

    def test_node_deleted_between_conflict_and_reread(self, monkeypatch):
        api = FakeKubeApi([make_node("a", resource_version="2")])
        monkeypatch.setattr(api, "read_node", lambda name: None)
        with pytest.raises(ModuleFailure) as failure:
            node_edit.write_node(api, make_node("a", resource_version="1"), add_taint("x"), dry_run=False)
        assert "node 'a' was deleted while this task was changing it" in failure.value.message


class TestEditNodes:
    def test_check_mode_writes_nothing_and_reports_the_dry_run(self):
        api = FakeKubeApi([make_node("a"), make_node("b", taints=[{"key": "x", "effect": "NoSchedule"}])])
        nodes = node_edit.resolve_nodes(api, ["a", "b"], None)
        report = node_edit.edit_nodes(api, nodes, add_taint("x"), taint_view, check_mode=True)
        assert api.writes == []
        assert api.dry_runs == [("node", "a")]
        assert report["changed"] is True
        assert report["nodes"] == [{"name": "a", "taints": [{"key": "x", "effect": "NoSchedule"}]},
                                   {"name": "b", "taints": [{"key": "x", "effect": "NoSchedule"}]}]
        assert report["diff"][0]["before"] == {"taints": []}
        assert report["diff"][1]["before"] == report["diff"][1]["after"]

    def test_every_write_is_dry_run_before_the_first_real_write(self):
        api = FakeKubeApi([make_node("a"), make_node("b")])
        node_edit.edit_nodes(api, node_edit.resolve_nodes(api, ["a", "b"], None), add_taint("x"), taint_view, False)
        assert api.dry_runs == [("node", "a"), ("node", "b")]
        assert api.writes == [("node", "a"), ("node", "b")]

    def test_a_rejected_dry_run_changes_nothing(self):
        api = FakeKubeApi([make_node("a"), make_node("b")])
        api.fail_writes_with = ModuleFailure("forbidden (HTTP 403)")
        with pytest.raises(ModuleFailure):
            node_edit.edit_nodes(api, node_edit.resolve_nodes(api, ["a", "b"], None), add_taint("x"), taint_view, False)
        assert api.writes == []
        assert "taints" not in api.nodes["a"]["spec"]

    def test_second_run_is_unchanged(self):
        api = FakeKubeApi([make_node("a")])
        plan = label_operations({"color": "blue"}, "present")
        assert node_edit.edit_nodes(api, [api.read_node("a")], plan, label_view, False)["changed"] is True
        again = node_edit.edit_nodes(api, [api.read_node("a")], plan, label_view, False)
        assert again["changed"] is False
        assert api.writes == [("node", "a")]

    def test_eviction_preview_is_collected_before_writing(self):
        api = FakeKubeApi([make_node("a")], pods=[
            make_pod("victim", "a"),
            make_pod("tolerant", "a", tolerations=[{"key": "drain", "operator": "Exists"}]),
            make_pod("elsewhere", "b"),
        ])
        report = node_edit.edit_nodes(api, [api.read_node("a")], add_taint("drain", "NoExecute"), taint_view,
                                      check_mode=True, preview=eviction_preview_for(api))
        assert report["previews"] == [{"node": "a", "taint": "drain:NoExecute", "pods": [
            {"namespace": "default", "name": "victim", "evicted_after_seconds": 0}]}]


def test_a_write_failing_after_the_dry_runs_names_the_nodes_already_changed(monkeypatch):
    monkeypatch.setattr(node_edit, "_conflict_backoff", lambda attempt: None)
    api = FakeKubeApi([make_node("a"), make_node("b")])
    original = api.patch_node

    def fail_real_write_of_b(name, operations, dry_run=False):
        if name == "b" and not dry_run:
            raise ModuleFailure("the API server at x refused to patch nodes 'b' (HTTP 500)")
        return original(name, operations, dry_run)

    monkeypatch.setattr(api, "patch_node", fail_real_write_of_b)
    with pytest.raises(ModuleFailure) as failure:
        node_edit.edit_nodes(api, node_edit.resolve_nodes(api, ["a", "b"], None), add_taint("x"), taint_view, False)
    assert failure.value.message.endswith("(nodes already changed by this task: a)")
