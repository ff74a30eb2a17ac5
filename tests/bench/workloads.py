"""The benchmark's workloads, modelled on upstream's scheduler_perf
(test/integration/scheduler_perf/config/performance-config.yaml and its pod templates):
the same pod shapes, node shapes and counts, with the counts the issue asks for."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

from tests.bench.objects import BENCH_LABEL, NodeGroup
from tests.bench.operations import Churn, DeletePods, Operation

ZONE_KEY = "topology.kubernetes.io/zone"
MEASURED_LABEL = "kubesched.io/bench-measured"
HIGH_PRIORITY_CLASS = ("bench-high-priority", 10)


def pod_manifest(name: str, scheduler_name: str, cpu: str = "100m", memory: str = "500Mi",
                 labels: dict | None = None, resources: dict | None = None, ports: tuple[int, ...] = (80,),
                 **spec) -> dict:
    """scheduler_perf's pod-default.yaml (100m cpu, 500Mi, port 80), plus whatever the workload
    adds to the spec. resources replaces cpu and memory as requests and limits ({} and no
    ports: light-pod.yaml).

    terminationGracePeriodSeconds 0 lets a bound pod vanish at once when deleted (between
    runs, and for preemption victims), since no kubelet confirms a graceful stop.
    """
    resources = {"cpu": cpu, "memory": memory} if resources is None else resources
    container: dict = {"name": "pause", "image": "registry.k8s.io/pause:3.10"}
    if ports:
        container["ports"] = [{"containerPort": port} for port in ports]
    if resources:
        container["resources"] = {"requests": resources, "limits": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BENCH_LABEL: "true", **(labels or {})}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
            **spec,
        },
    }


@dataclass(frozen=True)
class Upstream:
    """The scheduler_perf workload a bench workload reproduces (test/integration/scheduler_perf/
    <config>, testcase/workload as the bench names it) and its threshold: the
    SchedulingThroughput average in pods/s that upstream's CI must reach on its own hardware."""

    config: str
    threshold: float


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
    # What the cluster's controllers make for the pods from those objects (collection paths, with
    # {namespace}): removed with them, e.g. the claims made from a ResourceClaimTemplate.
    objects_made_for_pods: tuple[str, ...] = ()
    # kube-controller-manager controllers the workload needs beyond the bench lab's
    # serviceaccount and namespace ones (the same for every scheduler of the run).
    controllers: tuple[str, ...] = ()
    # Pods made pending before the measured ones and never measured: (count, build(i, schedulerName)),
    # e.g. SchedulingWhileGated's gated pods.
    unmeasured_pods: tuple[tuple[int, Callable[[int, str], dict]], ...] = ()
    # What goes on beside the scheduler from its start until every measured pod is bound
    # (tests/bench/operations.py: churn, deletions).
    operations: tuple[Operation, ...] = ()
    # The scheduler_perf workload this one reproduces in its shape, with upstream's threshold.
    upstream: Upstream | None = None
    # Feature gates both schedulers run with, as scheduler_perf's featureGates, e.g.
    # GenericWorkload for PodGroups; the bench's API server then gets them too, with the API
    # versions they serve (api_runtime_config).
    feature_gates: tuple[tuple[str, bool], ...] = ()
    api_runtime_config: str = ""

    @property
    def node_count(self) -> int:
        return sum(group.count for group in self.nodes)

    def objects(self, namespace: str) -> list[tuple[str, list[dict]]]:
        """objects_before_pods for this workload's nodes and pods ([] without)."""
        if self.objects_before_pods is None:
            return []
        return self.objects_before_pods(namespace, node_names(self.nodes), self.init_pods, self.pods)

    def made_for_pods(self, namespace: str) -> list[str]:
        return [path.format(namespace=namespace) for path in self.objects_made_for_pods]


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


DRA_CLAIMS = f"{DRA_API}/namespaces/{{namespace}}/resourceclaims"
_claiming_pod = _measured(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}])


