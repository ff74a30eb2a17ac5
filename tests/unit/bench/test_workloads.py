"""The workload list: the scale workload, and the one hook for objects made before the pods."""

from __future__ import annotations

from tests.bench.workloads import WORKLOADS, node_names, select


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
