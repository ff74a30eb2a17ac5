"""NodeResourcesFit: the pod's requests must fit the node's free allocatable; scores by strategy.

Filter checks the pod count, cpu, memory, ephemeral-storage and every extended, hugepages
or prefixed-native resource the pod requests, with upstream's "Insufficient <resource>"
and "Too many pods" reasons; a request larger than the node's whole allocatable cannot be
resolved by preemption. Score uses the scoringStrategy arg: LeastAllocated (default, cpu
and memory weight 1), MostAllocated or RequestedToCapacityRatio.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.names import is_extended_resource_name, qualified_name_error
from kubesched.dra.extended import dra_backed_requests
from kubesched.framework.columns import columns_and_rows, within_exact_range
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PluginArgsError,
    Status,
)
from kubesched.framework.signers import Fragments
from kubesched.framework.types import NodeInfo, PodInfo, Resource
from kubesched.plugins.helper.args import args_dict, check_known_fields, dict_arg, list_arg, resource_specs
from kubesched.plugins.resource_allocation import (
    DEFAULT_RESOURCES,
    allocated_score_cpu_memory,
    allocated_scores_cpu_memory,
    is_cpu_and_memory,
    least_resource_scorer,
    most_resource_scorer,
    node_allocatable_request,
    pod_resource_requests,
    requested_to_capacity_ratio_scorer,
    sign_resources,
    validate_shape,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
PRE_FILTER_STATE_KEY = "PreFilterNodeResourcesFit"
DRA_BACKED_STATE_KEY = "PreFilterNodeResourcesFit/DRA"
NONE: frozenset[str] = frozenset()
PRE_SCORE_STATE_KEY = "PreScoreNodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


def validate_resource_weights(resources: list[tuple[str, int]], path: str) -> None:
    for i, (name, weight) in enumerate(resources):
        if weight <= 0 or weight > 100:
            raise PluginArgsError(f"{path}[{i}].weight",
                                  f"Invalid value: {weight}: resource weight of {name} not in valid range (0, 100]")


def insufficient_resources(request: Resource, node: NodeInfo, ignored: frozenset[str] = frozenset(),
                           ignored_groups: frozenset[str] = frozenset(),
                           dra_backed: frozenset[str] = frozenset()) -> list[tuple[str, bool]]:
    """fitsRequest: (reason, unresolvable) for every resource that does not fit."""
    out: list[tuple[str, bool]] = []
    alloc, used = node.allocatable, node.requested
    if len(node.pods) + 1 > alloc.allowed_pod_number:
        out.append((TOO_MANY_PODS, False))
    if not (request.milli_cpu or request.memory or request.ephemeral_storage or request.scalar):
        return out
    if request.milli_cpu > 0 and request.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        out.append(("Insufficient cpu", request.milli_cpu > alloc.milli_cpu))
    if request.memory > 0 and request.memory > alloc.memory - used.memory:
        out.append(("Insufficient memory", request.memory > alloc.memory))
    if request.ephemeral_storage > 0 and request.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        out.append(("Insufficient ephemeral-storage", request.ephemeral_storage > alloc.ephemeral_storage))
    for name in sorted(request.scalar):
        quantity = request.scalar[name]
        if quantity == 0:
            continue
        if is_extended_resource_name(name) and (
                name in ignored or (ignored_groups and name.split("/", 1)[0] in ignored_groups)):
            continue
        capacity = alloc.scalar.get(name, 0)
        if capacity <= 0 and name in dra_backed:
            continue  # shouldDelegateResourceToDRA: DynamicResources allocates a device instead
        if quantity > capacity - used.scalar.get(name, 0):
            out.append((f"Insufficient {name}", quantity > capacity))
    return out


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.dra = handle.dra  # DeviceClasses back extended resources (DRAExtendedResource)
        args = args_dict(args, self.name)
        check_known_fields(args, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"))
        ignored = list_arg(args, "ignoredResources")
        for i, res in enumerate(ignored):
            err = qualified_name_error(str(res))
            if err:
                raise PluginArgsError(f"ignoredResources[{i}]", f"Invalid value: {err}")
        groups = list_arg(args, "ignoredResourceGroups")
        for i, group in enumerate(groups):
            if "/" in str(group):
                raise PluginArgsError(f"ignoredResourceGroups[{i}]",
                                      f"Invalid value: {group!r}: resource group name can't contain '/'")
            err = qualified_name_error(str(group))
            if err:
                raise PluginArgsError(f"ignoredResourceGroups[{i}]", f"Invalid value: {err}")
        self.ignored_resources = frozenset(ignored)
        self.ignored_resource_groups = frozenset(groups)

        strategy = dict_arg(args, "scoringStrategy")
        if strategy is None:
            strategy = {"type": LEAST_ALLOCATED}
        check_known_fields(strategy, ("type", "resources", "requestedToCapacityRatio"), "scoringStrategy.")
        strategy_type = strategy.get("type") or ""
        if strategy_type not in STRATEGIES:
            raise PluginArgsError("scoringStrategy.type",
                                  f"Unsupported value: {strategy_type!r}: supported values: " + ", ".join(STRATEGIES))
        resources = resource_specs(list_arg(strategy, "resources", "scoringStrategy."), "scoringStrategy.resources")
        self.resources = resources or list(DEFAULT_RESOURCES)
        validate_resource_weights(self.resources, "scoringStrategy.resources")
        rtcr = dict_arg(strategy, "requestedToCapacityRatio", "scoringStrategy.")
        if strategy_type == REQUESTED_TO_CAPACITY_RATIO:
            if rtcr is None:
                raise PluginArgsError("scoringStrategy.requestedToCapacityRatio",
                                      "Required value: must be specified when type is RequestedToCapacityRatio")
            check_known_fields(rtcr, ("shape",), "scoringStrategy.requestedToCapacityRatio.")
            shape = validate_shape(rtcr.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape")
            self.scorer = requested_to_capacity_ratio_scorer(self.resources, shape)
        elif rtcr is not None:
            raise PluginArgsError("scoringStrategy.requestedToCapacityRatio",
                                  "Forbidden: must be nil when type is not RequestedToCapacityRatio")
        elif strategy_type == MOST_ALLOCATED:
            self.scorer = most_resource_scorer(self.resources)
        else:
            self.scorer = least_resource_scorer(self.resources)
        self.strategy = strategy_type
        self._fast_cpu_memory = is_cpu_and_memory(self.resources) and strategy_type != REQUESTED_TO_CAPACITY_RATIO

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return sign_resources(pod, self.dra)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, hint=self.is_schedulable_after_pod_delete),
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE,
                             hint=self.is_schedulable_after_node_change),
                # In-place resize (on in 1.37): a running pod that shrinks frees room.
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN)]

    @staticmethod
    def is_schedulable_after_pod_delete(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Skip pods that held no room: neither bound nor nominated."""
        if old is None:
            return True
        return bool((old.get("spec") or {}).get("nodeName") or (old.get("status") or {}).get("nominatedNodeName"))

    def is_schedulable_after_node_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue when the pod fits the node's allocatable (empty) and, for an update, some
        allocatable the pod requests (or the pod count) grew."""
        if new is None:
            return False
        modified = NodeInfo(new)
        request = pod.requests
        if insufficient_resources(request, modified, self.ignored_resources, self.ignored_resource_groups):
            return False
        if old is None:
            return True
        before, after = NodeInfo(old).allocatable, modified.allocatable
        if after.allowed_pod_number > before.allowed_pod_number:
            return True
        if (request.milli_cpu > 0 and after.milli_cpu > before.milli_cpu) or \
                (request.memory > 0 and after.memory > before.memory) or \
                (request.ephemeral_storage > 0 and after.ephemeral_storage > before.ephemeral_storage):
            return True
        return any(quantity and after.scalar.get(name, 0) > before.scalar.get(name, 0)
                   for name, quantity in request.scalar.items())

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        state.write(PRE_FILTER_STATE_KEY, pod.requests)
        if pod.requests.scalar:
            state.write(DRA_BACKED_STATE_KEY, self._dra_backed(pod.requests.scalar))
        return None, None

    def _dra_backed(self, scalar: dict[str, int]) -> frozenset[str]:
        """Requested extended resources a DeviceClass backs (DRAExtendedResource, on in 1.37)."""
        if not self.dra.classes:
            return frozenset()
        return frozenset(dra_backed_requests(scalar, self.dra))

    def _status(self, insufficient: list[tuple[str, bool]]) -> Status:
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(u for _unused, u in insufficient) else Code.UNSCHEDULABLE
        return Status(code, *(reason for reason, _unused in insufficient), plugin=self.name)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        request = state.get(PRE_FILTER_STATE_KEY) or pod.requests
        alloc, used = node_info.allocatable, node_info.requested
        if (not request.scalar and len(node_info.pods) < alloc.allowed_pod_number  # hot path: common pod fits
                and request.milli_cpu <= alloc.milli_cpu - used.milli_cpu
                and request.memory <= alloc.memory - used.memory
                and request.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage):
            return None
        insufficient = insufficient_resources(request, node_info, self.ignored_resources,
                                              self.ignored_resource_groups, state.get(DRA_BACKED_STATE_KEY, NONE))
        return self._status(insufficient) if insufficient else None

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        request = state.get(PRE_FILTER_STATE_KEY) or pod.requests
        cpu, mem, eph = request.milli_cpu, request.memory, request.ephemeral_storage
        plain = not request.scalar
        dra_backed = state.get(DRA_BACKED_STATE_KEY, NONE)
        found = columns_and_rows(self.handle.snapshot().columns, state, nodes) if plain and within_exact_range(cpu, mem, eph) else None
        if found is not None:  # hot path: the fast check as one array expression
            columns, rows = found
            fits = ((columns.pod_count[rows] < columns.alloc_pods[rows])
                    & (cpu <= columns.alloc_cpu[rows] - columns.req_cpu[rows])
                    & (mem <= columns.alloc_mem[rows] - columns.req_mem[rows])
                    & (eph <= columns.alloc_eph[rows] - columns.req_eph[rows]))
            out: list[Status | None] = [None] * len(nodes)
            for i in np.flatnonzero(~fits).tolist():
                insufficient = insufficient_resources(request, nodes[i], self.ignored_resources,
                                                      self.ignored_resource_groups)  # plain: no extended
                out[i] = self._status(insufficient) if insufficient else None
            return out
        out = []
        for node in nodes:  # hot path: the common pod (cpu/memory only) is decided inline
            alloc, used = node.allocatable, node.requested
            if (plain and len(node.pods) < alloc.allowed_pod_number
                    and cpu <= alloc.milli_cpu - used.milli_cpu and mem <= alloc.memory - used.memory
                    and eph <= alloc.ephemeral_storage - used.ephemeral_storage):
                out.append(None)
                continue
            insufficient = insufficient_resources(request, node, self.ignored_resources,
                                                  self.ignored_resource_groups, dra_backed)
            out.append(self._status(insufficient) if insufficient else None)
        return out

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, pod_resource_requests(pod, self.resources, False))
        return None

    def _pod_requests(self, state, pod: PodInfo) -> list[int]:
        pod_requests = state.get(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            pod_requests = pod_resource_requests(pod, self.resources, False)
        return pod_requests

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        pod_requests = self._pod_requests(state, pod)
        if self._fast_cpu_memory:
            return allocated_score_cpu_memory(node_info, pod_requests[0], pod_requests[1], self.resources[0][1],
                                              self.resources[1][1], self.strategy == MOST_ALLOCATED)
        return self.scorer(*node_allocatable_request(node_info, self.resources, pod_requests, False))

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        pod_requests = self._pod_requests(state, pod)
        if self._fast_cpu_memory:
            cpu, mem = pod_requests
            w_cpu, w_mem = self.resources[0][1], self.resources[1][1]
            most = self.strategy == MOST_ALLOCATED
            found = columns_and_rows(self.handle.snapshot().columns, state, nodes) if within_exact_range(cpu, mem) else None
            if found is not None:  # hot path: one array expression over the snapshot's columns
                return allocated_scores_cpu_memory(*found, cpu, mem, w_cpu, w_mem, most).tolist()
            return [allocated_score_cpu_memory(n, cpu, mem, w_cpu, w_mem, most) for n in nodes]
        resources, scorer = self.resources, self.scorer
        return [scorer(*node_allocatable_request(n, resources, pod_requests, False)) for n in nodes]