def _dra_objects(namespace: str, nodes: list[str], _init_pods: int, _pods: int) -> list[tuple[str, list[dict]]]:
    from lab.fake_dra_driver import device_class, gpu_slice

    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": DRA_TEMPLATE},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": DRA_CLASS}}]}}}}
    return [(f"{DRA_API}/deviceclasses", [device_class(DRA_CLASS)]),
            (f"{DRA_API}/resourceslices", [gpu_slice(node, DRA_DEVICES_PER_NODE) for node in nodes]),
            (f"{DRA_API}/namespaces/{namespace}/resourceclaimtemplates", [template])]


# GangScheduling (scheduler_perf podgroup/gangscheduling): PodGroups gang-0, gang-1, ... with
# minCount podsPerGroup, and pods 0..podsPerGroup-1 in gang-0 and so on (gang-pod.yaml: 100m,
# 100Mi, no port), on node-default nodes, both schedulers with GenericWorkload.
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"
GANG_GATES = (("GenericWorkload", True),)
GANG_RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"


def _gang_pod(per_group: int) -> Callable[[int, str], dict]:
    def build(index: int, scheduler_name: str) -> dict:
        return pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true"},
                            resources={"cpu": "100m", "memory": "100Mi"}, ports=(),
                            schedulingGroup={"podGroupName": f"gang-{index // per_group}"})
    return build


def _pod_groups(per_group: int) -> Callable[[str, list[str], int, int], list[tuple[str, list[dict]]]]:
    def build(namespace: str, _nodes: list[str], _init_pods: int, pods: int) -> list[tuple[str, list[dict]]]:
        return [(PODGROUPS.format(namespace=namespace), [
            {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": f"gang-{i}"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": per_group}}}} for i in range(-(-pods // per_group))])]
    return build


def _gang_workload(name: str, groups: int, per_group: int, description: str,
                   nodes: tuple[NodeGroup, ...] | None = None, **more) -> Workload:
    return Workload(name, nodes or (_node_default(5000),), groups * per_group, _gang_pod(per_group),
                    objects_before_pods=_pod_groups(per_group), feature_gates=GANG_GATES,
                    api_runtime_config=GANG_RUNTIME_CONFIG, description=description, **more)


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
    csi_nodes = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
                  "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": node,
                                        "allocatable": {"count": CSI_VOLUME_LIMIT}}]}} for node in nodes]
    volumes, claims = [], []
    for pod_name in [f"init-{i:06d}" for i in range(init_pods)] + [f"pod-{i:06d}" for i in range(pods)]:
        claim, volume = claim_name(pod_name), f"bench-pv-{namespace}-{pod_name}"
        volumes.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                                 "persistentVolumeReclaimPolicy": "Retain",
                                 "csi": {"driver": CSI_DRIVER, "fsType": "ext4", "volumeHandle": volume}}})
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": claim,
                                    "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
                       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                                "volumeName": volume}})
    return [("/apis/storage.k8s.io/v1/csinodes", csi_nodes), ("/api/v1/persistentvolumes", volumes),
            (f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claims)]


# scheduler_perf's workloads that carry a threshold in v1.37.1, in their shapes (counts,
# node and pod templates, churn and deletions; tests/bench/scheduler_perf_1.37.1.json holds
# what upstream's configs say, and tests/unit/bench/test_workloads.py compares). Where
# upstream runs a workload under feature gates, the bench takes the variant whose gates are
# v1.37's defaults, since both schedulers run with their defaults. Upstream creates its pods
# while its scheduler runs and waits for the init pods to be scheduled; the bench starts the
# scheduler on a backlog instead, init pods already bound, and runs the churn and deletions
# from the scheduler's start (tests/bench/operations.py).
PREEMPTOR_CLASS = ("bench-preemptor", 9999999)  # default_preemption/templates/pod-high-priority.yaml
PERF_NODE = NodeGroup(count=1, prefix="scheduler-perf-node-", pods=90000, zones=0)  # node-with-name.yaml
EXTENDED_RESOURCE = "foo.com/bar-{index}"  # misc/templates/node-with-extended-resource.yaml


