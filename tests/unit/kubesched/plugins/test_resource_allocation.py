"""The inline cpu/memory fast paths must give exactly the generic scorers' results."""

import random

import pytest
from plugin_builders import make_node, make_pod, place

from kubesched.plugins.helper.integer import go_div
from kubesched.plugins.resource_allocation import (
    DEFAULT_RESOURCES,
    allocated_score_cpu_memory,
    balanced_resource_scorer,
    balanced_score_cpu_memory,
    broken_linear_function,
    least_resource_scorer,
    most_resource_scorer,
    node_allocatable_request,
)


def random_nodes(seed: int, count: int = 300):
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        cpu = rng.choice([0, 1, 250, 1000, 3999, 64000])
        mem = rng.choice([0, 1, 10000, 2**30, 3 * 2**30 + 7])
        node = make_node(f"n{i}", cpu=f"{cpu}m", memory=str(mem), pods=100)
        for j in range(rng.randint(0, 4)):
            reqs = {}
            if rng.random() < 0.7:
                reqs["cpu"] = f"{rng.randint(0, 5000)}m"
            if rng.random() < 0.7:
                reqs["memory"] = str(rng.randint(0, 2**31))
            place(node, make_pod(f"n{i}-{j}", reqs=[reqs]))
        nodes.append(node)
    return nodes


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [(1, 1), (3, 1), (1, 7)])
def test_allocated_fast_path_equals_generic(seed, weights):
    resources = [("cpu", weights[0]), ("memory", weights[1])]
    rng = random.Random(seed)
    pod_requests = [rng.randint(0, 4000), rng.randint(0, 2**31)]
    nodes = random_nodes(seed)
    for most, scorer in ((False, least_resource_scorer(resources)), (True, most_resource_scorer(resources))):
        generic = [scorer(*node_allocatable_request(n, resources, pod_requests, False)) for n in nodes]
        fast = [allocated_score_cpu_memory(n, *pod_requests, *weights, most) for n in nodes]
        assert fast == generic


@pytest.mark.parametrize("seed", range(5))
def test_balanced_fast_path_equals_generic(seed):
    rng = random.Random(seed)
    pod_requests = [rng.randint(1, 4000), rng.randint(0, 2**31)]
    nodes = random_nodes(seed + 100)
    generic = [balanced_resource_scorer(*node_allocatable_request(n, DEFAULT_RESOURCES, pod_requests, True))
               for n in nodes]
    assert [balanced_score_cpu_memory(n, *pod_requests) for n in nodes] == generic


@pytest.mark.parametrize("points, checks", [
    ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9),
                          (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
])
def test_broken_linear_function(points, checks):
    f = broken_linear_function(points)
    for p, want in checks:
        assert f(p) == want, p


@pytest.mark.parametrize("a, b, want", [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (0, 5, 0)])
def test_go_div_truncates_toward_zero(a, b, want):
    assert go_div(a, b) == want
