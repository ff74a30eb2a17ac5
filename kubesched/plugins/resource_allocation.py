"""The resource scorers NodeResourcesFit and NodeResourcesBalancedAllocation share.

As upstream's noderesources/resource_allocation.go: for each configured resource, the
node's allocatable, what is already allocated there and what it would be with the pod.
Fit's strategies count the incoming pod's and the nodes' cpu/memory with the non-zero
defaults (100m, 200Mi per container that requests none); BalancedAllocation counts plain
requests. Scorers are hot paths.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from kubesched.dra.extended import dra_backed_requests
from kubesched.dra.manager import DRAManager
from kubesched.framework.columns import NodeColumns
from kubesched.framework.interface import MAX_NODE_SCORE, PluginArgsError
from kubesched.framework.signers import RESOURCES_KEY, Fragments, resources_signer
from kubesched.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NodeInfo,
    PodInfo,
    compute_pod_requests,
    is_scalar_resource_name,
)
from kubesched.plugins.helper.args import check_known_fields, int_arg
from kubesched.plugins.helper.integer import go_div

DEFAULT_RESOURCES: list[tuple[str, int]] = [(CPU, 1), (MEMORY, 1)]
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10

Scorer = Callable[[list[int], list[int], list[int]], int]


def sign_resources(pod: PodInfo, dra: DRAManager) -> Fragments:
    """SignPod of NodeResourcesFit and NodeResourcesBalancedAllocation: the pod's requests. A
    request a DeviceClass backs is allocated through DRA, so such a pod is not signable."""
    scalar = pod.requests.scalar
    if scalar and dra.classes and dra_backed_requests(scalar, dra):
        return None
    return [(RESOURCES_KEY, resources_signer(pod))]


def pod_resource_requests(pod: PodInfo, resources: list[tuple[str, int]], use_requested: bool) -> list[int]:
    """calculatePodResourceRequestList."""
    if use_requested:
        requests = pod.requests
    else:
        requests = pod.plugin_cache.get("ScoringRequests")
        if requests is None:
            # As upstream's Fit scorer: its resourceAllocationScorer never enables pod-level
            # resources, so they are skipped here (BalancedAllocation does count them).
            requests = pod.plugin_cache["ScoringRequests"] = compute_pod_requests(
                pod.raw.get("spec") or {}, non_zero=True, scoring=True, pod_level=False)
    out = []
    for name, _weight in resources:
        if name == CPU:
            out.append(requests.milli_cpu)
        elif name == MEMORY:
            out.append(requests.memory)
        elif name == EPHEMERAL_STORAGE:
            out.append(requests.ephemeral_storage)
        else:
            out.append(requests.scalar.get(name, 0))
    return out


def node_allocatable_request(node: NodeInfo, resources: list[tuple[str, int]], pod_requests: list[int],
                             use_requested: bool) -> tuple[list[int], list[int], list[int]]:
    """calculateNodeAllocatableRequest: (requested with the pod, allocated, allocatable)."""
    n = len(resources)
    requested, allocated, allocatable = [0] * n, [0] * n, [0] * n
    node_requested = node.requested if use_requested else node.non_zero_requested
    for i, (name, _weight) in enumerate(resources):
        pod_request = pod_requests[i]
        if name == CPU:
            cap, used = node.allocatable.milli_cpu, node_requested.milli_cpu
        elif name == MEMORY:
            cap, used = node.allocatable.memory, node_requested.memory
        elif name == EPHEMERAL_STORAGE:
            cap, used = node.allocatable.ephemeral_storage, node.requested.ephemeral_storage
        else:
            if pod_request == 0 and is_scalar_resource_name(name):
                continue
            cap = node.allocatable.scalar.get(name, 0)
            used = node.requested.scalar.get(name, 0) if cap else 0
        if cap == 0:
            continue
        allocatable[i] = cap
        allocated[i] = used
        requested[i] = used + pod_request
    return requested, allocated, allocatable


def least_requested_score(requested: int, capacity: int) -> int:
    return 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def weighted_scorer(resources: list[tuple[str, int]], resource_score: Callable[[int, int], int]) -> Scorer:
    """The weighted integer mean of resource_score over resources the node has (Least/MostAllocated)."""
    weights = [w for _unused, w in resources]

    def score(requested: list[int], _allocated: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for i, cap in enumerate(allocatable):
            if cap == 0:
                continue
            node_score += resource_score(requested[i], cap) * weights[i]
            weight_sum += weights[i]
        return node_score // weight_sum if weight_sum else 0

    return score


def least_resource_scorer(resources: list[tuple[str, int]]) -> Scorer:
    return weighted_scorer(resources, least_requested_score)


def most_resource_scorer(resources: list[tuple[str, int]]) -> Scorer:
    return weighted_scorer(resources, most_requested_score)


def validate_shape(raw: Any, path: str) -> list[tuple[int, int]]:
    """validateFunctionShape: utilization in [0, 100] increasing, score in [0, 10]."""
    if not raw:
        raise PluginArgsError(path, "Required value: at least one point must be specified")
    if not isinstance(raw, list):
        raise PluginArgsError(path, "must be a list of {utilization, score} points")
    shape = []
    for i, point in enumerate(raw):
        if not isinstance(point, dict):
            raise PluginArgsError(f"{path}[{i}]", "must be a mapping with utilization and score")
        check_known_fields(point, ("utilization", "score"), f"{path}[{i}].")
        shape.append((int_arg(point, "utilization", 0, f"{path}[{i}]."), int_arg(point, "score", 0, f"{path}[{i}].")))
    for i in range(1, len(shape)):
        if shape[i - 1][0] >= shape[i][0]:
            raise PluginArgsError(f"{path}[{i}].utilization",
                                  f"Invalid value: {shape[i][0]}: values must be sorted in increasing order")
    for i, (utilization, score) in enumerate(shape):
        if not 0 <= utilization <= 100:
            raise PluginArgsError(f"{path}[{i}].utilization", f"Invalid value: {utilization}: not in valid range [0, 100]")
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise PluginArgsError(f"{path}[{i}].score",
                                  f"Invalid value: {score}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
    return shape


def broken_linear_function(shape: list[tuple[int, int]]) -> Callable[[int], int]:
    """helper.BuildBrokenLinearFunction: linear interpolation between (utilization, score) points."""

    def f(p: int) -> int:
        for i, (utilization, score) in enumerate(shape):
            if p <= utilization:
                if i == 0:
                    return shape[0][1]
                prev_u, prev_s = shape[i - 1]
                return prev_s + go_div((score - prev_s) * (p - prev_u), utilization - prev_u)
        return shape[-1][1]

    return f


def requested_to_capacity_ratio_scorer(resources: list[tuple[str, int]], shape: list[tuple[int, int]]) -> Scorer:
    weights = [w for _unused, w in resources]
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear_function([(u, s * scale) for u, s in shape])

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def score(requested: list[int], _allocated: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for i, cap in enumerate(allocatable):
            if cap == 0:
                continue
            s = resource_score(requested[i], cap)
            if s > 0:
                node_score += s * weights[i]
                weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        return math.floor(node_score / weight_sum + 0.5)  # Go's math.Round for non-negative values

    return score


def balanced_resource_score(requested: list[int], allocatable: list[int]) -> int:
    fractions = []
    total = 0.0
    for i, cap in enumerate(allocatable):
        if cap == 0:
            continue
        fraction = requested[i] / cap
        if fraction > 1:
            fraction = 1.0
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_resource_scorer(requested: list[int], allocated: list[int], allocatable: list[int]) -> int:
    """The 1.37 formula: half the score is the change in balance the pod brings."""
    with_pod = balanced_resource_score(requested, allocatable)
    without_pod = balanced_resource_score(allocated, allocatable)
    half = MAX_NODE_SCORE // 2
    return half + go_div(half + with_pod - without_pod, 2)


def is_cpu_and_memory(resources: list[tuple[str, int]]) -> bool:
    """True for the default resources, which have inline fast paths below."""
    return [name for name, _unused in resources] == [CPU, MEMORY]


def allocated_score_cpu_memory(node: NodeInfo, pod_cpu: int, pod_mem: int, w_cpu: int, w_mem: int,
                               most: bool) -> int:
    """least/most_resource_scorer over [cpu, memory] for one node, inline (same integer arithmetic)."""
    alloc, used = node.allocatable, node.non_zero_requested  # hot path: no intermediate lists
    total = weights = 0
    cap = alloc.milli_cpu
    if cap:
        req = used.milli_cpu + pod_cpu
        if most:
            total += (min(req, cap) * MAX_NODE_SCORE // cap) * w_cpu
        elif req <= cap:
            total += ((cap - req) * MAX_NODE_SCORE // cap) * w_cpu
        weights += w_cpu
    cap = alloc.memory
    if cap:
        req = used.memory + pod_mem
        if most:
            total += (min(req, cap) * MAX_NODE_SCORE // cap) * w_mem
        elif req <= cap:
            total += ((cap - req) * MAX_NODE_SCORE // cap) * w_mem
        weights += w_mem
    return total // weights if weights else 0


def _balance(used_cpu: int, used_mem: int, cap_cpu: int, cap_mem: int) -> int:
    f_cpu = used_cpu / cap_cpu
    f_mem = used_mem / cap_mem
    std = (f_cpu if f_cpu < 1.0 else 1.0) - (f_mem if f_mem < 1.0 else 1.0)
    return int((1 - abs(std / 2)) * MAX_NODE_SCORE)


def balanced_score_cpu_memory(node: NodeInfo, pod_cpu: int, pod_mem: int) -> int:
    """balanced_resource_scorer over [cpu, memory] for one node, inline (same float arithmetic)."""
    alloc, used = node.allocatable, node.requested  # hot path
    cap_cpu, cap_mem = alloc.milli_cpu, alloc.memory
    if not (cap_cpu and cap_mem):
        return MAX_NODE_SCORE // 2 + MAX_NODE_SCORE // 4  # fewer than two fractions: 50 + (50 + 100 - 100) // 2
    diff = (MAX_NODE_SCORE // 2 + _balance(used.milli_cpu + pod_cpu, used.memory + pod_mem, cap_cpu, cap_mem)
            - _balance(used.milli_cpu, used.memory, cap_cpu, cap_mem))
    return MAX_NODE_SCORE // 2 + (diff // 2 if diff >= 0 else -((-diff) // 2))


# -- the cpu/memory fast paths as array expressions over snapshot columns ----------------------
# Same integer and float arithmetic as allocated_score_cpu_memory and
# balanced_score_cpu_memory above, node by node (tests compare them on random nodes).


def allocated_scores_cpu_memory(columns: NodeColumns, rows: np.ndarray, pod_cpu: int, pod_mem: int,
                                w_cpu: int, w_mem: int, most: bool) -> np.ndarray:
    total = np.zeros(len(rows), dtype=np.int64)
    weights = np.zeros(len(rows), dtype=np.int64)
    for cap_column, used_column, pod_request, weight in ((columns.alloc_cpu, columns.nz_cpu, pod_cpu, w_cpu),
                                                         (columns.alloc_mem, columns.nz_mem, pod_mem, w_mem)):
        cap = cap_column[rows]
        req = used_column[rows] + pod_request
        has = cap != 0
        safe_cap = np.where(has, cap, 1)
        if most:
            part = np.minimum(req, cap) * MAX_NODE_SCORE // safe_cap
        else:
            part = np.where(req <= cap, (cap - req) * MAX_NODE_SCORE // safe_cap, 0)
        total += np.where(has, part * weight, 0)
        weights += np.where(has, weight, 0)
    return np.where(weights != 0, total // np.where(weights != 0, weights, 1), 0)


def _balances(used_cpu: np.ndarray, used_mem: np.ndarray, cap_cpu: np.ndarray, cap_mem: np.ndarray) -> np.ndarray:
    std = np.minimum(used_cpu / cap_cpu, 1.0) - np.minimum(used_mem / cap_mem, 1.0)
    return ((1 - np.abs(std / 2)) * MAX_NODE_SCORE).astype(np.int64)  # int() truncates; values are positive


def balanced_scores_cpu_memory(columns: NodeColumns, rows: np.ndarray, pod_cpu: int, pod_mem: int) -> np.ndarray:
    cap_cpu, cap_mem = columns.alloc_cpu[rows], columns.alloc_mem[rows]
    used_cpu, used_mem = columns.req_cpu[rows], columns.req_mem[rows]
    both = (cap_cpu != 0) & (cap_mem != 0)
    safe_cpu, safe_mem = np.where(both, cap_cpu, 1), np.where(both, cap_mem, 1)
    diff = (MAX_NODE_SCORE // 2 + _balances(used_cpu + pod_cpu, used_mem + pod_mem, safe_cpu, safe_mem)
            - _balances(used_cpu, used_mem, safe_cpu, safe_mem))
    half = np.where(diff >= 0, diff // 2, -((-diff) // 2))  # Go's integer division truncates
    return np.where(both, MAX_NODE_SCORE // 2 + half, MAX_NODE_SCORE // 2 + MAX_NODE_SCORE // 4)
