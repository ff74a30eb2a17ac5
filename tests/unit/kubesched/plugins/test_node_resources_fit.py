import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, place, run_filter, run_scores

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, PluginArgsError
from kubesched.plugins.node_resources_fit import NodeResourcesFit

U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
EXT = "example.com/aaa"
KUBE_EXT = "kubernetes.io/something"
HUGE = "hugepages-2Mi"


def node_with(cpu="10", memory="20", pods=32, extended=None, used=()):
    node = make_node("n", cpu=cpu, memory=memory, pods=pods, extended=extended, ephemeral="20")
    place(node, *[make_pod(f"u{i}", reqs=[r]) for i, r in enumerate(used)])
    return node


# (pod requests per container, init containers, node usage, want)
FILTER_CASES = [
    ("no requests", dict(reqs=[]), dict(used=[{"cpu": "10", "memory": "20"}]), None),
    ("fits", dict(reqs=[{"cpu": "1", "memory": "1"}]), dict(used=[{"cpu": "5", "memory": "5"}]), None),
    ("too many cpu", dict(reqs=[{"cpu": "1", "memory": "1"}]), dict(used=[{"cpu": "10", "memory": "5"}]),
     (U, ("Insufficient cpu",))),
    ("cpu and memory", dict(reqs=[{"cpu": "2", "memory": "2"}]), dict(used=[{"cpu": "9", "memory": "19"}]),
     (U, ("Insufficient cpu", "Insufficient memory"))),
    ("init container larger than containers", dict(reqs=[{"cpu": "1", "memory": "1"}], init_reqs=[{"cpu": "3"}]),
     dict(used=[{"cpu": "8", "memory": "19"}]), (U, ("Insufficient cpu",))),
    ("init container smaller than containers", dict(reqs=[{"cpu": "2"}], init_reqs=[{"cpu": "1"}]),
     dict(used=[{"cpu": "8"}]), None),
    ("sidecar adds to containers", dict(reqs=[{"cpu": "1"}], sidecar_reqs=[{"cpu": "1"}]),
     dict(used=[{"cpu": "9"}]), (U, ("Insufficient cpu",))),
    ("overhead counts", dict(reqs=[{"cpu": "1"}], overhead={"cpu": "500m"}), dict(used=[{"cpu": "9"}]),
     (U, ("Insufficient cpu",))),
    ("request above allocatable is unresolvable", dict(reqs=[{"cpu": "11"}]), dict(),
     (UU, ("Insufficient cpu",))),
    ("one unresolvable makes the status unresolvable", dict(reqs=[{"cpu": "2", "memory": "21"}]),
     dict(used=[{"cpu": "9"}]), (UU, ("Insufficient cpu", "Insufficient memory"))),
    ("ephemeral storage", dict(reqs=[{"ephemeral-storage": "25"}]), dict(), (UU, ("Insufficient ephemeral-storage",))),
    ("extended resource fits", dict(reqs=[{EXT: "1"}]), dict(extended={EXT: 2}), None),
    ("extended resource missing on node", dict(reqs=[{EXT: "1"}]), dict(), (UU, (f"Insufficient {EXT}",))),
    ("extended resource used up", dict(reqs=[{EXT: "2"}]), dict(extended={EXT: 3}, used=[{EXT: "2"}]),
     (U, (f"Insufficient {EXT}",))),
    ("prefixed native resource", dict(reqs=[{KUBE_EXT: "1"}]), dict(), (UU, (f"Insufficient {KUBE_EXT}",))),
    ("hugepages", dict(reqs=[{HUGE: "4Mi"}]), dict(extended={HUGE: "2Mi"}), (UU, (f"Insufficient {HUGE}",))),
    ("quantities in every form", dict(reqs=[{"cpu": "500m", "memory": "0.5Gi"}, {"cpu": "0.5", "memory": "512Mi"}]),
     dict(cpu="1", memory="1Gi"), None),
    ("1e3 and 1G", dict(reqs=[{"cpu": "1", "memory": "1e3"}, {"memory": "1G"}]), dict(cpu="1", memory="1000001k"), None),
    ("1e3 exceeds", dict(reqs=[{"memory": "1e3"}, {"memory": "1G"}]), dict(cpu="1", memory="1G"), (UU, ("Insufficient memory",))),
]