def _node_default(count: int) -> NodeGroup:
    """node-default.yaml: 4 cpu, 32Gi, 110 pods, no zone."""
    return NodeGroup(count=count, zones=0)


def _light_init_pod(index: int) -> dict:
    return pod_manifest(f"init-{index:06d}", "default-scheduler", resources={}, ports=())


def _init_pod_names(count: int) -> Callable[[], list[str]]:
    return lambda: [f"init-{index:06d}" for index in range(count)]


def _gated_pod(index: int, scheduler_name: str) -> dict:
    return pod_manifest(f"gated-{index:06d}", scheduler_name, resources={}, ports=(),
                        schedulingGates=[{"name": "test.k8s.io/hold"}])


def _finalizer_pod(index: int, scheduler_name: str) -> dict:
    pod = pod_manifest(f"finalizer-{index:06d}", scheduler_name, resources={}, ports=())
    pod["metadata"]["finalizers"] = ["test.k8s.io/finalizer"]
    return pod


def _finalizer_pod_names(count: int) -> Callable[[], list[str]]:
    return lambda: [f"finalizer-{index:06d}" for index in range(count)]


def _daemonset_pod(index: int, scheduler_name: str) -> dict:
    # daemonset-pod.yaml: what a DaemonSet controller makes, pinned to one node by name.
    only_that_node = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_names((PERF_NODE,))[0]]}]}]}}}
    return pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true"}, resources={}, ports=(),
                        affinity=only_that_node)


def _extended_resource_pod(index: int, scheduler_name: str) -> dict:
    return pod_manifest(f"pod-{index:06d}", scheduler_name, labels={MEASURED_LABEL: "true"}, ports=(),
                        resources={EXTENDED_RESOURCE.format(index=index): "1"})


def _large_cpu_pod(index: int, namespace: str, scheduler_name: str) -> tuple[str, dict]:
    # pod-high-priority-large-cpu.yaml: 9 cpu on 4-cpu nodes, so never schedulable, and no
    # preemption can help it.
    return (f"/api/v1/namespaces/{namespace}/pods",
            pod_manifest(f"pod-h-{index:06d}", scheduler_name, cpu="9", priorityClassName=HIGH_PRIORITY_CLASS[0]))


def _preemptor_pod(index: int, namespace: str, scheduler_name: str) -> tuple[str, dict]:
    # default_preemption/templates/pod-high-priority.yaml: 3970m, so it needs every one of the
    # four 900m low-priority pods of a node gone.
    return (f"/api/v1/namespaces/{namespace}/pods",
            pod_manifest(f"pod-high-priority-{index:06d}", scheduler_name, cpu="3970m", ports=(),
                         priorityClassName=PREEMPTOR_CLASS[0]))


def _churn_node(index: int, _namespace: str, _scheduler_name: str) -> tuple[str, dict]:
    # churn/node-default.yaml: room for no pod. Not a bench node (no BENCH_LABEL), so the raw
    # binder never binds to it; the churn deletes it.
    from lab.fake_nodes import node_manifest

    return "/api/v1/nodes", node_manifest(f"node-churn-{index}", cpu="0", memory="0", pods=0, static=True)


