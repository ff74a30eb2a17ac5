import sys

import pytest
from plugin_builders import FakeHandle, code_and_reasons, make_node, make_pod, place, run_scores

from kubesched.api.taint import Taint
from kubesched.framework.interface import Code, CycleState, PluginArgsError
from kubesched.plugins.pod_topology_spread import PodTopologySpread

HOST = "kubernetes.io/hostname"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
SKEWED = (Code.UNSCHEDULABLE, ("node(s) didn't match pod topology spread constraints",))
MISSING = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
           ("node(s) didn't match pod topology spread constraints (missing required label)",))


def spread(max_skew, key, action, selector="FOO", **extra):
    # "FOO" stands for the FOO selector: a dict default would be shared between calls.
    selector = FOO if selector == "FOO" else selector
    c = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        c["labelSelector"] = selector
    c.update(extra)
    return c


def cluster(layout, labels_of=None):
    """layout: {node: [pod label dicts]}; node labels: hostname, plus zone from labels_of."""
    nodes = []
    for name, pods in layout.items():
        labels = {HOST: name}
        labels.update((labels_of or {}).get(name, {}))
        node = make_node(name, labels=labels)
        place(node, *[make_pod(f"{name}-{i}", labels=lab) for i, lab in enumerate(pods)])
        nodes.append(node)
    return nodes


def scores(pod, nodes, failed=(), args=None, objects=None):
    handle = FakeHandle(list(nodes) + list(failed), objects=objects)
    return run_scores(PodTopologySpread(args, handle), pod, list(nodes))


F = {"foo": ""}
FB = {"foo": "", "bar": ""}


def test_score_one_constraint_on_node():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    nodes = cluster({"node-a": [F, F], "node-b": [F], "node-c": [], "node-d": [F, F, F]})
    assert scores(pod, nodes) == [20, 60, 100, 0]


@pytest.mark.parametrize("max_skew, want", [(2, [33, 66, 100, 16]), (3, [44, 66, 77, 100])])
def test_score_max_skew(max_skew, want):
    pod = make_pod(labels=F, tsc=[spread(max_skew, HOST, "ScheduleAnyway")])
    layout = {"node-a": [F, F], "node-b": [F], "node-c": [], "node-d": [F, F, F]} if max_skew == 2 else \
        {"node-a": [F] * 4, "node-b": [F] * 3, "node-c": [F] * 2, "node-d": [F]}
    assert scores(pod, cluster(layout)) == want


def test_score_null_selector_matches_nothing():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway", selector=None)])
    assert scores(pod, cluster({"node-a": [F, F], "node-b": [F], "node-c": [], "node-d": [F]})) == [100] * 4


def test_score_no_existing_pods_and_same_counts():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    assert scores(pod, cluster({"node-a": [], "node-b": []})) == [100, 100]
    assert scores(pod, cluster({"node-a": [F], "node-b": [F]})) == [100, 100]


def test_score_three_of_four_candidates():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    nodes = cluster({"node-a": [F] * 4, "node-b": [F] * 2, "node-x": [F], "node-y": [F] * 3})
    assert scores(pod, nodes[:3], failed=nodes[3:]) == [33, 83, 100]


def test_score_node_without_topology_key_scores_zero():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    nodes = cluster({"node-a": [F] * 4, "node-b": [F] * 2, "node-x": [F], "node-y": [F] * 3})
    nodes[1].labels = {"n": "node-b"}
    assert scores(pod, nodes[:3], failed=nodes[3:]) == [16, 0, 100]


def test_score_zone_constraint():
    zones = {"node-a": {"zone": "zone1"}, "node-b": {"zone": "zone1"}, "node-x": {"zone": "zone2"},
             "node-y": {"zone": "zone2"}}
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "ScheduleAnyway")])
    nodes = cluster({"node-a": [F] * 4, "node-b": [F] * 2, "node-x": [F], "node-y": [F] * 3}, zones)
    assert scores(pod, nodes[:3], failed=nodes[3:]) == [75, 75, 100]