@pytest.mark.parametrize("name, pod_kwargs, node_kwargs, want", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter(name, pod_kwargs, node_kwargs, want):
    status = run_filter(NodeResourcesFit(None, Handle()), make_pod(**pod_kwargs), node_with(**node_kwargs))
    assert code_and_reasons(status) == want


def test_too_many_pods_is_reported_first_and_is_resolvable():
    node = node_with(pods=1, used=[{"cpu": "9"}])
    status = run_filter(NodeResourcesFit(None, Handle()), make_pod(reqs=[{"cpu": "2"}]), node)
    assert code_and_reasons(status) == (U, ("Too many pods", "Insufficient cpu"))


def test_too_many_pods_even_without_requests():
    node = node_with(pods=1, used=[{}])
    assert code_and_reasons(run_filter(NodeResourcesFit(None, Handle()), make_pod(), node)) == (U, ("Too many pods",))


@pytest.mark.parametrize("args, want", [
    ({"ignoredResources": [EXT]}, None),
    ({"ignoredResourceGroups": ["example.com"]}, None),
    ({"ignoredResourceGroups": ["other.com"]}, (UU, (f"Insufficient {EXT}",))),
])
def test_ignored_extended_resources(args, want):
    status = run_filter(NodeResourcesFit(args, Handle()), make_pod(reqs=[{EXT: "1"}]), node_with())
    assert code_and_reasons(status) == want


def test_ignored_resources_apply_only_to_extended_resources():
    status = run_filter(NodeResourcesFit({"ignoredResourceGroups": ["hugepages-2Mi"]}, Handle()),
                        make_pod(reqs=[{HUGE: "4Mi"}]), node_with())
    assert code_and_reasons(status) == (UU, (f"Insufficient {HUGE}",))


def capacity_node(name, cpu, memory, *used):
    """Nodes sized as upstream's tests: cpu in whole cores, memory in bytes."""
    node = make_node(name, cpu=cpu, memory=memory, pods=100)
    return place(node, *[make_pod(f"{name}-u{i}", reqs=[r]) for i, r in enumerate(used)])


R12 = [{"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}]

LEAST_ALLOCATED = [
    ("nothing scheduled, nothing requested", [], [capacity_node("a", "4000", "10000"),
                                                  capacity_node("b", "4000", "10000")], [100, 100]),
    ("differently sized nodes", R12, [capacity_node("a", "4000", "10000"), capacity_node("b", "6000", "10000")],
     [37, 50]),
    ("no requests, pods scheduled with resources", [],
     [capacity_node("a", "10000", "20000", {"cpu": "3000", "memory": "0"}, {"cpu": "3000", "memory": "0"}),
      capacity_node("b", "10000", "20000", {"cpu": "3000", "memory": "0"}, {"cpu": "3000", "memory": "5000"})],
     [70, 57]),
    ("requests, pods scheduled with resources", R12,
     [capacity_node("a", "10000", "20000", {"cpu": "3000", "memory": "0"}),
      capacity_node("b", "10000", "20000", {"cpu": "3000", "memory": "5000"})], [57, 45]),
    ("requested exceeds capacity", [{"cpu": "3000", "memory": "0"}],
     [capacity_node("a", "4000", "10000", {"cpu": "3000", "memory": "0"}),
      capacity_node("b", "4000", "10000", {"cpu": "3000", "memory": "5000"})], [50, 25]),
    ("zero node resources", [], [capacity_node("a", None, None, {"cpu": "3000", "memory": "0"}),
                                 capacity_node("b", None, None, {"cpu": "3000", "memory": "5000"})], [0, 0]),
]


@pytest.mark.parametrize("name, reqs, nodes, want", LEAST_ALLOCATED, ids=[c[0] for c in LEAST_ALLOCATED])
def test_least_allocated(name, reqs, nodes, want):
    assert run_scores(NodeResourcesFit(None, Handle()), make_pod(reqs=reqs), nodes) == want


def test_least_allocated_weights():
    args = {"scoringStrategy": {"type": "LeastAllocated",
                                "resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]}}
    nodes = [capacity_node("a", "4000", "10000"), capacity_node("b", "6000", "10000")]
    # cpu (4000-3000)*100/4000=25, memory 50: (25+2*50)/3=41; cpu 50, memory 50: 50
    assert run_scores(NodeResourcesFit(args, Handle()), make_pod(reqs=R12), nodes) == [41, 50]


MOST_ALLOCATED = [
    ("nothing requested", [], [capacity_node("a", "4000", "10000"), capacity_node("b", "4000", "10000")], [0, 0]),
    ("differently sized nodes", R12, [capacity_node("a", "4000", "10000"), capacity_node("b", "6000", "10000")],
     [62, 50]),
    ("no requests, pods scheduled with resources", [],
     [capacity_node("a", "10000", "20000", {"cpu": "3000", "memory": "0"}, {"cpu": "3000", "memory": "0"}),
      capacity_node("b", "10000", "20000", {"cpu": "3000", "memory": "0"}, {"cpu": "3000", "memory": "5000"})],
     [30, 42]),
    ("requests, pods scheduled", R12,
     [capacity_node("a", "10000", "20000", {"cpu": "3000", "memory": "0"}),
      capacity_node("b", "10000", "20000", {"cpu": "3000", "memory": "5000"})], [42, 55]),
    ("requests equal node capacity", [{"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}],
     [capacity_node("a", "5000", "10000"), capacity_node("b", "10000", "9000")], [95, 75]),
]


@pytest.mark.parametrize("name, reqs, nodes, want", MOST_ALLOCATED, ids=[c[0] for c in MOST_ALLOCATED])
def test_most_allocated(name, reqs, nodes, want):
    plugin = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated"}}, Handle())
    assert run_scores(plugin, make_pod(reqs=reqs), nodes) == want


def test_most_allocated_counts_non_zero_defaults():
    # A container without requests counts 100m and 200Mi on both sides.
    nodes = [capacity_node("a", "250m", "1000Mi", {}, {}), capacity_node("b", "250m", "1000Mi")]
    plugin = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated"}}, Handle())
    assert run_scores(plugin, make_pod(reqs=[{}]), nodes) == [80, 30]


RTCR_SHAPE = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]


@pytest.mark.parametrize("reqs, nodes, want", [
    ([], [capacity_node("a", "4000", "10000", {}, {}), capacity_node("b", "4000", "10000")], [100, 100]),
    (R12, [capacity_node("a", "4000", "10000"), capacity_node("b", "6000", "10000")], [38, 50]),
    ([], [capacity_node("a", "4000", "10000", {"cpu": "3000", "memory": "5000"}),
          capacity_node("b", "6000", "10000", {"cpu": "3000", "memory": "5000"})], [38, 50]),
])
def test_requested_to_capacity_ratio(reqs, nodes, want):
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": RTCR_SHAPE}}}
    assert run_scores(NodeResourcesFit(args, Handle()), make_pod(reqs=reqs), nodes) == want


@pytest.mark.parametrize("req, used, want", [
    (None, None, [0, 0]),
    ("2", None, [2, 5]),
    ("2", "2", [2, 10]),
    ("4", None, [5, 10]),
])
def test_requested_to_capacity_ratio_single_extended(req, used, want):
    extended = "intel.com/foo"
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [{"name": extended, "weight": 1}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 1}]}}}
    nodes = [make_node("a", cpu="4", memory="10000Mi", extended={extended: 8}),
             make_node("b", cpu="4", memory="10000Mi", extended={extended: 4})]
    if used:
        place(nodes[1], make_pod("u", reqs=[{extended: used}]))
    pod = make_pod(reqs=[{extended: req}] if req else [])
    assert run_scores(NodeResourcesFit(args, Handle()), pod, nodes) == want


@pytest.mark.parametrize("args, field, message", [
    ({"scoringStrategy": {"type": "Bogus"}}, "scoringStrategy.type", "Unsupported value: 'Bogus'"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
     "scoringStrategy.resources[0].weight", "resource weight of cpu not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": -1}]}},
     "scoringStrategy.resources[0].weight", "not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "scoringStrategy.requestedToCapacityRatio",
     "must be specified when type is RequestedToCapacityRatio"),
    ({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": RTCR_SHAPE}}},
     "scoringStrategy.requestedToCapacityRatio", "must be nil when type is not RequestedToCapacityRatio"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.requestedToCapacityRatio.shape", "at least one point must be specified"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[1].utilization", "values must be sorted in increasing order"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 110, "score": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].utilization", "not in valid range [0, 100]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 10, "score": 11}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].score", "not in valid range [0, 10]"),
    ({"ignoredResourceGroups": ["example.com/aaa"]}, "ignoredResourceGroups[0]",
     "resource group name can't contain '/'"),
    ({"ignoredResources": ["-bad-"]}, "ignoredResources[0]", "name part must be"),
    ({"scoringStrategyy": {}}, "scoringStrategyy", "unknown field"),
])
def test_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        NodeResourcesFit(args, Handle())
    assert err.value.field == field
    assert message in err.value.message


