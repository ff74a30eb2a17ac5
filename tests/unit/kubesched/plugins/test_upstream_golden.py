"""kubesched's plugins against kube-scheduler 1.37.1's own plugin code, on random scenarios.

golden/upstream_1.37.1.json holds what upstream's plugins decided for the scenarios that
golden/make_scenarios.py generates (seeded, so they are regenerated here rather than
stored); golden/README.md says how the file was produced.
"""

import copy
import importlib.util
import json
from pathlib import Path

import pytest
from plugin_builders import FakeHandle

from kubesched.backend.trim import trim_node, trim_pod
from kubesched.framework.interface import Code, CycleState, NodeScore
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.default_preemption import DefaultPreemption, pick_one_node_for_preemption
from kubesched.plugins.image_locality import ImageLocality
from kubesched.plugins.inter_pod_affinity import InterPodAffinity
from kubesched.plugins.node_affinity import NodeAffinity
from kubesched.plugins.node_ports import NodePorts
from kubesched.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.plugins.node_unschedulable import NodeUnschedulable
from kubesched.plugins.pod_topology_spread import PodTopologySpread
from kubesched.plugins.taint_toleration import TaintToleration

HERE = Path(__file__).parent / "golden"
GOLDEN = json.loads((HERE / "upstream_1.37.1.json").read_text())
# The generator lives beside the data it describes, as a script, not in a package.
_spec = importlib.util.spec_from_file_location("make_scenarios", HERE / "make_scenarios.py")
make_scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_scenarios)

RTCR = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
    "shape": [{"utilization": 0, "score": 0}, {"utilization": 30, "score": 8}, {"utilization": 100, "score": 3}]}}}
PLUGINS = {
    "TaintToleration": lambda h: TaintToleration(None, h),
    "NodeUnschedulable": lambda h: NodeUnschedulable(None, h),
    "NodePorts": lambda h: NodePorts(None, h),
    "NodeAffinity": lambda h: NodeAffinity(None, h),
    "LeastAllocated": lambda h: NodeResourcesFit(None, h),
    "MostAllocated": lambda h: NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated"}}, h),
    "RequestedToCapacityRatio": lambda h: NodeResourcesFit(RTCR, h),
    "NodeResourcesBalancedAllocation": lambda h: NodeResourcesBalancedAllocation(None, h),
    "ImageLocality": lambda h: ImageLocality(None, h),
    "PodTopologySpread": lambda h: PodTopologySpread(None, h),
    "InterPodAffinity": lambda h: InterPodAffinity(None, h),
}
CODES = {"Unschedulable": Code.UNSCHEDULABLE, "UnschedulableAndUnresolvable": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def trimmed(sc: dict) -> dict:
    sc = copy.deepcopy(sc)
    sc["nodes"] = [trim_node(n) for n in sc["nodes"]]
    sc["existing"] = [trim_pod(p) for p in sc["existing"]]
    sc["pod"] = trim_pod(sc["pod"])
    return sc


# Each scenario runs twice: on the objects as generated, and as the informers store them
# (backend/trim.py), which must not change a single decision.
INFORMER_VIEWS = {"as-created": lambda sc: sc, "trimmed": trimmed}


def build(seed: int, order: list[str], view: str = "as-created"):
    sc = INFORMER_VIEWS[view](make_scenarios.scenario(seed))
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in sc["nodes"]}
    for raw in sc["existing"]:
        infos[raw["spec"]["nodeName"]].add_pod(PodInfo(raw))
    nodes = [infos[name] for name in order]
    handle = FakeHandle(nodes, objects={kind: sc[kind] for kind in
                                        ("namespaces", "services", "replicasets", "statefulsets")})
    return handle, nodes, PodInfo(sc["pod"])


def filter_results(plugin, pod, nodes):
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        _unused, status = plugin.pre_filter(state, pod, nodes)
        if status is not None and status.is_skip():
            return [None] * len(nodes)
        assert status is None or status.is_success(), status
    out = []
    for node in nodes:
        s = plugin.filter(state, pod, node)
        out.append(None if s is None else {"code": s.code, "reasons": s.reasons})
    if hasattr(plugin, "filter_nodes"):  # the runtime's vectorised path must say the same
        batch = [None if s is None else {"code": s.code, "reasons": s.reasons}
                 for s in plugin.filter_nodes(state, pod, nodes)]
        assert batch == out
    return out


def score_results(plugin, pod, nodes):
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, nodes)
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, nodes)
        if status is not None and status.is_skip():
            return None
        assert status is None or status.is_success(), status
    scores = [NodeScore(n.name, plugin.score(state, pod, n)) for n in nodes]
    if hasattr(plugin, "normalize_score"):
        plugin.normalize_score(state, pod, scores)
    return [s.score for s in scores]


@pytest.mark.parametrize("view", INFORMER_VIEWS)
@pytest.mark.parametrize("case", GOLDEN, ids=[c["name"] for c in GOLDEN])
def test_agrees_with_upstream(case, view):
    seed = int(case["name"].split("-")[1])
    handle, nodes, pod = build(seed, case["nodes"], view)
    for name, want in case["filters"].items():
        want = [None if w is None else {"code": CODES[w["code"]], "reasons": w["reasons"]} for w in want]
        assert filter_results(PLUGINS[name](handle), pod, nodes) == want, f"{name} filter"
    for name, want in case["scores"].items():
        assert score_results(PLUGINS[name](handle), pod, nodes) == want, f"{name} score"


PREEMPTION_GOLDEN = json.loads((HERE / "upstream_1.37.1_preemption.json").read_text())
FILTERS = [TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity]


def as_result(status):
    return {"code": status.code.name.title().replace("_", ""), "reasons": status.reasons}


@pytest.mark.parametrize("view", INFORMER_VIEWS)
@pytest.mark.parametrize("case", PREEMPTION_GOLDEN, ids=[c["name"] for c in PREEMPTION_GOLDEN])
def test_preemption_agrees_with_upstream(case, view):
    sc = INFORMER_VIEWS[view](make_scenarios.preemption_scenario(int(case["name"].split("-")[1])))
    infos = [NodeInfo(n) for n in sc["nodes"]]
    by_name = {n.name: n for n in infos}
    for raw in sc["existing"]:
        by_name[raw["spec"]["nodeName"]].add_pod(PodInfo(raw))
    handle = FakeHandle(infos, pdbs=sc["pdbs"], objects={"namespaces": sc["namespaces"]})
    handle.filters = [cls(None, handle) for cls in FILTERS]
    pod = PodInfo(sc["pod"])
    state = CycleState()
    assert handle.run_pre_filters(state, pod) is None
    statuses = {}
    for node in infos:
        status = handle.run_filter_plugins_with_nominated_pods(state, pod, node)
        if status is not None:
            statuses[node.name] = status
    assert {name: as_result(s) for name, s in statuses.items()} == case["statuses"]
    potential = [n for n in infos if n.name in statuses and statuses[n.name].code == Code.UNSCHEDULABLE]
    if not potential:
        assert not case["candidates"]
        return
    plugin = DefaultPreemption(None, handle)
    candidates, node_statuses, errors = plugin.dry_run_preemption(
        state, pod, potential, sc["pdbs"], 0, len(potential))
    assert not errors
    assert {c.name: {"victims": [v.name for v in c.victims], "pdbViolations": c.num_pdb_violations}
            for c in candidates} == case["candidates"]
    assert {name: as_result(s) for name, s in node_statuses.items()} == case["nodeStatus"]
    best = pick_one_node_for_preemption(candidates, plugin.clock())
    assert (best.name if best else "") == case["selected"]
