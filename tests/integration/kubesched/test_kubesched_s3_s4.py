"""Dedicated nodes (selectors, affinity operators, tolerations) and resources through
kubesched. Pods arrive one at a time, as users create them; where two nodes tie, either is
accepted (both kube-scheduler and kubesched pick at random). The messages are the ones the
pinned kube-scheduler writes for the same pods on the same nodes."""

import json
import uuid

import pytest
from placement_agreement import dedicated, pod_body, resources

DEDICATED_EXPECTED = {
    "blue-dedicated": {"blue"},
    "no-toleration-blue-affinity": set(),
    "selector-large": {"large-a", "large-b"},
    "notin-large": {"small-a", "plain"},
    "exists-ssd": {"large-a", "small-a"},
    "doesnotexist-size": {"plain"},
    "gt-gen-3": {"large-b", "plain"},
    "lt-gen-3": {"small-a"},  # soft (gen 1) fits too, but PreferNoSchedule steers away
    "preferred-small": {"small-a"},
    "tolerate-everything": {"blue"},
    "empty-effect": {"blue", "plain"},
    "prefer-no-schedule-a": {"small-a"},
    "prefer-no-schedule-b": {"small-a"},
    "nowhere": set(),
}
DEDICATED_UNSCHEDULABLE = {
    "no-toleration-blue-affinity": "0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 node(s) didn't "
                                   "match Pod's node affinity/selector. preemption: 0/6 nodes are available: 6 "
                                   "Preemption is not helpful for scheduling.",
    # TaintToleration filters before NodeAffinity, so the tainted node reports its taint.
    "nowhere": "0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 node(s) didn't match Pod's node "
               "affinity/selector. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling.",
}
# r0 2 cpu/4Gi, r1 4/8Gi, r2 4/16Gi, r3 8/32Gi. The first pod ties between r2 and r3 (both
# score 98 on LeastAllocated and 99 on BalancedAllocation), so later placements vary; the
# outcomes do not.
# More than any node's allocatable is unresolvable, so preemption is "not helpful".
RESOURCES_UNSCHEDULABLE = {
    "too-much-cpu": "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: 4 "
                    "Preemption is not helpful for scheduling.",
    "too-much-memory": "0/4 nodes are available: 4 Insufficient memory. preemption: 0/4 nodes are available: 4 "
                       "Preemption is not helpful for scheduling.",
}


def make_nodes(core_v1, nodes_fixture, specs):
    """Workload nodes named <prefix><name>, with the labels and taints the workload gives."""
    prefix = f"w{uuid.uuid4().hex[:4]}-"
    for spec in specs:
        nodes_fixture(1, prefix=f"{prefix}{spec['name']}-", cpu=spec.get("cpu", "4"),
                      memory=spec.get("memory", "16Gi"), zones=0, labels=spec.get("labels"),
                      taints=spec.get("taints"))
    return lambda node: node[len(prefix):].rsplit("-", 1)[0] if node else ""


def place_one_by_one(core_v1, namespace, scheduler, pods):
    """Create pods one at a time; each one's node ("" when unschedulable) and message."""
    from placement_agreement import outcome

    placed = {}
    for spec in pods:
        body = pod_body(spec, scheduler, "")
        body["spec"]["nodeSelector"].pop("kubesched.io/placement-run")
        if not body["spec"]["nodeSelector"]:
            del body["spec"]["nodeSelector"]
        core_v1.create_namespaced_pod(namespace, body, _preload_content=False)
        result = outcome(core_v1, namespace, [spec["name"]], only=spec["name"])
        assert spec["name"] in result, f"{spec['name']} was neither bound nor reported unschedulable"
        placed.update(result)
    return placed


@pytest.fixture
def scheduler(run_kubesched):
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    run_kubesched({"profiles": [{"schedulerName": name}]})
    return name


def test_dedicated_nodes_selectors_and_affinity(scheduler, nodes, core_v1, namespace):
    node_specs, pods = dedicated()
    short = make_nodes(core_v1, nodes, node_specs)
    pods.append({"name": "only-soft", "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gen", "operator": "In", "values": ["1"]}]}]}}}})
    placed = place_one_by_one(core_v1, namespace, scheduler, pods)
    for name, allowed in DEDICATED_EXPECTED.items():
        node = short(placed[name]["node"])
        if allowed:
            assert node in allowed, f"{name} went to {node!r}, expected one of {sorted(allowed)}"
        else:
            assert node == "" and placed[name]["message"] == DEDICATED_UNSCHEDULABLE[name], name
    assert short(placed["only-soft"]["node"]) == "soft"  # PreferNoSchedule steers, never blocks


def test_requests_fit_or_are_refused_as_upstream_words_it(scheduler, nodes, core_v1, namespace):
    node_specs, pods = resources()
    short = make_nodes(core_v1, nodes, node_specs)
    placed = place_one_by_one(core_v1, namespace, scheduler, pods)
    assert short(placed["m100"]["node"]) in {"r2", "r3"}
    for name, result in placed.items():
        if name in RESOURCES_UNSCHEDULABLE:
            assert result["node"] == "" and result["message"] == RESOURCES_UNSCHEDULABLE[name], name
        else:
            assert short(result["node"]) in {"r0", "r1", "r2", "r3"}, name
    # Every quantity form and the init/sidecar rules were understood: 8 cpu of fillers, the
    # 3-cpu init container and the sidecar all found room without overcommitting any node.
    requested = {}
    for name, result in placed.items():
        if result["node"]:
            pod = json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)
            cpu = sum(float(c["resources"]["requests"]["cpu"].rstrip("m")) / (1000 if c["resources"]["requests"][
                "cpu"].endswith("m") else 1) for c in pod["spec"]["containers"] + [
                c for c in pod["spec"].get("initContainers") or () if c.get("restartPolicy") == "Always"])
            requested[short(result["node"])] = requested.get(short(result["node"]), 0) + cpu
    capacity = {spec["name"]: float(spec["cpu"]) for spec in node_specs}
    assert all(requested[n] <= capacity[n] for n in requested), requested


def test_limitrange_defaults_and_pod_overhead_count(scheduler, nodes, core_v1, api_client, namespace):
    from kubernetes import client

    nodes(1, cpu="1", zones=0)
    core_v1.create_namespaced_limit_range(namespace, {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "400m"}, "default": {"cpu": "400m"}}]}},
        _preload_content=False)
    runtime_class = f"{scheduler}-overhead"
    client.NodeV1Api(api_client).create_runtime_class({"metadata": {"name": runtime_class}, "handler": "fake",
                                                       "overhead": {"podFixed": {"cpu": "250m"}}},
                                                      _preload_content=False)
    try:
        place_one_by_one(core_v1, namespace, scheduler, [{"name": "defaulted-1"}, {"name": "defaulted-2"}])
        # 2 x 400m defaulted requests are on the node: 200m left.
        placed = place_one_by_one(core_v1, namespace, scheduler, [
            {"name": "small-with-overhead", "runtimeClassName": runtime_class,
             "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                             "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}}]}])
        pod = json.loads(core_v1.read_namespaced_pod("defaulted-1", namespace, _preload_content=False).data)
        assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "400m"
        assert placed["small-with-overhead"]["node"] == ""  # 100m + 250m overhead > 200m left
        assert placed["small-with-overhead"]["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    finally:
        client.NodeV1Api(api_client).delete_runtime_class(runtime_class, _preload_content=False)
