"""node_taint against the lab API server."""

import json
import uuid

from .helpers import import_module_utils, node_state, read_json, release, wait_at_gate

BLUE = {"key": "app", "value": "blue", "effect": "NoSchedule"}


def test_check_mode_then_apply_then_unchanged(bare_nodes, core_v1, run_module):
    first, second = bare_nodes(2)
    check = run_module("node_taint", check_mode=True, name=[first, second], taints=["app=blue:NoSchedule"])
    assert check["changed"] is True, check
    assert [entry["name"] for entry in check["nodes"]] == [first, second]
    assert check["diff"] == [
        {"before_header": "node/" + first, "after_header": "node/" + first, "before": {"taints": []},
         "after": {"taints": [BLUE]}},
        {"before_header": "node/" + second, "after_header": "node/" + second, "before": {"taints": []},
         "after": {"taints": [BLUE]}},
    ]
    assert node_state(core_v1, first)["taints"] == [] and node_state(core_v1, second)["taints"] == []

    applied = run_module("node_taint", name=[first, second], taints=["app=blue:NoSchedule"])
    assert applied["changed"] is True
    assert applied["diff"] == check["diff"]
    assert node_state(core_v1, first)["taints"] == [BLUE] and node_state(core_v1, second)["taints"] == [BLUE]

    again = run_module("node_taint", name=[first, second], taints=[dict(BLUE)])
    assert again["changed"] is False
    assert all(entry["before"] == entry["after"] for entry in again["diff"])


def test_update_value_remove_and_exclusive(bare_nodes, core_v1, run_module):
    (node,) = bare_nodes(1, taints=[dict(BLUE), {"key": "app", "effect": "NoExecute"}, {"key": "keep", "effect": "NoSchedule"}])
    updated = run_module("node_taint", name=node, taints=["app=green:NoSchedule"])
    assert updated["changed"] is True
    assert node_state(core_v1, node)["taints"][0] == {"key": "app", "value": "green", "effect": "NoSchedule"}

    removed = run_module("node_taint", name=node, state="absent", taints=["app"])
    assert removed["changed"] is True
    assert node_state(core_v1, node)["taints"] == [{"key": "keep", "effect": "NoSchedule"}]
    assert removed["diff"][0]["after"] == {"taints": [{"key": "keep", "effect": "NoSchedule"}]}

    assert run_module("node_taint", name=node, state="absent", taints=["app-", "missing:NoExecute"])["changed"] is False

    exclusive = run_module("node_taint", name=node, exclusive=True, taints=["only=1:PreferNoSchedule"])
    assert exclusive["changed"] is True
    assert node_state(core_v1, node)["taints"] == [{"key": "only", "value": "1", "effect": "PreferNoSchedule"}]

    cleared = run_module("node_taint", name=node, replace=True, taints=[])
    assert cleared["changed"] is True and node_state(core_v1, node)["taints"] == []


def test_label_selector_targets_only_matching_nodes(bare_nodes, core_v1, run_module):
    blue = bare_nodes(2, labels={"color": "blue"})
    (red,) = bare_nodes(1, labels={"color": "red"})
    result = run_module("node_taint", label_selector="color=blue", taints=["dedicated=blue:NoSchedule"])
    assert sorted(entry["name"] for entry in result["nodes"]) == sorted(blue)
    assert node_state(core_v1, red)["taints"] == []
    assert all(node_state(core_v1, name)["taints"] for name in blue)

    nothing = run_module("node_taint", label_selector="color=green", taints=["x:NoSchedule"])
    assert nothing["changed"] is False and nothing["nodes"] == []
    assert "matched no nodes" in json.dumps(nothing.get("warnings"))


def _pod(name, node, tolerations=None):
    return {"metadata": {"name": name},
            "spec": {"nodeName": node, "tolerations": tolerations or [],
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def test_eviction_preview_in_check_mode_and_for_real(bare_nodes, namespace, core_v1, run_module):
    node, other = bare_nodes(2)
    for pod in (
        _pod("plain", node),
        _pod("tolerates-forever", node, [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]),
        _pod("tolerates-briefly", node, [{"key": "maintenance", "operator": "Equal", "value": "now",
                                          "effect": "NoExecute", "tolerationSeconds": 30}]),
        _pod("wrong-value", node, [{"key": "maintenance", "operator": "Equal", "value": "later"}]),
        _pod("on-other-node", other),
    ):
        core_v1.create_namespaced_pod(namespace, pod, _preload_content=False)
    expected = [{"node": node, "taint": "maintenance=now:NoExecute", "pods": [
        {"namespace": namespace, "name": "plain", "evicted_after_seconds": 0},
        {"namespace": namespace, "name": "tolerates-briefly", "evicted_after_seconds": 30},
        {"namespace": namespace, "name": "wrong-value", "evicted_after_seconds": 0},
    ]}]

    preview = run_module("node_taint", check_mode=True, name=node, taints=["maintenance=now:NoExecute"])
    assert preview["changed"] is True
    assert preview["evictions"] == expected
    assert node_state(core_v1, node)["taints"] == []
    assert len(read_json(core_v1.list_namespaced_pod, namespace)["items"]) == 5

    applied = run_module("node_taint", name=node, taints=["maintenance=now:NoExecute"])
    assert applied["evictions"] == expected
    assert run_module("node_taint", name=node, taints=["maintenance=now:NoExecute"])["evictions"] == []


def test_concurrent_writers_on_one_node_all_apply(bare_nodes, core_v1, start_module):
    """Five processes write one node at the same moment, three tainting and two labelling it:
    all end up applied. The node is created once every writer is loaded and waiting."""
    prefix = "cw%s-" % uuid.uuid4().hex[:4]
    node = prefix + "0"
    keys = ["writer-%d" % index for index in range(3)]
    processes = [start_module("node_taint", name=node, taints=["%s=x:NoSchedule" % key]) for key in keys]
    processes += [start_module("node_label", name=node, labels={key: "yes"}) for key in keys[:2]]
    wait_at_gate(processes)
    assert bare_nodes(1, prefix=prefix) == [node]
    results = release(processes)
    assert all(result.get("changed") is True for result in results), [result.get("msg") for result in results]
    state = node_state(core_v1, node)
    assert sorted(taint["key"] for taint in state["taints"]) == keys
    assert all(state["labels"].get(key) == "yes" for key in keys[:2])


def test_a_real_409_is_retried_on_a_fresh_read(bare_nodes, core_v1, run_module, monkeypatch):
    """Another writer slips in between the module's read and its write: the API server answers 409,
    the module reads again and applies its taint on top, keeping the other writer's."""
    (node,) = bare_nodes(1)
    kube_api = import_module_utils("k8s_client").KubeApi
    original_patch = kube_api.patch_node
    interloper = {"key": "interloper", "effect": "NoSchedule"}
    interrupted = []

    def patch_after_an_interloper(self, name, operations, dry_run=False):
        if not dry_run and not interrupted:
            interrupted.append(name)
            core_v1.patch_node(name, [{"op": "add", "path": "/spec/taints", "value": [interloper]}],
                               _content_type="application/json-patch+json", _preload_content=False)
        return original_patch(self, name, operations, dry_run)

    monkeypatch.setattr(kube_api, "patch_node", patch_after_an_interloper)
    result = run_module("node_taint", name=node, taints=["ours:NoSchedule"])
    assert interrupted == [node]
    assert result["changed"] is True
    assert node_state(core_v1, node)["taints"] == [interloper, {"key": "ours", "effect": "NoSchedule"}]
    assert result["diff"][0]["before"] == {"taints": [interloper]}