def test_score_zone_and_node_constraints():
    zones = {"node-a": {"zone": "zone1"}, "node-b": {"zone": "zone1"}, "node-x": {"zone": "zone2"},
             "node-y": {"zone": "zone2"}}
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "ScheduleAnyway"), spread(1, HOST, "ScheduleAnyway")])
    nodes = cluster({"node-a": [F] * 2, "node-b": [F], "node-x": [F] * 2, "node-y": [F] * 4}, zones)
    assert scores(pod, [nodes[0], nodes[2]], failed=[nodes[1], nodes[3]]) == [100, 63]


def test_score_two_zone_constraints_with_different_selectors():
    zones = {"node-a": {"zone": "zone1"}, "node-b": {"zone": "zone1"}, "node-x": {"zone": "zone2"},
             "node-y": {"zone": "zone2"}}
    nodes = []
    for name, pods in {"node-a": [FB, F], "node-b": [FB], "node-x": [], "node-y": [F, FB, F]}.items():
        node = make_node(name, labels=zones[name])
        place(node, *[make_pod(f"{name}-{i}", labels=lab) for i, lab in enumerate(pods)])
        nodes.append(node)
    pod = make_pod(labels=FB, tsc=[spread(1, "zone", "ScheduleAnyway"),
                                   spread(1, "zone", "ScheduleAnyway", selector=BAR)])
    assert scores(pod, [nodes[0], nodes[2]], failed=[nodes[1], nodes[3]]) == [85, 100]


def test_score_other_namespaces_and_terminating_pods_do_not_count():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    a, b = make_node("node-a", labels={HOST: "node-a"}), make_node("node-b", labels={HOST: "node-b"})
    place(a, make_pod("a1", labels=F, namespace="ns1"), make_pod("a2", labels=F, deleting=True))
    place(b, make_pod("b1", labels=F))
    assert scores(pod, [a, b]) == [100, 0]


def test_score_system_defaulting_uses_services():
    pod = make_pod("p", labels=F)
    nodes = cluster({"node-a": [F] * 4, "node-b": [F] * 3, "node-c": [F] * 2, "node-d": [F]})
    service = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
    assert scores(pod, nodes, objects={"services": [service]}) == [44, 66, 77, 100]


def test_score_system_defaulting_without_services_or_controller_skips():
    assert scores(make_pod("p", labels=F), cluster({"node-a": [F], "node-b": []})) is None


def test_score_system_defaulting_uses_the_replicaset_selector():
    rs = {"metadata": {"name": "rs", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    web = {"app": "web"}
    pod = make_pod("p", labels=web, owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"})
    nodes = cluster({"node-a": [web, web], "node-b": [web], "node-c": [F]})
    got = scores(pod, nodes, objects={"replicasets": [rs]})
    assert got[2] == 100 and got[0] < got[1] < got[2]


def test_score_skips_without_soft_constraints():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "DoNotSchedule")])
    assert scores(pod, cluster({"node-a": []})) is None


def test_score_list_defaulting_requires_all_topology_keys():
    args = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}
    service = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
    zones = {"node-a": {"zone": "z1"}, "node-b": {"zone": "z2"}}
    nodes = cluster({"node-a": [F, F], "node-b": [], "node-c": []}, zones)
    assert scores(make_pod("p", labels=F), nodes, args=args, objects={"services": [service]}) == [0, 100, 0]


# --- Filter ---------------------------------------------------------------------------

def run_all_filters(pod, nodes):
    handle = FakeHandle(nodes)
    plugin = PodTopologySpread(None, handle)
    state = CycleState()
    _unused, status = plugin.pre_filter(state, pod, nodes)
    if status is not None and status.is_skip():
        return ["skip"]
    assert status is None
    return [code_and_reasons(plugin.filter(state, pod, n)) for n in nodes]


def test_what_the_plugin_remembers_of_a_node_does_not_keep_its_replaced_node_info_alive():
    # The soak's leader held 13 MB in the match counts: each entry kept the NodeInfo it was
    # counted on, so every replaced clone of every node stayed alive, with its pods, until the
    # same selector was counted on that node again.
    handle = FakeHandle(cluster({"node-a": [F], "node-b": []}))
    plugin = PodTopologySpread(None, handle)
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "DoNotSchedule")])
    snapshot = handle.snapshot()
    replaced = snapshot.get("node-a")
    assert plugin.pre_filter(CycleState(), pod, snapshot.node_info_list)[1] is None
    snapshot.add_pod(make_pod("b", labels=F, node_name="node-a"), "node-a")  # a new clone for node-a
    assert sys.getrefcount(replaced) == 2  # this test's name and the call's argument: nothing else
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot.node_info_list)[1] is None
    assert [code_and_reasons(plugin.filter(state, pod, n)) for n in snapshot.node_info_list] == [SKEWED, None]


