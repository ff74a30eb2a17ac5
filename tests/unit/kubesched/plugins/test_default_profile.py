"""The default profile's plugins running together in the runtime's Framework (the contract)."""

from kubesched_fakes import FakeClient
from plugin_builders import make_node, make_pod, place

from kubesched.config import parse_config
from kubesched.framework.interface import Code, CycleState
from kubesched.framework.runtime import Framework
from kubesched.framework.snapshot import Snapshot
from kubesched.plugins.registry import REGISTRY

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
HOST = "kubernetes.io/hostname"


def default_framework(nodes, profile=None, **handle):
    cfg = parse_config({**BASE, "profiles": [profile or {}]})
    handle.setdefault("client", FakeClient())
    fwk = Framework(cfg.profiles[0], REGISTRY, **handle)
    fwk.set_snapshot(Snapshot(nodes))
    return fwk


def decide(fwk, pod):
    """PreFilter, Filter, PreScore, Score over all nodes; the best node or the statuses."""
    state = CycleState()
    nodes = fwk.snapshot().node_info_list
    _unused, status, _unused = fwk.run_pre_filter_plugins(state, pod, nodes)
    assert status is None or status.is_success(), status
    feasible, statuses = [], {}
    for node in nodes:
        s = fwk.run_filter_plugins_with_nominated_pods(state, pod, node)
        if s is None:
            feasible.append(node)
        else:
            statuses[node.name] = s
    if not feasible:
        return None, statuses, state
    status = fwk.run_pre_score_plugins(state, pod, feasible)
    assert status is None or status.is_success(), status
    totals = fwk.run_score_plugins(state, pod, feasible)
    best = max(range(len(feasible)), key=lambda i: (totals[i], -i))
    return feasible[best].name, statuses, state


def test_default_profile_has_the_upstream_extension_points():
    fwk = default_framework([])
    assert [p.name for p in fwk.queue_sort_plugins] == ["PrioritySort"]
    assert [p.name for p in fwk.pre_enqueue_plugins] == ["SchedulingGates", "DynamicResources", "DefaultPreemption"]
    # DynamicResources before DefaultPreemption: deallocating an idle claim beats evicting a pod.
    assert [p.name for p in fwk.post_filter_plugins] == ["DynamicResources", "DefaultPreemption"]
    assert [p.name for p in fwk.reserve_plugins] == ["VolumeBinding", "DynamicResources"]
    assert [p.name for p in fwk.pre_bind_plugins] == ["VolumeBinding", "DynamicResources"]
    assert [p.name for p in fwk.bind_plugins] == ["DefaultBinder"]
    assert [p.name for p in fwk.filter_plugins] == [
        "NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
        "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures"]
    assert dict((p.name, w) for p, w in fwk.weighted_score_plugins) == {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
        "InterPodAffinity": 2, "DynamicResources": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1,
        "VolumeBinding": 1}


def test_dedicated_node_with_toleration_and_affinity():
    blue = make_node("node1", cpu="4", memory="8Gi", pods=110, labels={"color": "blue", HOST: "node1"},
                     taints=[{"key": "app", "value": "blue", "effect": "NoSchedule"}])
    other = make_node("node2", cpu="4", memory="8Gi", pods=110, labels={HOST: "node2"})
    fwk = default_framework([blue, other])
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}]}}}
    tolerating = make_pod("t", tolerations=[{"key": "app", "operator": "Equal", "value": "blue",
                                             "effect": "NoSchedule"}], affinity=affinity)
    assert decide(fwk, tolerating)[0] == "node1"
    plain = make_pod("p")
    best, statuses, _unused = decide(fwk, plain)
    assert best == "node2"
    assert statuses["node1"].reasons == ["node(s) had untolerated taint(s)"]
    assert statuses["node1"].plugin == "TaintToleration"


def test_equal_pods_spread_over_equal_nodes():
    nodes = [make_node(f"node{i}", cpu="4", memory="8Gi", pods=110, labels={HOST: f"node{i}"}) for i in range(3)]
    fwk = default_framework(nodes)
    placed = []
    for i in range(6):
        pod = make_pod(f"p{i}", reqs=[{"cpu": "500m", "memory": "512Mi"}])
        best, _unused, _unused = decide(fwk, pod)
        place(fwk.snapshot().get(best), pod)
        placed.append(best)
    assert sorted(placed.count(n.name) for n in nodes) == [2, 2, 2]


def test_preemption_through_the_framework_handle():
    node = make_node("node1", cpu="2", memory="4Gi", pods=110, labels={HOST: "node1"})
    place(node, make_pod("low", priority=1, reqs=[{"cpu": "1500m"}], start_time="2026-01-01T00:00:00Z"))
    client = FakeClient()
    fwk = default_framework([node], client=client)
    pod = make_pod("high", priority=100, reqs=[{"cpu": "1"}])
    best, statuses, state = decide(fwk, pod)
    assert best is None and statuses["node1"].reasons == ["Insufficient cpu"]
    nominated, status = fwk.run_post_filter_plugins(state, pod, statuses)
    assert nominated == "node1" and status.code == Code.SUCCESS
    assert client.deleted() == ["low"]


def test_pod_whose_claim_does_not_exist_waits_with_upstreams_reason():
    fwk = default_framework([make_node("node1", cpu="4", memory="8Gi", pods=110)])
    pod = make_pod("db", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}])
    _unused, status, _unused = fwk.run_pre_filter_plugins(CycleState(), pod, fwk.snapshot().node_info_list)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.plugin == "VolumeRestrictions"
    assert status.message() == 'persistentvolumeclaim "data-db-0" not found'


def test_a_pre_filter_rejection_before_dynamic_resources_ends_in_not_found():
    """kube-scheduler 1.37: DynamicResources' PostFilter needs the state its PreFilter writes;
    when VolumeRestrictions (earlier) rejects, PostFilter fails with "not found" and
    DefaultPreemption never runs (the lab test runs kube-scheduler to show the same text)."""
    fwk = default_framework([make_node("node1", cpu="4", memory="8Gi", pods=110)])
    pod = make_pod("db", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}])
    state = CycleState()
    _unused, status, _unused = fwk.run_pre_filter_plugins(state, pod, fwk.snapshot().node_info_list)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    nominated, post = fwk.run_post_filter_plugins(state, pod, {})
    assert (nominated, post.code, post.message()) == (None, Code.ERROR, "not found")
    # A pod that got through every PreFilter: DynamicResources skipped, preemption runs.
    state = CycleState()
    plain = make_pod("plain", reqs=[{"cpu": "100"}])
    fwk.run_pre_filter_plugins(state, plain, fwk.snapshot().node_info_list)
    _unused, post = fwk.run_post_filter_plugins(state, plain, {})
    assert post.message().startswith("preemption: ")