def _churn_service(index: int, namespace: str, _scheduler_name: str) -> tuple[str, dict]:
    return (f"/api/v1/namespaces/{namespace}/services",
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"service-churn-{index}"},
             "spec": {"selector": {"app": "foo"}, "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]}})


UPSTREAM_WORKLOADS: tuple[Workload, ...] = (
    Workload("SchedulingBasic/5000Nodes_50000Pods", (_node_default(5000),), 50000, _measured(),
             init_pods=5000, init_pod=_default_init_pod, upstream=Upstream("misc/performance-config.yaml", 790),
             description="pod-default pods beside 5,000 bound ones"),
    Workload("SchedulingWithMixedChurn/5000Nodes_10000Pods", (_node_default(5000),), 10000, _measured(),
             priority_classes=(HIGH_PRIORITY_CLASS,),
             operations=(Churn("recreate", (_churn_node, _large_cpu_pod, _churn_service), 1.0),),
             upstream=Upstream("misc/performance-config.yaml", 710),
             description="pod-default pods while a node with no room, an unschedulable 9-cpu priority-10 pod and a "
                         "Service are created and deleted in turn every second"),
    Workload("Unschedulable/5kNodes/100Init/10kPods", (_node_default(5000),), 10000, _measured(),
             init_pods=100, init_pod=_default_init_pod, priority_classes=(HIGH_PRIORITY_CLASS,),
             operations=(Churn("create", (_large_cpu_pod,), 0.2),),
             upstream=Upstream("default_preemption/performance-config.yaml", 590),
             description="pod-default pods while an unschedulable 9-cpu priority-10 pod arrives every 200 ms; "
                         "beside 100 bound pods"),
    Workload("Unschedulable/5kNodes/20kInit/10kPods", (_node_default(5000),), 10000, _measured(),
             init_pods=20000, init_pod=_default_init_pod, priority_classes=(HIGH_PRIORITY_CLASS,),
             operations=(Churn("create", (_large_cpu_pod,), 0.2),),
             upstream=Upstream("default_preemption/performance-config.yaml", 600),
             description="as above, beside 20,000 bound pods that each failed preemption attempt considers"),
    Workload("SchedulingWhileGated/1Node_10000GatedPods", (PERF_NODE,), 20000, _measured(resources={}, ports=()),
             init_pods=20000, init_pod=_light_init_pod, unmeasured_pods=((10000, _gated_pod),),
             operations=(DeletePods(50, _init_pod_names(20000)),),
             upstream=Upstream("misc/performance-config.yaml", 910),
             description="light pods onto one node while 10,000 gated pods wait and its 20,000 bound pods are "
                         "deleted at 50/s"),
    Workload("SchedulingDeletedPodsWithFinalizers/5000Node_5000DeletingPods", (_node_default(5000),), 5000,
             _measured(resources={}, ports=()), unmeasured_pods=((5000, _finalizer_pod),),
             operations=(DeletePods(100, _finalizer_pod_names(5000), strip_finalizers=True),),
             upstream=Upstream("misc/performance-config.yaml", 830),
             description="light pods behind 5,000 pending pods with a finalizer, deleted at 100/s"),
    Workload("SchedulingDaemonset/15000Nodes", (PERF_NODE, _node_default(15000)), 30000, _daemonset_pod,
             upstream=Upstream("misc/performance-config.yaml", 1100),
             description="DaemonSet-like pods, each pinned by a metadata.name node affinity to one node of 15,001"),
    Workload("PreemptionAsync/5000Nodes_AsyncPreemptionEnabled", (_node_default(5000),), 5000, _measured(),
             init_pods=20000, init_pod=_low_priority_init_pod, priority_classes=(PREEMPTOR_CLASS,),
             operations=(Churn("create", (_preemptor_pod,), 0.2),), timeout_per_pod_s=0.5,
             upstream=Upstream("default_preemption/performance-config.yaml", 570),
             description="pod-default pods while a 3970m priority-9999999 pod arrives every 200 ms and preempts "
                         "the four 900m pods of a node"),
    Workload("SchedulingWithExtendedResource/5000pods_5000nodes_DRAExtendedResourceEnabled",
             (NodeGroup(count=5000, prefix="scheduler-perf-extended-resource-", zones=0,
                        labels=(("node-with-extended-resource", "true"),), resource_per_node=EXTENDED_RESOURCE),),
             5000, _extended_resource_pod, upstream=Upstream("misc/performance-config.yaml", 180),
             description="each pod asks for one unit of foo.com/bar-<i>, which only node i has"),
)


WORKLOADS: tuple[Workload, ...] = (
    # The headline figures first, so a time-boxed run (--stop-after) measures what matters most.
    Workload("Smoke/20Nodes", _plain_nodes(20), 50, _measured(), qps_profiles=("default", "unthrottled"),
             smoke=True, description="a tiny run that checks the harness works (make test)"),
    Workload("SchedulingBasic/500Nodes", _plain_nodes(500), 1000, _measured(),
             qps_profiles=("default", "unthrottled"), quick=True,
             description="pod-default pods (100m cpu, 500Mi) on plain nodes"),
    Workload("SchedulingBasic/5000Nodes_10000Pods", (_node_default(5000),), 10000, _measured(),
             init_pods=1000, init_pod=_default_init_pod, upstream=Upstream("misc/performance-config.yaml", 680),
             description="pod-default pods beside 1,000 bound ones, the headline figure"),
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
    Workload("SchedulingWithResourceClaimTemplate/500Nodes", _plain_nodes(500), 2000, _claiming_pod,
             objects_before_pods=_dra_objects, objects_made_for_pods=(DRA_CLAIMS,), timeout_per_pod_s=0.5,
             controllers=("resourceclaim-controller",),
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
    *UPSTREAM_WORKLOADS,
    # Gangs, as scheduler_perf's podgroup/gangscheduling performance workloads (no threshold there).
    _gang_workload("GangScheduling/1000Nodes_250GangsOf8", 250, 8,
                   "250 PodGroups of 8 (gang minCount 8) on 1,000 plain nodes, GenericWorkload on",
                   nodes=_plain_nodes(1000)),
    _gang_workload("GangScheduling/5000Nodes_1000Gangs_3000Pods", 1000, 3,
                   "1,000 PodGroups of 3 (gang minCount 3) on 5,000 nodes, GenericWorkload on"),
    _gang_workload("GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", 3, 1000,
                   "3 PodGroups of 1,000 (gang minCount 1,000): each placed in one pod group cycle"),
    Workload("CSIPVsSmoke/10Nodes", _plain_nodes(10), 30, _csi_pv_pod, init_pods=10, init_pod=_csi_pv_init_pod,
             objects_before_pods=_csi_storage, smoke=True, description="a tiny SchedulingCSIPVs run (the harness's own check)"),
    Workload("DRASmoke/10Nodes", _plain_nodes(10), 40, _claiming_pod, objects_before_pods=_dra_objects,
             objects_made_for_pods=(DRA_CLAIMS,), timeout_per_pod_s=1.0, controllers=("resourceclaim-controller",),
             smoke=True, description="a tiny SchedulingWithResourceClaimTemplate run (the harness's own check)"),
    _gang_workload("GangSmoke/10Nodes_3Gangs", 3, 3, "a tiny GangScheduling run (the harness's own check)",
                   smoke=True, nodes=_plain_nodes(10)),
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


# `kubesched whatif` at scale (issue 24): measured in-process on a generated cluster, no API
# server, by tests/bench/micro/whatif.py; `make bench` records it beside the workloads above.
WHATIF_WORKLOAD = "WhatIf/5000Nodes_10000Pods"
WHATIF_MODE = "whatif"  # the mode and qps_profile of its records
WHATIF_SIZE = {"nodes": 5000, "running": 10000, "pending": 20}
WHATIF_TARGET_S, WHATIF_TARGET_MB = 30, 1024


def is_whatif_name(name: str) -> bool:
    """--workload names it: its exact name or its prefix."""
    return name in (WHATIF_WORKLOAD, WHATIF_WORKLOAD.split("/", maxsplit=1)[0])


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
