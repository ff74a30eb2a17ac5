"""OpportunisticBatching agrees with kube-scheduler v1.37: identical pods, created one at a time
as upstream's batch test does, land on the same nodes under both schedulers, in the two cases
batching covers (the previous node full, so the next of the ranking; the previous node still
free, so rescored). Both run with no default topology spread, the configuration under which
v1.37 signs pods at all; the pods prefer nodes by weight, so no tie leaves the choice to
kube-scheduler's parallel filter order."""

from __future__ import annotations

import uuid

import pytest
from kubesched_lab import pod_manifest, set_taints, wait_for

SCHEDULERS = ("kube-scheduler", "kubesched")
NO_DEFAULT_SPREAD = {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}


def preferring(name: str, scheduler: str, preferred: list[str]) -> dict:
    """upstream's batch test pod: 10 cpu, 4Mi, preferred nodes by name with weights len..1."""
    terms = [{"weight": len(preferred) - i, "preference": {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}} for i, node in enumerate(preferred)]
    return pod_manifest(name, schedulerName=scheduler, terminationGracePeriodSeconds=0,
                        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}},
                        containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "10", "memory": str(4 * 1024 * 1024)}}}])


@pytest.mark.parametrize("max_pods,count,pods,expected", [
    (1, 3, 3, [0, 1, 2]),  # "three pod batch": each node full after one pod, the next of the ranking
    (2, 2, 3, [0, 0, 1]),  # rescoring: the first node takes two pods, then it is full
], ids=["previous node full", "previous node rescored"])
def test_identical_pods_land_where_kube_scheduler_puts_them(run_scheduler, nodes, core_v1, namespace,
                                                            max_pods, count, pods, expected):
    placed = {}
    for kind in SCHEDULERS:
        names = set_taints(core_v1, nodes(count, cpu="100", pods=max_pods, zones=0,
                                          prefix=f"b{kind[-5:]}-{uuid.uuid4().hex[:3]}-"))
        scheduler = run_scheduler(kind, pluginConfig=[NO_DEFAULT_SPREAD])
        placed[kind] = []
        for index in range(pods):
            pod = f"{kind}-{index}"
            core_v1.create_namespaced_pod(namespace, preferring(pod, scheduler, names), _preload_content=False)
            node = wait_for(lambda p=pod: core_v1.read_namespaced_pod(p, namespace).spec.node_name, 30,
                            what=f"{kind}: {pod} bound")
            placed[kind].append(names.index(node))
        for index in range(pods):
            core_v1.delete_namespaced_pod(f"{kind}-{index}", namespace, grace_period_seconds=0)
        for name in names:  # the next run starts from its own nodes only
            core_v1.delete_node(name, _preload_content=False)
    assert placed == {"kube-scheduler": expected, "kubesched": expected}