ZONES = {"node-a": {"zone": "zone1"}, "node-b": {"zone": "zone1"}, "node-x": {"zone": "zone2"},
         "node-y": {"zone": "zone2"}}


def test_filter_zone_max_skew():
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule")])
    nodes = cluster({"node-a": [F], "node-b": [F], "node-x": [F], "node-y": []}, ZONES)
    # zone1: 2, zone2: 1 -> placing in zone1 makes skew 3-1=2 > 1
    assert run_all_filters(pod, nodes) == [SKEWED, SKEWED, None, None]


def test_filter_pod_not_matching_its_own_selector():
    pod = make_pod(labels={"other": ""}, tsc=[spread(1, "zone", "DoNotSchedule")])
    nodes = cluster({"node-a": [F], "node-b": [F], "node-x": [F], "node-y": []}, ZONES)
    # self-match is 0: zone1 skew 2-1=1 is allowed
    assert run_all_filters(pod, nodes) == [None] * 4


def test_filter_missing_topology_label():
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule")])
    nodes = cluster({"node-a": [], "node-z": []}, {"node-a": {"zone": "zone1"}})
    assert run_all_filters(pod, nodes) == [None, MISSING]


def test_filter_hostname_spread():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "DoNotSchedule")])
    nodes = cluster({"node-a": [F, F], "node-b": [F], "node-c": []})
    assert run_all_filters(pod, nodes) == [SKEWED, SKEWED, None]


def test_filter_min_domains_counts_missing_domains_as_empty():
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule", minDomains=3)])
    nodes = cluster({"node-a": [F], "node-x": []}, ZONES)
    # two domains < minDomains 3: global minimum is 0, so zone1 (1+1) is too skewed, zone2 (0+1) fits
    assert run_all_filters(pod, nodes) == [SKEWED, None]
    pod = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule", minDomains=2)])
    assert run_all_filters(pod, nodes) == [SKEWED, None]
    pod = make_pod(labels=F, tsc=[spread(2, "zone", "DoNotSchedule", minDomains=3)])
    assert run_all_filters(pod, nodes) == [None, None]


def test_filter_node_affinity_policy():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1"]}]}]}}}
    nodes = cluster({"node-a": [F], "node-x": []}, ZONES)
    honored = make_pod(labels=F, affinity=affinity, tsc=[spread(1, "zone", "DoNotSchedule")])
    # zone2 is excluded from the domains: zone1 is the only (and least loaded) domain
    assert run_all_filters(honored, nodes)[0] is None
    ignored = make_pod(labels=F, affinity=affinity,
                       tsc=[spread(1, "zone", "DoNotSchedule", nodeAffinityPolicy="Ignore")])
    assert run_all_filters(ignored, nodes)[0] == SKEWED


def test_filter_node_taints_policy():
    nodes = cluster({"node-a": [F], "node-x": []}, ZONES)
    nodes[1].taints = [Taint("t", "", "NoSchedule")]
    honored = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule", nodeTaintsPolicy="Honor")])
    assert run_all_filters(honored, nodes)[0] is None
    ignored = make_pod(labels=F, tsc=[spread(1, "zone", "DoNotSchedule")])
    assert run_all_filters(ignored, nodes)[0] == SKEWED


def test_filter_match_label_keys():
    pod = make_pod(labels={"foo": "", "rev": "2"}, tsc=[spread(1, HOST, "DoNotSchedule", matchLabelKeys=["rev"])])
    nodes = cluster({"node-a": [{"foo": "", "rev": "1"}] * 3, "node-b": [{"foo": "", "rev": "2"}]})
    # only rev=2 pods count: node-a 0, node-b 1
    assert run_all_filters(pod, nodes) == [None, SKEWED]


