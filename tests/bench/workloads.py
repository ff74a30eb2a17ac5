"""The benchmark's workloads, modelled on upstream's scheduler_perf
(test/integration/scheduler_perf/config/performance-config.yaml and its pod templates):
the same pod shapes, node shapes and counts, with the counts the issue asks for."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

from tests.bench.cluster import BENCH_LABEL, NodeGroup

ZONE_KEY = "topology.kubernetes.io/zone"
MEASURED_LABEL = "kubesched.io/bench-measured"
HIGH_PRIORITY_CLASS = ("bench-high-priority", 10)


def pod_manifest(name: str, scheduler_name: str, cpu: str = "100m", memory: str = "500Mi",
                 labels: dict | None = None, **spec) -> dict:
    """scheduler_perf's pod-default.yaml, plus whatever the workload adds to the spec.

    terminationGracePeriodSeconds 0 lets a bound pod vanish at once when deleted (between
    runs, and for preemption victims), since no kubelet confirms a graceful stop.
    """
    resources = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BENCH_LABEL: "true", **(labels or {})}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": resources, "limits": resources}}],
            **spec,
        },
    }


@dataclass(frozen=True)
class Workload:
    """One benchmark scenario.

    measured_pod(i, scheduler_name) builds the i-th pod the scheduler must place; init pods
    are created already bound (spec.nodeName set round-robin), as the cluster's existing load.
    """

    name: str
    nodes: tuple[NodeGroup, ...]
    pods: int
    measured_pod: Callable[[int, str], dict]
    init_pods: int = 0
    init_pod: Callable[[int], dict] | None = None
    mode: str = "backlog"  # or "steady": pods created at rate_per_s while the scheduler runs
    rate_per_s: float = 0.0
    qps_profiles: tuple[str, ...] = ("unthrottled",)
    description: str = ""
    quick: bool = False
    smoke: bool = False  # only when named: the harness's own test
    priority_classes: tuple[tuple[str, int], ...] = field(default=())
    # How long a backlog run may take per pod before it counts as stuck (see runner.run_timeout).
    timeout_per_pod_s: float = 0.2
    # Objects made before any pod, in order: objects_before_pods(namespace, node names, init pods,
    # measured pods) -> [(API collection path, bodies)], e.g. DeviceClasses and ResourceSlices, or
    # CSINodes and one bound claim per pod.
    objects_before_pods: Callable[[str, list[str], int, int], list[tuple[str, list[dict]]]] | None = None
    # kube-controller-manager controllers the workload needs beyond the bench lab's
    # serviceaccount and namespace ones (the same for every scheduler of the run).
    controllers: tuple[str, ...] = ()

    @property
    def node_count(self) -> int:
        return sum(group.count for group in self.nodes)


def _measured(labels: dict | None = None, **spec) -> Callable[[int, str], dict]:
    def build(index: int, scheduler_name: str) -> dict:
        return pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true", **(labels or {})},
                            **spec)
    return build


def _plain_nodes(count: int) -> tuple[NodeGroup, ...]:
    return (NodeGroup(count=count),)


def _default_init_pod(index: int) -> dict:
    return pod_manifest(f"init-{index:06d}", "default-scheduler")


def _low_priority_init_pod(index: int) -> dict:
    # pod-low-priority.yaml: 900m, so four fill a 4-cpu node.
    return pod_manifest(f"init-{index:06d}", "default-scheduler", cpu="900m")


_NODE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-0", "zone-1"]}]}]}}}

_POD_ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}

_TOPOLOGY_SPREAD = [{"maxSkew": 5, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"color": "blue"}}}]

# Taints-and-tolerations mix: 40% plain nodes, 30% dedicated to gpu work, 20% owned by a
# team, 10% spot nodes that only steer (PreferNoSchedule).
_GPU_TAINT = (("key", "dedicated"), ("value", "gpu"), ("effect", "NoSchedule"))
_TEAM_TAINT = (("key", "team"), ("value", "blue"), ("effect", "NoSchedule"))
_SPOT_TAINT = (("key", "spot"), ("value", "true"), ("effect", "PreferNoSchedule"))
_TAINTED_NODES = (
    NodeGroup(count=400, prefix="bench-plain-"),
    NodeGroup(count=300, prefix="bench-gpu-", taints=(_GPU_TAINT,)),
    NodeGroup(count=200, prefix="bench-team-", taints=(_TEAM_TAINT,)),
    NodeGroup(count=100, prefix="bench-spot-", taints=(_SPOT_TAINT,)),
)
_TOLERATION_MIX = (
    [],
    [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    [{"key": "team", "operator": "Exists"}],
    [{"operator": "Exists"}],
)


def _tolerating_pod(index: int, scheduler_name: str) -> dict:
    tolerations = _TOLERATION_MIX[index % len(_TOLERATION_MIX)]
    pod = pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true"})
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    return pod


def _high_priority_pod(index: int, scheduler_name: str) -> dict:
    # pod-high-priority.yaml: 3 cpu, so each needs three low-priority victims on its node.
    return pod_manifest(f"pod-{index:06d}", scheduler_name, cpu="3", labels={MEASURED_LABEL: "true"},
                        priorityClassName=HIGH_PRIORITY_CLASS[0])


# Dynamic Resource Allocation, as scheduler_perf's SchedulingWithResourceClaimTemplateStructured:
# a driver publishes one ResourceSlice per node (lab.fake_dra_driver's GPUs), every pod asks
# for one device of the class through a ResourceClaimTemplate; the resourceclaim controller
# (kube-controller-manager in the lab) creates each pod's claim, the scheduler allocates it.
DRA_API = "/apis/resource.k8s.io/v1"
DRA_CLASS = "bench-gpu.example.com"
DRA_TEMPLATE = "bench-one-gpu"
DRA_DEVICES_PER_NODE = 8


def _dra_objects(namespace: str, nodes: list[str], _init_pods: int, _pods: int) -> list[tuple[str, list[dict]]]:
    from lab.fake_dra_driver import device_class, gpu_slice

    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": DRA_TEMPLATE},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": DRA_CLASS}}]}}}}
    return [(f"{DRA_API}/deviceclasses", [device_class(DRA_CLASS)]),
            (f"{DRA_API}/resourceslices", [gpu_slice(node, DRA_DEVICES_PER_NODE) for node in nodes]),
            (f"{DRA_API}/namespaces/{namespace}/resourceclaimtemplates", [template])]


# SchedulingCSIPVs (scheduler_perf): every pod mounts its own claim, bound to a CSI PV of
# ebs.csi.aws.com (pv-csi.yaml, pvc.yaml), on nodes whose CSINode allows 39 such volumes, so
# VolumeBinding checks a bound claim and NodeVolumeLimits counts attachments per node.
# The PVs carry no claimRef: a claimRef without the claim's UID makes kube-controller-manager's
# PV controller (when the lab runs one) mark the claim Misbound; without one it binds the PV
# to the claim that names it. PVs are made before the claims, so it finds them.
CSI_DRIVER = "ebs.csi.aws.com"
CSI_VOLUME_LIMIT = 39


def claim_name(pod_name: str) -> str:
    return f"{pod_name}-data"


def _with_claim(pod: dict) -> dict:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {
        "claimName": claim_name(pod["metadata"]["name"])}}]
    return pod


def _csi_pv_pod(index: int, scheduler_name: str) -> dict:
    return _with_claim(pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true"}))


def _csi_pv_init_pod(index: int) -> dict:
    return _with_claim(_default_init_pod(index))


def _csi_storage(namespace: str, nodes: list[str], init_pods: int, pods: int) -> list[tuple[str, list[dict]]]:
    label = {BENCH_LABEL: "true"}
    csi_nodes = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node, "labels": label},
                  "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": node,
                                        "allocatable": {"count": CSI_VOLUME_LIMIT}}]}} for node in nodes]
    volumes, claims = [], []
    for pod_name in [f"init-{i:06d}" for i in range(init_pods)] + [f"pod-{i:06d}" for i in range(pods)]:
        claim, volume = claim_name(pod_name), f"bench-pv-{namespace}-{pod_name}"
        volumes.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume, "labels": label},
                        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                                 "persistentVolumeReclaimPolicy": "Retain",
                                 "csi": {"driver": CSI_DRIVER, "fsType": "ext4", "volumeHandle": volume}}})
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": claim, "labels": label,
                                    "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
                       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                                "volumeName": volume}})
    return [("/apis/storage.k8s.io/v1/csinodes", csi_nodes), ("/api/v1/persistentvolumes", volumes),
            (f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claims)]


WORKLOADS: tuple[Workload, ...] = (
    # The headline figures first, so a time-boxed run (--stop-after) measures what matters most.
    Workload("Smoke/20Nodes", _plain_nodes(20), 50, _measured(), qps_profiles=("default", "unthrottled"),
             smoke=True, description="a tiny run that checks the harness works (make test)"),
    Workload("SchedulingBasic/500Nodes", _plain_nodes(500), 1000, _measured(),
             qps_profiles=("default", "unthrottled"), quick=True,
             description="pod-default pods (100m cpu, 500Mi) on plain nodes"),
    Workload("SchedulingBasic/5000Nodes", _plain_nodes(5000), 10000, _measured(),
             description="pod-default pods on plain nodes, the headline figure"),
    Workload("SchedulingNodeAffinity/5000Nodes", _plain_nodes(5000), 5000, _measured(affinity=_NODE_AFFINITY),
             description="required node affinity zone In [zone-0, zone-1]: two thirds of nodes feasible"),
    Workload("SteadyArrival/500Nodes", _plain_nodes(500), 3000, _measured(), mode="steady", rate_per_s=100,
             description="pod-default pods created at 100/s while the scheduler runs; latency from creation"),
    Workload("SchedulingPodAntiAffinity/1000Nodes", _plain_nodes(1000), 1000,
             _measured(labels={"color": "green"}, affinity=_POD_ANTI_AFFINITY),
             description="required pod anti-affinity on kubernetes.io/hostname: one pod per node"),
    Workload("TopologySpreading/1000Nodes", _plain_nodes(1000), 2000,
             _measured(labels={"color": "blue"}, topologySpreadConstraints=_TOPOLOGY_SPREAD),
             init_pods=1000, init_pod=_default_init_pod,
             description="maxSkew 5 over 3 zones, DoNotSchedule, beside 1,000 bound pod-default pods"),
    Workload("TaintsTolerations/1000Nodes", _TAINTED_NODES, 2000, _tolerating_pod,
             description="60% of nodes tainted (NoSchedule gpu/team, PreferNoSchedule spot); "
                         "pods without, with one, and with wildcard tolerations"),
    Workload("Preemption/500Nodes", _plain_nodes(500), 500, _high_priority_pod, init_pods=2000,
             init_pod=_low_priority_init_pod, priority_classes=(HIGH_PRIORITY_CLASS,),
             # Each preemptor waits for three deletions before its binding: kube-scheduler spent
             # 80 s before its first binding in an earlier run, so 0.2 s per pod is too tight.
             timeout_per_pod_s=1.0,
             description="2,000 bound low-priority 900m pods fill the nodes; 3-cpu priority-10 pods preempt"),
    Workload("SchedulingWithResourceClaimTemplate/500Nodes", _plain_nodes(500), 2000,
             _measured(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}]),
             objects_before_pods=_dra_objects, timeout_per_pod_s=0.5, controllers=("resourceclaim-controller",),
             description="each pod claims one of 8 GPUs per node through a ResourceClaimTemplate "
                         "(kube-controller-manager's resourceclaim controller makes each pod's claim)"),
    Workload("SchedulingCSIPVs/1000Nodes", _plain_nodes(1000), 1000, _csi_pv_pod, init_pods=1000,
             init_pod=_csi_pv_init_pod, objects_before_pods=_csi_storage,
             description="each pod mounts its own claim bound to a CSI PV; CSINodes allow 39 volumes per node; "
                         "beside 1,000 bound pods with claims"),
    # Scale: three times the headline cluster. Measured last, since building it (15,000 nodes,
    # 30,000 pods) takes minutes; peak RSS is recorded as for every run.
    Workload("SchedulingBasic/15000Nodes", _plain_nodes(15000), 30000, _measured(),
             description="pod-default pods on 15,000 static nodes: throughput and peak RSS at scale"),
    Workload("CSIPVsSmoke/10Nodes", _plain_nodes(10), 30, _csi_pv_pod, init_pods=10, init_pod=_csi_pv_init_pod,
             objects_before_pods=_csi_storage, smoke=True, description="a tiny SchedulingCSIPVs run (the harness's own check)"),
)


def init_pod_bodies(workload: Workload, node_names: list[str]) -> list[dict]:
    """Init pods placed round-robin, as a scheduler that spreads evenly would place them."""
    if not workload.init_pods or workload.init_pod is None:
        return []
    bodies = []
    for index, node in zip(range(workload.init_pods), itertools.cycle(node_names)):
        body = workload.init_pod(index)
        body["spec"]["nodeName"] = node
        bodies.append(body)
    return bodies


def node_names(groups: tuple[NodeGroup, ...]) -> list[str]:
    """The names lab.fake_nodes.create_nodes gives the groups' nodes."""
    return [f"{group.prefix}{i}" for group in groups for i in range(group.count)]


def select(names: list[str] | None, quick: bool) -> list[Workload]:
    """The workloads a run asks for, by exact name or by name prefix (SchedulingBasic)."""
    chosen = [w for w in WORKLOADS if not quick or w.quick or w.smoke]
    if not names:
        return [w for w in chosen if not w.smoke]
    picked = []
    for name in names:
        matches = [w for w in chosen if w.name == name or w.name.split("/")[0] == name]
        if not matches:
            known = ", ".join(w.name for w in chosen)
            raise ValueError(f"unknown workload {name!r}{' in --quick mode' if quick else ''}; choose from: {known}")
        picked.extend(m for m in matches if m not in picked)
    return [w for w in chosen if w in picked]
