"""NodeResourcesBalancedAllocation: favour nodes whose resource usage stays balanced.

The 1.37 score is half fixed and half the change the pod brings to the standard
deviation of the requested fractions of the configured resources (cpu and memory by
default), from plain requests. A pod that requests none of them is not scored.
"""

from __future__ import annotations

from kubesched.framework.columns import columns_and_rows, within_exact_range
from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, PluginArgsError, Status
from kubesched.framework.signers import Fragments
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, list_arg, resource_specs
from kubesched.plugins.resource_allocation import (
    DEFAULT_RESOURCES,
    balanced_resource_scorer,
    balanced_score_cpu_memory,
    balanced_scores_cpu_memory,
    is_cpu_and_memory,
    node_allocatable_request,
    pod_resource_requests,
    sign_resources,
)

PRE_SCORE_STATE_KEY = "PreScoreNodeResourcesBalancedAllocation"


class NodeResourcesBalancedAllocation:
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.dra = handle.dra  # DeviceClasses back extended resources (DRAExtendedResource)
        args = args_dict(args, self.name)
        check_known_fields(args, ("resources",))
        resources = resource_specs(list_arg(args, "resources"), "resources")
        seen: set[str] = set()
        for i, (name, weight) in enumerate(resources):
            if name in seen:
                raise PluginArgsError(f"resources[{i}].name", f"Duplicate value: {name!r}")
            seen.add(name)
            if weight != 1:
                raise PluginArgsError(f"resources[{i}].weight", f"Invalid value: {weight}: must be 1")
        self.resources = resources or list(DEFAULT_RESOURCES)
        self._fast_cpu_memory = is_cpu_and_memory(self.resources)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return sign_resources(pod, self.dra)

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        pod_requests = pod_resource_requests(pod, self.resources, True)
        if not any(pod_requests):
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, pod_requests)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        pod_requests = state.get(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            pod_requests = pod_resource_requests(pod, self.resources, True)
            if not any(pod_requests):
                return 0
        if self._fast_cpu_memory:
            return balanced_score_cpu_memory(node_info, pod_requests[0], pod_requests[1])
        return balanced_resource_scorer(*node_allocatable_request(node_info, self.resources, pod_requests, True))

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        pod_requests = state.get(PRE_SCORE_STATE_KEY)
        if pod_requests is None or not self._fast_cpu_memory:
            return [self.score(state, pod, n) for n in nodes]
        cpu, mem = pod_requests
        found = columns_and_rows(self.handle.snapshot().columns, state, nodes) if within_exact_range(cpu, mem) else None
        if found is not None:  # hot path: one array expression over the snapshot's columns
            return balanced_scores_cpu_memory(*found, cpu, mem).tolist()
        return [balanced_score_cpu_memory(n, cpu, mem) for n in nodes]
