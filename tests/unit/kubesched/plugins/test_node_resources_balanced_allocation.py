import pytest
from plugin_builders import make_node, make_pod, place, run_scores

from kubesched.framework.handle import Handle
from kubesched.framework.interface import PluginArgsError
from kubesched.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation

GPU = "nvidia.com/gpu"
R12 = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]
CPU12 = [{"cpu": "1000m"}, {"cpu": "2000m"}]
WITH_GPU = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}


def node(name, milli_cpu, memory, gpu=None, *pods):
    """upstream's makeNode: milli-CPU and bytes."""
    n = make_node(name, cpu=f"{milli_cpu}m", memory=str(memory), extended={GPU: gpu} if gpu else None)
    for i, reqs in enumerate(pods):
        place(n, make_pod(f"{name}-{i}", reqs=reqs))
    return n


CASES = [
    ("differently sized nodes", R12, None, [node("a", 4000, 10000), node("b", 6000, 10000)], [68, 75]),
    ("pods scheduled with resources", R12, None,
     [node("a", 10000, 20000, None, CPU12), node("b", 10000, 20000, None, R12)], [73, 74]),
    ("pods scheduled, differently sized nodes", R12, None,
     [node("a", 10000, 20000, None, CPU12), node("b", 10000, 50000, None, R12)], [73, 70]),
    ("nodes reach min and max", [{"memory": "2000"}, {"memory": "3000"}], None,
     [node("a", 3000, 5000, None, CPU12), node("b", 3000, 5000)], [100, 50]),
    ("requested at node capacity", CPU12, None,
     [node("a", 6000, 10000, None, CPU12), node("b", 6000, 10000, None, R12)], [62, 62]),
    ("scalar counted when requested", [{"cpu": "0", "memory": "0", GPU: "1"}], WITH_GPU,
     [node("a", 3500, 40000, 8, [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", GPU: "3"}]),
      node("b", 3500, 40000, 8, R12)], [75, 76]),
    ("scalar not counted when not requested", R12, WITH_GPU,
     [node("a", 3500, 40000, 8), node("b", 3500, 40000)], [56, 56]),
]


@pytest.mark.parametrize("name, reqs, args, nodes, want", CASES, ids=[c[0] for c in CASES])
def test_score(name, reqs, args, nodes, want):
    assert run_scores(NodeResourcesBalancedAllocation(args, Handle()), make_pod(reqs=reqs), nodes) == want


def test_best_effort_pod_is_skipped():
    assert run_scores(NodeResourcesBalancedAllocation(None, Handle()), make_pod(), [node("a", 4000, 10000)]) is None
    # Containers without requests: plain requests are zero, so still skipped (no non-zero defaults here).
    assert run_scores(NodeResourcesBalancedAllocation(None, Handle()), make_pod(reqs=[{}]), [node("a", 4000, 10000)]) is None


@pytest.mark.parametrize("args, field, message", [
    ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight", "must be 1"),
    ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name", "Duplicate value"),
    ({"resource": []}, "resource", "unknown field"),
])
def test_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        NodeResourcesBalancedAllocation(args, Handle())
    assert err.value.field == field and message in err.value.message
