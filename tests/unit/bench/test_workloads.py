"""The workload list: the scale workload, the one hook for objects made before the pods, and
upstream's scheduler_perf workloads in their shapes."""

from __future__ import annotations

import json

import pytest

from tests.bench.operations import Churn, DeletePods
from tests.bench.scheduler_perf import load_extract
from tests.bench.workloads import HIGH_PRIORITY_CLASS, PREEMPTOR_CLASS, WORKLOADS, node_names, select


def _workload(name: str):
    return next(w for w in WORKLOADS if w.name == name)


def test_the_scale_workload_has_15000_nodes_and_30000_pods():
    scale = _workload("SchedulingBasic/15000Nodes")
    assert (scale.node_count, scale.pods, scale.mode) == (15000, 30000, "backlog")
    assert scale in select(["SchedulingBasic"], quick=False)
    assert scale not in select([], quick=True)
    # Measured after the headline workloads, so --stop-after keeps what matters most.
    measured = [w.name for w in select([], quick=False)]
    assert measured.index("SchedulingBasic/15000Nodes") > measured.index("SchedulingCSIPVs/1000Nodes")


def test_objects_before_pods_come_in_creation_order():
    dra = _workload("SchedulingWithResourceClaimTemplate/500Nodes")
    nodes = node_names(dra.nodes)
    groups = dra.objects_before_pods("ns", nodes, dra.init_pods, dra.pods)
    assert [path.rsplit("/", 1)[-1] for path, _bodies in groups] == [
        "deviceclasses", "resourceslices", "resourceclaimtemplates"]
    assert len(groups[1][1]) == len(nodes)

    csi = _workload("CSIPVsSmoke/10Nodes")
    groups = csi.objects_before_pods("ns", node_names(csi.nodes), csi.init_pods, csi.pods)
    assert [path.rsplit("/", 1)[-1] for path, _bodies in groups] == [
        "csinodes", "persistentvolumes", "persistentvolumeclaims"]
    volumes, claims = groups[1][1], groups[2][1]
    assert len(claims) == csi.init_pods + csi.pods
    assert [c["spec"]["volumeName"] for c in claims] == [v["metadata"]["name"] for v in volumes]


def test_no_workload_uses_a_second_hook():
    for workload in WORKLOADS:
        assert not hasattr(workload, "storage") and not hasattr(workload, "cluster_objects")