def test_filter_skips_without_hard_constraints():
    assert run_all_filters(make_pod(labels=F), cluster({"node-a": []})) == ["skip"]
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "ScheduleAnyway")])
    assert run_all_filters(pod, cluster({"node-a": []})) == ["skip"]


def test_pre_filter_extensions_track_added_and_removed_pods():
    pod = make_pod(labels=F, tsc=[spread(1, HOST, "DoNotSchedule")])
    nodes = cluster({"node-a": [F], "node-b": []})
    plugin = PodTopologySpread(None, FakeHandle(nodes))
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    assert code_and_reasons(plugin.filter(state, pod, nodes[0])) == SKEWED
    victim = next(iter(nodes[0].pods.values()))
    clone = state.clone()
    plugin.remove_pod(clone, pod, victim, nodes[0])
    assert plugin.filter(clone, pod, nodes[0]) is None
    plugin.add_pod(clone, pod, make_pod("new", labels=F), nodes[1])
    assert plugin.filter(clone, pod, nodes[1]) is not None
    # the original state is untouched by the clone's updates
    assert code_and_reasons(plugin.filter(state, pod, nodes[0])) == SKEWED


@pytest.mark.parametrize("args, field, message", [
    ({"defaultingType": "Bogus"}, "defaultingType", "Unsupported value"),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultingType", "when .defaultConstraints are not empty"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew", "not in valid range (0, inf)"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].topologyKey", "can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]},
     "defaultConstraints[0].whenUnsatisfiable", "can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]},
     "defaultConstraints[0].whenUnsatisfiable", "Unsupported value"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]},
     "defaultConstraints[0].labelSelector", "must not define a selector"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[1]", "Duplicate value"),
])
def test_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        PodTopologySpread(args, FakeHandle())
    assert err.value.field == field and message in err.value.message


def test_counts_remembered_across_cycles_follow_every_node_change():
    """One plugin instance over many cycles (as the scheduler runs it) must count exactly what
    a fresh instance counts, whatever changed on the nodes in between."""
    zone = "topology.kubernetes.io/zone"
    zones = {"node-a": {zone: "z1"}, "node-b": {zone: "z1"}, "node-c": {zone: "z2"}}
    nodes = cluster({"node-a": [F, F], "node-b": [{"other": ""}], "node-c": [F]}, zones)
    pod = make_pod(labels=F, tsc=[spread(1, zone, "DoNotSchedule")])
    long_lived = PodTopologySpread(None, FakeHandle(nodes))

    def counts(plugin, nodes):
        state = CycleState()
        plugin.pre_filter(state, pod, nodes)
        return state.read("PreFilterPodTopologySpread").tp_value_to_match_num

    def agree(nodes):
        fresh = counts(PodTopologySpread(None, FakeHandle(nodes)), nodes)
        assert counts(long_lived, nodes) == fresh
        return fresh

    assert agree(nodes) == [{"z1": 2, "z2": 1}]
    place(nodes[1], make_pod("node-b-new", labels=F))  # the same NodeInfo, one more matching pod
    assert agree(nodes) == [{"z1": 3, "z2": 1}]
    replaced = nodes[0].clone()  # the snapshot's next NodeInfo for a node whose pods changed
    replaced.remove_pod(next(iter(replaced.pods.values())))
    nodes[0] = replaced
    assert agree(nodes) == [{"z1": 2, "z2": 1}]
    nodes[2].set_node({"metadata": {"name": "node-c", "labels": {zone: "z1"}}})  # relabelled into z1
    assert agree(nodes) == [{"z1": 3}]
    assert agree(cluster({"node-a": [], "node-b": [F], "node-c": [F]}, zones)) == [{"z1": 1, "z2": 1}]


def test_match_label_keys_narrow_the_selector_with_the_current_labels():
    # v1.37.1's filterTopologySpreadConstraints still merges matchLabelKeys whenever
    # MatchLabelKeysInPodTopologySpread is on, on top of the API server's merge at creation
    # (golden seed 170 shows it): a label changed since then narrows the selector to the new value.
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev"]}
    [c] = PodTopologySpread.filter_constraints([constraint], {"app": "web", "rev": "2"}, "DoNotSchedule")
    assert not c.selector.matches({"app": "web", "rev": "1"})
    assert c.selector.matches({"app": "web", "rev": "2"})


