"""The volume plugins against kube-scheduler 1.37.1's own code (VolumeBinding, VolumeZone,
NodeVolumeLimits, VolumeRestrictions) on generated scenarios with PersistentVolumes,
claims, StorageClasses, CSINodes and CSIStorageCapacities.

golden/upstream_1.37.1_volumes.json holds upstream's PreFilter rejections, per-node Filter
statuses and VolumeBinding scores (-1 where Filter rejected the node) for
make_scenarios.py's volume_scenario seeds; golden/README.md says how it was produced.
"""

import importlib.util
import json
from pathlib import Path

import pytest
from plugin_builders import FakeHandle

from kubesched.framework.interface import CycleState
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.node_volume_limits import NodeVolumeLimits
from kubesched.plugins.volume_binding import VolumeBinding
from kubesched.plugins.volume_restrictions import VolumeRestrictions
from kubesched.plugins.volume_zone import VolumeZone

HERE = Path(__file__).parent / "golden"
GOLDEN = json.loads((HERE / "upstream_1.37.1_volumes.json").read_text())
_spec = importlib.util.spec_from_file_location("make_scenarios", HERE / "make_scenarios.py")
make_scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_scenarios)

PLUGINS = {"VolumeBinding": VolumeBinding, "VolumeZone": VolumeZone, "NodeVolumeLimits": NodeVolumeLimits,
           "VolumeRestrictions": VolumeRestrictions}
STORES = {"pvs": "persistentvolumes", "pvcs": "persistentvolumeclaims", "storageClasses": "storageclasses",
          "csiNodes": "csinodes", "csiDrivers": "csidrivers", "csiStorageCapacities": "csistoragecapacities"}


def as_result(status):
    if status is None:
        return None
    return {"code": status.code.name.title().replace("_", ""), "reasons": status.reasons}


def build(seed: int, order: list[str]):
    sc = make_scenarios.volume_scenario(seed)
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in sc["nodes"]}
    for raw in sc["existing"]:
        infos[raw["spec"]["nodeName"]].add_pod(PodInfo(raw))
    nodes = [infos[name] for name in order]
    handle = FakeHandle(nodes)
    for key, resource in STORES.items():
        handle.add(resource, *sc[key])
    return handle, nodes, PodInfo(sc["pod"])


def test_the_scenarios_cover_every_outcome():
    """The generated cases exercise rejections in PreFilter and Filter and scoring, not just passes."""
    reasons = {r for case in GOLDEN for per_node in case["filters"].values() for f in per_node if f
               for r in f["reasons"]} | {r for case in GOLDEN for f in case["preFilter"].values() for r in f["reasons"]}
    for wanted in ("node(s) didn't find available persistent volumes to bind",
                   "node(s) didn't match PersistentVolume's node affinity", "node(s) exceed max volume count",
                   "node(s) had no available volume zone", "pod has unbound immediate PersistentVolumeClaims",
                   "node(s) did not have enough free storage"):
        assert wanted in reasons, wanted
    assert any(score not in (-1, 0) for case in GOLDEN for s in case["scores"].values() for score in s)


@pytest.mark.parametrize("case", GOLDEN, ids=[c["name"] for c in GOLDEN])
def test_volume_plugins_agree_with_upstream(case):
    seed = int(case["name"].split("-")[1])
    handle, nodes, pod = build(seed, case["nodes"])
    for name, cls in PLUGINS.items():
        plugin = cls(None, handle)
        state = CycleState()
        _unused, status = plugin.pre_filter(state, pod, nodes)
        if status is not None and status.is_skip():
            assert name not in case["filters"] and name not in case["preFilter"], f"{name} skipped PreFilter"
            continue
        assert as_result(status) == case["preFilter"].get(name), f"{name} PreFilter"
        if status is not None:
            continue
        filters = [as_result(plugin.filter(state, pod, node)) for node in nodes]
        assert filters == case["filters"][name], f"{name} Filter"
        if name in case["scores"]:
            assert plugin.pre_score(state, pod, nodes) is None
            scores = [-1 if f is not None else plugin.score(state, pod, node) for f, node in zip(filters, nodes)]
            assert scores == case["scores"][name], f"{name} Score"
        else:
            assert plugin.pre_score(state, pod, nodes) is not None if hasattr(plugin, "pre_score") else True