def test_default_args_are_least_allocated_cpu_memory():
    plugin = NodeResourcesFit(None, Handle())
    assert plugin.strategy == "LeastAllocated"
    assert plugin.resources == [("cpu", 1), ("memory", 1)]
    # weight 0 defaults to 1
    plugin = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}]}}, Handle())
    assert plugin.resources == [("cpu", 1)]


@pytest.mark.parametrize("pod_kwargs, want_cpu, want_mem", [
    # pod-level requests replace the containers' sum
    (dict(reqs=[{"cpu": "1", "memory": "1Gi"}], pod_level={"cpu": "3"}), 3000, 2**30),
    (dict(reqs=[{"cpu": "1"}, {"cpu": "1"}], pod_level={"cpu": "500m", "memory": "1Gi"}), 500, 2**30),
    # init container: its own request plus the sidecars started before it
    (dict(reqs=[{"cpu": "1"}], sidecar_reqs=[{"cpu": "1"}], init_reqs=[{"cpu": "2"}]), 2000, 0),
    (dict(reqs=[{"cpu": "1"}], init_reqs=[{"cpu": "2"}], overhead={"cpu": "250m", "memory": "1Mi"}), 2250, 2**20),
])
def test_pod_requests_as_upstream(pod_kwargs, want_cpu, want_mem):
    pod = make_pod(**pod_kwargs)
    assert (pod.requests.milli_cpu, pod.requests.memory) == (want_cpu, want_mem)