# Upstream's Test_isSchedulableAfterNodeChange, Test_isSchedulableAfterAssignedPodChange and
# Test_isSchedulableAfterTargetPodChange (podtopologyspread/plugin_test.go, v1.37.1), with the
# plugin's args as there (List defaulting, no default constraints).
LIST_ARGS = {"defaultingType": "List"}
ZONE_FOO = spread(1, "zone", "DoNotSchedule")
NODE_FOO = spread(1, "node", "DoNotSchedule")
NODE_BAR = spread(1, "node", "DoNotSchedule", BAR)
TAINT_A = [{"key": "aaa", "value": "bbb", "effect": "NoSchedule"}]
TAINT_C = [{"key": "ccc", "value": "bbb", "effect": "NoSchedule"}]


def _node(labels, taints=None):
    return {"metadata": {"name": "node-a", "labels": labels}, "spec": {"taints": taints} if taints else {}}


@pytest.mark.parametrize("tsc, old, new, queue", [
    pytest.param([ZONE_FOO], _node({"zone": "zone1"}), _node({"zone": "zone2"}), True,
                 id="node updates label which matches topologyKey"),
    pytest.param([ZONE_FOO], _node({"foo": "bar1"}), _node({"foo": "bar2"}), False,
                 id="node that doesn't match topologySpreadConstraints updates non-related label"),
    pytest.param([ZONE_FOO, NODE_FOO], _node({"zone": "zone1", "node": "node1", "foo": "bar"}),
                 _node({"zone": "zone1", "node": "node1"}), False,
                 id="node that match topologySpreadConstraints adds non-related label"),
    pytest.param([ZONE_FOO], None, _node({"foo": "bar"}), False, id="create node with non-related labels"),
    pytest.param([ZONE_FOO], None, _node({"zone": "zone1"}), True, id="create node with related labels"),
    pytest.param([ZONE_FOO], _node({"foo": "bar"}), None, False, id="delete node with non-related labels"),
    pytest.param([ZONE_FOO], _node({"zone": "zone1"}), None, True, id="delete node with related labels"),
    pytest.param([ZONE_FOO, NODE_FOO], None, _node({"zone": "zone1"}), False,
                 id="add node with related labels that only match one of topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_FOO], None, _node({"zone": "zone1", "node": "node1"}), True,
                 id="add node with related labels that match all topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_FOO], _node({"zone": "zone1"}), _node({"zone": "zone1"}), False,
                 id="update node with related labels that only match one of topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_FOO], _node({"zone": "zone1", "node": "node1"}),
                 _node({"zone": "zone1", "node": "node2"}), True,
                 id="update node with related labels that match all topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_FOO], _node({"zone": "zone1", "node": "node1"}, TAINT_A),
                 _node({"zone": "zone1", "node": "node1"}, TAINT_C), True,
                 id="update node with different taints that match all topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_FOO], _node({"node": "node1"}, TAINT_A), _node({"node": "node1"}, TAINT_C), False,
                 id="update node with different taints that only match one of topologySpreadConstraints"),
])
def test_queueing_hint_after_node_change(tsc, old, new, queue):
    pod = make_pod("p", tsc=tsc)
    assert PodTopologySpread(LIST_ARGS, FakeHandle([])).is_schedulable_after_node_change(pod, old, new) is queue


def _placed(labels=None, node="fake-node", nominated="", namespace="default"):
    return make_pod("p2", namespace, labels=labels, node_name=node, nominated=nominated).raw


