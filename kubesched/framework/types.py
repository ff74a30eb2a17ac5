"""Lean views of pods and nodes built straight from the API's JSON.

The kubernetes client's model objects are slow to build, so the cache keeps raw JSON dicts
and these slotted views of the fields scheduling needs. Hot path: written for speed.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Callable

from kubesched.api.names import is_extended_resource_name
from kubesched.api.taint import Taint, Toleration
from kubesched.framework.quantity import int_value, milli_value

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# Defaults used only for scoring when a container requests nothing (upstream's
# DefaultMilliCPURequest and DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def is_pod_level_resource(name: str) -> bool:
    """resourcehelper.IsSupportedPodLevelResource: cpu, memory and hugepages-*."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


class Resource:
    """Quantities scheduling compares: milli-CPU, bytes, pod count and extended resources."""

    __slots__ = ("milli_cpu", "memory", "ephemeral_storage", "allowed_pod_number", "scalar")

    def __init__(self, milli_cpu: int = 0, memory: int = 0, ephemeral_storage: int = 0,
                 allowed_pod_number: int = 0, scalar: dict[str, int] | None = None):
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral_storage = ephemeral_storage
        self.allowed_pod_number = allowed_pod_number
        self.scalar = scalar if scalar is not None else {}

    @classmethod
    def from_list(cls, resources: dict[str, Any] | None) -> "Resource":
        r = cls()
        if resources:
            for name, quantity in resources.items():
                r.set(name, quantity)
        return r

    def set(self, name: str, quantity: Any) -> None:
        if name == CPU:
            self.milli_cpu = milli_value(quantity)
        elif name == MEMORY:
            self.memory = int_value(quantity)
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = int_value(quantity)
        elif name == PODS:
            self.allowed_pod_number = int_value(quantity)
        elif is_scalar_resource_name(name):
            self.scalar[name] = int_value(quantity)

    def assign(self, name: str, other: "Resource") -> None:
        """Take other's amount of one resource."""
        if name == CPU:
            self.milli_cpu = other.milli_cpu
        elif name == MEMORY:
            self.memory = other.memory
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = other.ephemeral_storage
        elif name == PODS:
            self.allowed_pod_number = other.allowed_pod_number
        else:
            self.scalar[name] = other.scalar.get(name, 0)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pod_number
        return self.scalar.get(name, 0)

    def add(self, other: "Resource") -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pod_number += other.allowed_pod_number
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + value

    def sub(self, other: "Resource") -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pod_number -= other.allowed_pod_number
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) - value

    def set_max(self, other: "Resource") -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        for name, value in other.scalar.items():
            if value > self.scalar.get(name, 0):
                self.scalar[name] = value

    def clone(self) -> "Resource":
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage,
                        self.allowed_pod_number, dict(self.scalar))

    def names(self) -> list[str]:
        return [CPU, MEMORY, EPHEMERAL_STORAGE, *self.scalar]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        return (f"Resource(cpu={self.milli_cpu}m, memory={self.memory}, "
                f"ephemeral={self.ephemeral_storage}, pods={self.allowed_pod_number}, {self.scalar})")