# Upstream's own workloads: each bench workload that names a scheduler_perf workload has its
# shape, read from upstream's configs and templates (tests/bench/scheduler_perf.py).
EXTRACT = load_extract()
UPSTREAM = {(entry["config"], entry["name"]): entry for entry in EXTRACT["workloads"]}
BASE_NODE = {"pods": "110", "cpu": "4", "memory": "32Gi"}  # makeBaseNode, for createNodes without a template
BASE_POD = {"metadata": {}, "spec": {"containers": [{  # MakePodSpec, for createPods without a template
    "ports": [{"containerPort": 80}], "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}
CLASS_VALUES = dict([HIGH_PRIORITY_CLASS, PREEMPTOR_CLASS])


def _count(op: dict) -> int:
    return op.get("count") or op.get("countParam") or 0


def _go_index(text: str) -> str:
    return text.replace("{{.Index}}", "{index}")


def _requests(container: dict) -> dict:
    return {_go_index(key): str(value) for key, value in ((container.get("resources") or {}).get("requests") or {}).items()}


def _same_pod(ours: dict, template: dict, node_name: str = "") -> None:
    """The fields a scheduler reads, upstream's template against the bench's pod."""
    spec, theirs = ours["spec"], template["spec"]
    assert [_requests(c) for c in spec["containers"]] == [
        {key.format(index=0): value for key, value in _requests(c).items()} for c in theirs["containers"]]
    assert [bool(c.get("ports")) for c in spec["containers"]] == [bool(c.get("ports")) for c in theirs["containers"]]
    assert CLASS_VALUES.get(spec.get("priorityClassName"), 0) == theirs.get("priority", 0)
    assert spec.get("schedulingGates") == theirs.get("schedulingGates")
    assert ours["metadata"].get("finalizers") == template["metadata"].get("finalizers")
    affinity = json.dumps(theirs.get("affinity")).replace('"scheduler-perf-node"', json.dumps(node_name))
    assert json.dumps(spec.get("affinity")) == affinity


def _same_object(build, template: dict) -> None:
    path, body = build(0, "ns", "bench-scheduler")
    assert body["kind"] == template["kind"] and path.endswith("/" + template["kind"].lower() + "s")
    if template["kind"] == "Pod":
        _same_pod(body, template)
    elif template["kind"] == "Node":
        assert body["status"]["capacity"]["pods"] == template["status"]["capacity"]["pods"]
    else:
        assert body["spec"] == template["spec"]


@pytest.mark.parametrize("workload", [w for w in WORKLOADS if w.upstream], ids=lambda w: w.name)
def test_upstream_workloads_have_upstreams_shape(workload):
    entry = UPSTREAM[(workload.upstream.config, workload.name)]
    assert workload.upstream.threshold == entry["threshold"]
    # Both schedulers run with their defaults: the variant must be the one upstream runs with them.
    assert all(EXTRACT["gateDefaults"][gate] == value for gate, value in entry["featureGates"].items())
    ops = entry["ops"]
    node_ops = [op for op in ops if op["opcode"] == "createNodes" and _count(op)]
    assert [(group.count, str(group.pods), group.cpu, group.memory) for group in workload.nodes] == [
        (_count(op), *(str((op.get("nodeTemplate") or {"status": {"capacity": BASE_NODE}})["status"]["capacity"][key])
                       for key in ("pods", "cpu", "memory"))) for op in node_ops]
    for group, op in zip(workload.nodes, node_ops):
        template = op.get("nodeTemplate") or {"metadata": {}, "status": {"capacity": BASE_NODE}}
        extended = [_go_index(key) for key in template["status"]["capacity"] if key not in BASE_NODE]
        assert ([group.resource_per_node] if group.resource_per_node else []) == extended
        labels = {k: v for k, v in (template["metadata"].get("labels") or {}).items() if k != "kubernetes.io/hostname"}
        assert dict(group.labels) == labels and group.zones == 0 and not group.taints
    node = node_names(workload.nodes)[0]
    pod_ops = [(index, op) for index, op in enumerate(ops) if op["opcode"] == "createPods"]
    measured = [op for _index, op in pod_ops if op.get("collectMetrics")]
    pending = [op for _index, op in pod_ops if op.get("skipWaitToCompletion")]
    bound = [op for _index, op in pod_ops if not op.get("collectMetrics") and not op.get("skipWaitToCompletion")]
    assert [_count(op) for op in measured] == [workload.pods]
    _same_pod(workload.measured_pod(0, "bench-scheduler"), measured[0].get("podTemplate", BASE_POD), node)
    assert sum(_count(op) for op in bound) == workload.init_pods
    for op in bound:
        _same_pod(workload.init_pod(0), op.get("podTemplate", BASE_POD), node)
    assert [_count(op) for op in pending] == [count for count, _build in workload.unmeasured_pods]
    for op, (_number, build) in zip(pending, workload.unmeasured_pods):
        _same_pod(build(0, "bench-scheduler"), op.get("podTemplate", BASE_POD), node)
    churns = [op for op in ops if op["opcode"] == "churn"]
    deletions = [op for op in ops if op["opcode"] == "deletePods"]
    assert [type(operation) for operation in workload.operations] == [Churn] * len(churns) + [DeletePods] * len(deletions)
    for op, churn in zip(churns, workload.operations):
        assert (churn.mode, churn.interval_s, len(churn.templates)) == (
            op["mode"], op["intervalMilliseconds"] / 1000, len(op["templates"]))
        assert op.get("number", 0) in ((1,) if churn.mode == "recreate" else (0,))
        for build, template in zip(churn.templates, op["templates"]):
            _same_object(build, template)
    for op, deletion in zip(deletions, workload.operations[len(churns):]):
        assert deletion.per_second == op["deletePodsPerSecond"]
        # upstream deletes the pods of namespace-<i>: those the i-th operation created
        target = ops[int(op["namespace"].rsplit("-", 1)[1])]
        names = deletion.names()
        assert len(names) == _count(target)
        victim = (workload.init_pod(0) if target in bound else workload.unmeasured_pods[0][1](0, "s"))["metadata"]["name"]
        assert names[0] == victim


def test_the_bench_has_every_misc_and_preemption_threshold_workload_upstream_runs_with_default_gates():
    defaults = EXTRACT["gateDefaults"]
    wanted = {(entry["config"], entry["name"]) for entry in EXTRACT["workloads"]
              if entry["config"].split("/")[0] in ("misc", "default_preemption")
              and all(defaults[gate] == value for gate, value in entry["featureGates"].items())}
    assert wanted == {(w.upstream.config, w.name) for w in WORKLOADS if w.upstream}


def test_gang_workloads_have_scheduler_perfs_shape_and_both_schedulers_get_their_gate(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from tests.bench import schedulers

    gangs = {w.name: w for w in WORKLOADS if w.name.startswith("GangScheduling/")}
    assert sorted(gangs) == ["GangScheduling/1000Nodes_250GangsOf8", "GangScheduling/5000Nodes_1000Gangs_3000Pods",
                             "GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup"]
    big = gangs["GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup"]
    (path, groups), = big.objects("bench")
    assert path == "/apis/scheduling.k8s.io/v1beta1/namespaces/bench/podgroups"
    assert [(g["metadata"]["name"], g["spec"]["schedulingPolicy"]["gang"]["minCount"]) for g in groups] == [
        ("gang-0", 1000), ("gang-1", 1000), ("gang-2", 1000)]
    members = [big.measured_pod(i, "s")["spec"]["schedulingGroup"]["podGroupName"] for i in (0, 999, 1000, 2999)]
    assert members == ["gang-0", "gang-0", "gang-1", "gang-2"]
    assert big.node_count == 5000 and big.pods == 3000 and big.api_runtime_config == "scheduling.k8s.io/v1beta1=true"

    monkeypatch.setattr(schedulers, "KUBE_SCHEDULER", __file__)
    monkeypatch.setattr(schedulers, "KUBESCHED", __file__)
    cluster = SimpleNamespace(kubeconfig=str(tmp_path / "kubeconfig"))
    gates = dict(big.feature_gates)
    upstream = schedulers.command_line("kube-scheduler", cluster, str(tmp_path), "s", 50, 100, workload_gates=gates)
    ours = schedulers.command_line("kubesched", cluster, str(tmp_path), "s", 50, 100, workload_gates=gates,
                                   kubesched_feature_gates={"OpportunisticBatching": False})
    assert "--feature-gates=GenericWorkload=true" in upstream
    assert "--feature-gates=GenericWorkload=true,OpportunisticBatching=false" in ours
    plain = schedulers.command_line("kube-scheduler", cluster, str(tmp_path), "s", 50, 100)
    assert not any(arg.startswith("--feature-gates") for arg in plain)