@pytest.mark.parametrize("tsc, old, new, queue", [
    pytest.param([ZONE_FOO], None, _placed({"foo": ""}), True,
                 id="add pod with labels match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], None, _placed({"foo": ""}, node=""), False, id="add un-scheduled pod"),
    pytest.param([ZONE_FOO], _placed({"bar": ""}, node=""), _placed({"foo": ""}, node=""), False,
                 id="update un-scheduled pod"),
    pytest.param([ZONE_FOO], _placed({"foo": ""}, node=""), None, False, id="delete un-scheduled pod"),
    pytest.param([ZONE_FOO], None, _placed({"foo": ""}, namespace="fake-namespace"), False,
                 id="add pod with different namespace"),
    pytest.param([ZONE_FOO], None, _placed({"bar": ""}), False,
                 id="add pod with labels don't match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": ""}), None, True,
                 id="delete pod with labels that match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"bar": ""}, node="", nominated="fake-node"), None, False,
                 id="delete nominated pod with labels that don't match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": ""}, node="", nominated="fake-node"), None, True,
                 id="delete nominated pod with labels that match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"bar": ""}), None, False,
                 id="delete pod with labels that don't match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": "", "bar": "bar1"}), _placed({"foo": "", "bar": "bar2"}), False,
                 id="update pod's non-related label"),
    pytest.param([ZONE_FOO], _placed(), _placed({"foo": ""}), True,
                 id="add pod's label that matches topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": ""}), _placed(), True,
                 id="delete pod label that matches topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": "foo1"}), _placed({"foo": "foo2"}), False,
                 id="change pod's label that matches topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO], _placed({"foo": "", "bar": "bar1"}), _placed({"foo": "", "bar": "bar2"}), False,
                 id="change pod's label that doesn't match topologySpreadConstraints selector"),
    pytest.param([ZONE_FOO, NODE_BAR], _placed({"foo": ""}), _placed({"foo": "", "bar": "bar2"}), True,
                 id="add pod's label that matches topologySpreadConstraints selector with multi "
                    "topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_BAR], _placed({"foo": ""}), _placed({"foo": "", "baz": ""}), False,
                 id="change pod's label that doesn't match topologySpreadConstraints selector with multi "
                    "topologySpreadConstraints"),
    pytest.param([ZONE_FOO, NODE_BAR], _placed({"foo": "", "bar": ""}), _placed({"foo": "", "bar": "bar2"}), False,
                 id="change pod's label that match topologySpreadConstraints selector with multi "
                    "topologySpreadConstraints"),
])
def test_queueing_hint_after_assigned_pod_change(tsc, old, new, queue):
    pod = make_pod("p", labels={"foo": ""}, tsc=tsc)
    hint = PodTopologySpread(LIST_ARGS, FakeHandle([])).is_schedulable_after_assigned_pod_change
    assert hint(pod, old, new) is queue


@pytest.mark.parametrize("taints_policy, old, new, queue", [
    pytest.param("Honor", {"foo": ""}, {"foo": ""}, True,
                 id="the unschedulable Pod has topologySpreadConstraint with NodeTaintsPolicy:Honor and has got a "
                    "new toleration"),
    pytest.param("Ignore", {"foo": ""}, {"foo": ""}, False,
                 id="the unschedulable Pod has topologySpreadConstraint without NodeTaintsPolicy:Honor and has got a "
                    "new toleration"),
    pytest.param("Ignore", {}, {"foo": ""}, True,
                 id="the unschedulable Pod has topologySpreadConstraint and has got a new label matching the "
                    "selector of the constraint"),
    pytest.param("Ignore", {}, {"unrelated": ""}, False,
                 id="the unschedulable Pod has topologySpreadConstraint and has got a new unrelated label"),
])
def test_queueing_hint_after_target_pod_change(taints_policy, old, new, queue):
    tsc = [spread(1, "zone", "DoNotSchedule", nodeTaintsPolicy=taints_policy), NODE_BAR]
    pod = make_pod("p", labels={"foo": ""}, tsc=tsc)
    toleration = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    # The first two cases add a toleration and keep the labels; the last two change labels only.
    before = make_pod("p", labels=old).raw
    after = make_pod("p", labels=new, tolerations=toleration if old == new else None).raw
    hint = PodTopologySpread(LIST_ARGS, FakeHandle([])).is_schedulable_after_target_pod_change
    assert hint(pod, before, after) is queue


def test_queueing_hints_requeue_when_a_selector_does_not_parse():
    bad = make_pod("p", tsc=[spread(1, "zone", "DoNotSchedule", {"matchExpressions": [{"key": "a", "operator": "X"}]})])
    plugin = PodTopologySpread(LIST_ARGS, FakeHandle([]))
    assert plugin.is_schedulable_after_node_change(bad, None, _node({})) is True
    assert plugin.is_schedulable_after_assigned_pod_change(bad, None, _placed({"x": ""})) is True
