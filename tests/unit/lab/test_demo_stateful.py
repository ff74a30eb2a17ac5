"""lab/demo_stateful.py: the S10 table reads replicas, claims and PVs from the API and flags a
replica that is not running beside the PV its claim is bound to."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lab_fakes import FakeCoreV1

from lab import demo_stateful


def pv(name: str, node: str, storage_class: str = demo_stateful.STORAGE_CLASS):
    return SimpleNamespace(metadata=SimpleNamespace(name=name), spec=SimpleNamespace(storage_class_name=storage_class),
                           raw=demo_stateful.local_volume(node) | {"metadata": {"name": name}})


def cluster(placements: dict[int, tuple[str, str]], phase: str = "Running", claim_phase: str = "Bound"):
    """placements: replica index -> (pod's node, node of the PV its claim is bound to)."""
    pods, claims, volumes = [], [], []
    for i, (node, pv_node) in placements.items():
        pods.append(SimpleNamespace(metadata=SimpleNamespace(name=f"db-{i}"), spec=SimpleNamespace(node_name=node),
                                    status=SimpleNamespace(phase=phase)))
        claims.append(SimpleNamespace(metadata=SimpleNamespace(name=f"data-db-{i}"),
                                      spec=SimpleNamespace(volume_name=demo_stateful.pv_name(pv_node)),
                                      status=SimpleNamespace(phase=claim_phase)))
    volumes = [pv(demo_stateful.pv_name(n), n) for n in demo_stateful.PV_NODES]
    namespace = demo_stateful.NAMESPACE
    return FakeCoreV1({namespace: pods}, claims={namespace: claims}, volumes=volumes)


ONE_PER_PV_NODE = {0: ("demo-node-1", "demo-node-1"), 1: ("demo-node-0", "demo-node-0"),
                   2: ("demo-node-2", "demo-node-2")}


def test_each_replica_beside_its_bound_pv_is_as_expected():
    found = demo_stateful.replicas(cluster(ONE_PER_PV_NODE))
    assert [(r.pod, r.node, r.pv, r.pv_node) for r in found] == [
        ("db-0", "demo-node-1", "demo-local-demo-node-1", "demo-node-1"),
        ("db-1", "demo-node-0", "demo-local-demo-node-0", "demo-node-0"),
        ("db-2", "demo-node-2", "demo-local-demo-node-2", "demo-node-2")]
    assert demo_stateful.problems(found) == []
    table = demo_stateful.render(found)
    assert "REPLICA  NODE" in table and "PV NODE" in table and "!" not in table


@pytest.mark.parametrize("placements, phase, claim_phase, problem", [
    ({**ONE_PER_PV_NODE, 2: ("demo-node-notready-0", "demo-node-2")}, "Running", "Bound", "db-2 is on demo-node-notready-0"),
    (ONE_PER_PV_NODE, "Pending", "Bound", "db-0 is on demo-node-1 (Pending)"),
    (ONE_PER_PV_NODE, "Running", "Pending", "claim data-db-0 Pending"),
    ({0: ONE_PER_PV_NODE[0], 1: ONE_PER_PV_NODE[1]}, "Running", "Bound", "db-2 is on (Pending)"),
])
def test_a_replica_off_its_pv_or_not_running_is_named(placements, phase, claim_phase, problem):
    found = demo_stateful.replicas(cluster(placements, phase, claim_phase))
    problems = demo_stateful.problems(found)
    assert any(problem in p for p in problems), problems
    assert "\n! " in demo_stateful.render(found)


def test_the_manifests_ask_what_s10_says():
    sts = demo_stateful.statefulset()
    assert sts["spec"]["replicas"] == 3
    template = sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert template["storageClassName"] == demo_stateful.STORAGE_CLASS
    assert demo_stateful.storage_class()["volumeBindingMode"] == "WaitForFirstConsumer"
    assert [demo_stateful.pv_node_of(demo_stateful.local_volume(n)) for n in demo_stateful.PV_NODES] == \
        list(demo_stateful.PV_NODES)