def is_scalar_resource_name(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, prefixed native or attachable volumes."""
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    if "kubernetes.io/" in name:
        return True
    return is_extended_resource_name(name)


def _container_requests(container: dict) -> dict:
    return (container.get("resources") or {}).get("requests") or {}


def _with_defaults(requests: dict, defaults: tuple[str, ...]) -> Resource:
    r = Resource.from_list(requests)
    if CPU in defaults and CPU not in requests:
        r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
    if MEMORY in defaults and MEMORY not in requests:
        r.memory = DEFAULT_MEMORY_REQUEST
    return r


def _pod_level_requests(spec: dict) -> dict:
    requests = (spec.get("resources") or {}).get("requests") or {}
    return {name: q for name, q in requests.items() if is_pod_level_resource(name)}


def _requested_names(spec: dict, pod_level: dict) -> set[str]:
    """The keys present in PodRequests' ResourceList (a key counts even when its value is 0)."""
    names = set(pod_level)
    for container in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        names.update(_container_requests(container))
    names.update(spec.get("overhead") or ())
    return names


def _aggregate_containers(spec: dict, defaults: tuple[str, ...],
                          requests_of: Callable[[dict], dict | None]) -> Resource:
    """Containers plus sidecars, or the largest init step (resource helper's aggregation),
    each container's requests given by requests_of."""
    reqs = Resource()
    for container in spec.get("containers") or ():
        reqs.add(_with_defaults(requests_of(container) or {}, defaults))
    sidecars = Resource()
    init_max = Resource()
    for container in spec.get("initContainers") or ():
        creq = _with_defaults(requests_of(container) or {}, defaults)
        if container.get("restartPolicy") == "Always":
            reqs.add(creq)
            sidecars.add(creq)
            candidate = sidecars
        else:
            candidate = creq.clone()
            candidate.add(sidecars)
        init_max.set_max(candidate)
    reqs.set_max(init_max)
    return reqs


def _resize_status(status: dict) -> tuple[dict[str, dict], bool] | None:
    """(container statuses by name, resize infeasible), or None when the status reports no
    resources (then the spec alone counts)."""
    statuses = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            if cs.get("resources") is not None or cs.get("allocatedResources") is not None:
                statuses.setdefault(cs.get("name", ""), cs)
    if not statuses and status.get("allocatedResources") is None:
        return None
    infeasible = False
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodResizePending":
            infeasible = condition.get("reason") == "Infeasible"
            break
    return statuses, infeasible


def _requests_with_resize(spec: dict, defaults: tuple[str, ...], status: dict,
                          statuses: dict[str, dict], infeasible: bool) -> Resource:
    """AggregateContainerRequests with UseStatusResources: max(spec, actuated, allocated)."""
    def spec_requests(container: dict) -> dict | None:
        return None if infeasible else _container_requests(container)

    def allocated(container: dict) -> dict | None:
        cs = statuses.get(container.get("name", ""))
        if cs is not None and cs.get("allocatedResources") is not None:
            return cs["allocatedResources"]
        return spec_requests(container)

    def actuated(container: dict) -> dict | None:
        cs = statuses.get(container.get("name", ""))
        if cs is not None:
            requests = (cs.get("resources") or {}).get("requests")
            if requests is not None:
                return requests
            if cs.get("allocatedResources") is not None:
                return cs["allocatedResources"]
        return spec_requests(container)

    pod_actuated = (status.get("resources") or {}).get("requests")
    if status.get("allocatedResources") is not None and pod_actuated is not None:
        # Pod-level status maps already hold the sum over containers.
        allocated_reqs = Resource.from_list(status["allocatedResources"])
        actuated_reqs = Resource.from_list(pod_actuated)
    else:
        allocated_reqs = _aggregate_containers(spec, defaults, allocated)
        actuated_reqs = _aggregate_containers(spec, defaults, actuated)
    reqs = Resource() if infeasible else _aggregate_containers(spec, defaults, _container_requests)
    reqs.set_max(actuated_reqs)
    reqs.set_max(allocated_reqs)
    return reqs


def compute_pod_requests(spec: dict, non_zero: bool = False, scoring: bool = False,
                         pod_level: bool = True, status: dict | None = None) -> Resource:
    """A pod's effective request, as k8s.io/component-helpers/resource.PodRequests computes it.

    Regular containers add up; restartable (sidecar) init containers run beside them and add
    too; a plain init container needs its own request plus the sidecars started before it;
    the pod needs the larger of the two; pod-level requests (cpu, memory, hugepages) replace
    the container sum; pod overhead is added on top.

    With status (a running pod's), in-place resize counts as in 1.37 (UseStatusResources and
    InPlacePodLevelResourcesVerticalScaling on by default): per resource, the larger of the
    spec, the actuated (status resources) and the allocated requests; when the kubelet found
    the resize infeasible, the spec is left out.

    With non_zero, a container that requests no cpu (memory) counts 100m (200Mi), as
    NodeInfo.NonZeroRequested does: when pod-level requests are set, only for a resource the
    pod requests nowhere. With scoring too, the defaults apply per container regardless of
    pod-level requests, as the NodeResourcesFit scorers compute the incoming pod's request.
    Without pod_level, pod-level requests are ignored (resourcehelper's SkipPodLevelResources).
    """
    pod_level_requests = _pod_level_requests(spec) if pod_level else {}
    defaults: tuple[str, ...] = ()
    if non_zero:
        if scoring or not pod_level_requests:
            defaults = (CPU, MEMORY)
        else:
            present = _requested_names(spec, pod_level_requests)
            defaults = tuple(n for n in (CPU, MEMORY) if n not in present)
    resize = _resize_status(status) if status else None
    if resize is None:  # hot path: a pending pod, or no status resources reported
        reqs = _aggregate_containers(spec, defaults, _container_requests)
    else:
        reqs = _requests_with_resize(spec, defaults, status, *resize)
    for name, quantity in pod_level_requests.items():
        reqs.set(name, quantity)
    if pod_level_requests and resize is not None and status.get("resources") is not None:
        # effectivePodLevelResources: the larger of spec (unless infeasible), actuated, allocated.
        lists = [(status.get("resources") or {}).get("requests") or {}, status.get("allocatedResources") or {}]
        if not resize[1]:
            lists.append(pod_level_requests)
        effective = Resource()
        names = set()
        for resources in lists:
            pod_level_only = {n: q for n, q in resources.items() if is_pod_level_resource(n)}
            names.update(pod_level_only)
            effective.set_max(Resource.from_list(pod_level_only))
        for name in names:
            reqs.assign(name, effective)
    overhead = spec.get("overhead")
    if overhead:
        reqs.add(Resource.from_list(overhead))
    return reqs


TERMINAL_PHASES = ("Succeeded", "Failed")

# upstream's nextGeneration: one counter for every NodeInfo of the process, so a generation
# names one state of one node. A clone keeps its original's generation (same content); any
# change takes a new one. A memo of a node's state (NodeMemos) then keeps the generation it
# was worked out on, not the NodeInfo: holding the NodeInfo kept every replaced clone of
# every node, and the pods on it, alive as long as the memo was not looked up again.
_generations = itertools.count(1)
next_generation = _generations.__next__


def is_terminal(raw: dict) -> bool:
    """A pod that has finished (podutil.IsPodTerminal): its resources count no more."""
    return (raw.get("status") or {}).get("phase") in TERMINAL_PHASES


def assigned(raw: dict) -> bool:
    """A pod bound to a node (upstream assignedPod in eventhandlers.go)."""
    return bool((raw.get("spec") or {}).get("nodeName"))


def parse_time(ts: str | None) -> float:
    if not ts:
        return 0.0
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def host_ports_of(spec: dict) -> list[tuple[str, str, int]]:
    """The (hostIP, protocol, hostPort) a pod spec holds on its node (util.GetHostPorts)."""
    ports = []
    # Only restartable (sidecar) init containers hold their ports for the pod's lifetime.
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for container in sidecars + list(spec.get("containers") or ()):
        for port in container.get("ports") or ():
            host_port = port.get("hostPort") or 0
            if host_port > 0:
                ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", host_port))
    return ports


class PodInfo:
    """A pod, with the fields every cycle reads pre-computed once."""

    __slots__ = ("raw", "uid", "namespace", "name", "key", "labels", "scheduler_name",
                 "priority", "preemption_policy", "node_name", "nominated_node_name",
                 "creation_ts", "requests", "non_zero_requests", "tolerations", "node_selector",
                 "affinity", "has_affinity", "has_required_anti_affinity", "host_ports",
                 "topology_spread_constraints", "scheduling_gates", "images", "phase",
                 "deleting", "resource_version", "initial_attempt_ts", "attempts",
                 "unschedulable_plugins", "pending_plugins", "timestamp", "start_ts",
                 "plugin_cache", "pod_group")

    def __init__(self, raw: dict):
        self.raw = raw
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self.uid: str = meta.get("uid", "")
        self.namespace: str = meta.get("namespace", "default")
        self.name: str = meta.get("name", "")
        self.key = f"{self.namespace}/{self.name}"
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.resource_version: str = meta.get("resourceVersion", "")
        self.creation_ts = parse_time(meta.get("creationTimestamp"))
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        self.priority: int = spec.get("priority") or 0
        self.preemption_policy: str = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        self.node_name: str = spec.get("nodeName") or ""
        self.nominated_node_name: str = status.get("nominatedNodeName") or ""
        self.phase: str = status.get("phase") or ""
        # status.startTime; 0.0 when the pod has not started (preemption treats that as "now").
        self.start_ts = parse_time(status.get("startTime"))
        # Per-pod values a plugin derives once from the spec (parsed affinity terms, ...),
        # keyed by plugin; the spec is immutable for these fields, so they never go stale.
        self.plugin_cache: dict[str, Any] = {}
        self.requests = compute_pod_requests(spec, status=status)
        self.non_zero_requests = compute_pod_requests(spec, non_zero=True, status=status)
        self.tolerations = [Toleration.from_dict(t) for t in spec.get("tolerations") or ()]
        self.node_selector: dict[str, str] = spec.get("nodeSelector") or {}
        self.affinity: dict = spec.get("affinity") or {}
        pod_aff = self.affinity.get("podAffinity") or {}
        anti = self.affinity.get("podAntiAffinity") or {}
        self.has_affinity = bool(pod_aff or anti)
        self.has_required_anti_affinity = bool(
            anti.get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.host_ports: list[tuple[str, str, int]] = host_ports_of(spec)
        self.topology_spread_constraints: list[dict] = spec.get("topologySpreadConstraints") or []
        self.scheduling_gates: list[dict] = spec.get("schedulingGates") or []
        # spec.schedulingGroup.podGroupName (GenericWorkload): '' for a pod of no group.
        group = spec.get("schedulingGroup")
        self.pod_group: str = (group.get("podGroupName") or "") if group else ""
        self.images: list[str] = [c.get("image", "") for c in spec.get("containers") or ()]
        # Queue bookkeeping (upstream's QueuedPodInfo).
        self.timestamp = 0.0
        self.initial_attempt_ts = 0.0
        self.attempts = 0
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()

    def placed_on(self, node_name: str) -> "PodInfo":
        """A PodInfo sharing this one's parsed fields, placed on node_name (what assuming a pod
        does to its spec.nodeName)."""
        copy = PodInfo.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            setattr(copy, slot, getattr(self, slot))
        copy.node_name = node_name
        return copy

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


class ImageState:
    __slots__ = ("size", "num_nodes")

    def __init__(self, size: int, num_nodes: int = 0):
        self.size = size
        self.num_nodes = num_nodes


class NodeInfo:
    """A node and the aggregates of the pods on it, updated incrementally."""

    __slots__ = ("raw", "name", "labels", "taints", "unschedulable", "allocatable", "requested",
                 "non_zero_requested", "pods", "pods_with_affinity",
                 "pods_with_required_anti_affinity", "used_ports", "image_states",
                 "generation", "index", "declared_features")

    def __init__(self, raw: dict | None = None):
        self.raw: dict = {}
        self.name = ""
        self.labels: dict[str, str] = {}
        self.taints: list[Taint] = []
        self.unschedulable = False
        self.allocatable = Resource()
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.pods: dict[str, PodInfo] = {}
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.used_ports: dict[tuple[str, str, int], int] = {}
        self.image_states: dict[str, ImageState] = {}
        self.generation = next_generation()
        self.index = -1
        self.declared_features: frozenset[str] = frozenset()
        if raw is not None:
            self.set_node(raw)

    def set_node(self, raw: dict) -> None:
        self.raw = raw
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self.name = meta.get("name", "")
        self.labels = meta.get("labels") or {}
        self.taints = [Taint.from_dict(t) for t in spec.get("taints") or ()]
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allocatable = Resource.from_list(status.get("allocatable") or status.get("capacity"))
        states: dict[str, ImageState] = {}
        for image in status.get("images") or ():
            for name in image.get("names") or ():
                states[normalized_image_name(name)] = ImageState(image.get("sizeBytes") or 0)
        self.image_states = states
        self.declared_features = frozenset(status.get("declaredFeatures") or ())
        self.generation = next_generation()

    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        self.requested.add(pod.requests)
        self.non_zero_requested.add(pod.non_zero_requests)
        if pod.has_affinity:
            self.pods_with_affinity[pod.uid] = pod
        if pod.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pod.uid] = pod
        for port in pod.host_ports:
            self.used_ports[port] = self.used_ports.get(port, 0) + 1
        self.generation = next_generation()

    def remove_pod(self, pod: PodInfo) -> bool:
        known = self.pods.pop(pod.uid, None)
        if known is None:
            return False
        self.requested.sub(known.requests)
        self.non_zero_requested.sub(known.non_zero_requests)
        self.pods_with_affinity.pop(known.uid, None)
        self.pods_with_required_anti_affinity.pop(known.uid, None)
        for port in known.host_ports:
            left = self.used_ports.get(port, 0) - 1
            if left > 0:
                self.used_ports[port] = left
            else:
                self.used_ports.pop(port, None)
        self.generation = next_generation()
        return True

    def clone(self) -> "NodeInfo":
        c = NodeInfo.__new__(NodeInfo)  # hot path: every slot is set below, no defaults to build
        c.raw = self.raw
        c.name = self.name
        c.labels = self.labels
        c.taints = self.taints
        c.unschedulable = self.unschedulable
        c.allocatable = self.allocatable
        c.requested = self.requested.clone()
        c.non_zero_requested = self.non_zero_requested.clone()
        c.pods = dict(self.pods)
        c.pods_with_affinity = dict(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        c.used_ports = dict(self.used_ports)
        c.image_states = self.image_states
        c.declared_features = self.declared_features
        c.generation = self.generation
        c.index = self.index
        return c

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


def normalized_image_name(name: str) -> str:
    """Add ":latest" when an image name has no tag or digest, as ImageLocality does."""
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in name:
        return name + ":latest"
    return name