def test_non_zero_defaults_for_node_aggregates_and_scoring():
    from kubesched.framework.types import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, compute_pod_requests
    # Two containers without requests count 100m/200Mi each for scoring and on the node.
    pod = make_pod(reqs=[{}, {}])
    assert (pod.non_zero_requests.milli_cpu, pod.non_zero_requests.memory) == (
        2 * DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST)
    # With pod-level cpu and one container asking memory, the node aggregate defaults nothing
    # (both resources are requested somewhere) while the scorers still default per container.
    pod = make_pod(reqs=[{"memory": "1Gi"}, {}], pod_level={"cpu": "1"})
    assert (pod.non_zero_requests.milli_cpu, pod.non_zero_requests.memory) == (1000, 2**30)
    scoring = compute_pod_requests(pod.raw["spec"], non_zero=True, scoring=True)
    assert (scoring.milli_cpu, scoring.memory) == (1000, 2**30 + DEFAULT_MEMORY_REQUEST)


def test_filter_nodes_over_a_mix_equals_filter():
    from kubesched.framework.interface import CycleState
    plugin = NodeResourcesFit(None, Handle())
    nodes = [node_with(used=[{"cpu": str(i)}]) for i in range(11)] + [node_with(pods=0)]
    pod = make_pod(reqs=[{"cpu": "2", EXT: "0"}])
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    batch = plugin.filter_nodes(state, pod, nodes)
    single = [plugin.filter(state, pod, n) for n in nodes]
    assert [code_and_reasons(s) for s in batch] == [code_and_reasons(s) for s in single]
    assert [code_and_reasons(s) for s in batch][-4:] == [None] + [(U, ("Insufficient cpu",))] * 2 + [
        (U, ("Too many pods",))]
