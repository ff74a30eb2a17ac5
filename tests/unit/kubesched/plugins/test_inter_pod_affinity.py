import sys

import pytest
from plugin_builders import FakeHandle, code_and_reasons, make_node, make_pod, place, run_scores

from kubesched.framework.interface import Code, CycleState, PluginArgsError
from kubesched.plugins.inter_pod_affinity import InterPodAffinity

HOST = "kubernetes.io/hostname"
AFFINITY_REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match pod affinity rules",))
ANTI_REJECTED = (Code.UNSCHEDULABLE, ("node(s) didn't match pod anti-affinity rules",))
EXISTING_REJECTED = (Code.UNSCHEDULABLE, ("node(s) didn't satisfy existing pods anti-affinity rules",))

CHINA, INDIA = {"region": "China"}, {"region": "India"}
AZ1, CHINA_AZ1 = {"az": "az1"}, {"region": "China", "az": "az1"}
S1, S2 = {"security": "S1"}, {"security": "S2"}
NAMESPACES = [{"metadata": {"name": "subteam1.team1", "labels": {"team": "team1"}}},
              {"metadata": {"name": "subteam2.team1", "labels": {"team": "team1"}}},
              {"metadata": {"name": "subteam1.team2", "labels": {"team": "team2"}}},
              {"metadata": {"name": "subteam2.team2", "labels": {"team": "team2"}}},
              {"metadata": {"name": "default", "labels": {}}}]


def sel(*exprs):
    return {"matchExpressions": [dict(key=k, operator=op, **({"values": list(v)} if v else {}))
                                 for k, op, *v in exprs]}


def term(selector, key, namespaces=None, namespace_selector=None):
    t = {"labelSelector": selector, "topologyKey": key}
    if namespaces:
        t["namespaces"] = namespaces
    if namespace_selector is not None:
        t["namespaceSelector"] = namespace_selector
    return t


def weighted(weight, t):
    return {"weight": weight, "podAffinityTerm": t}


def affinity(required=(), preferred=(), anti_required=(), anti_preferred=()):
    out = {}
    if required or preferred:
        out["podAffinity"] = {k: list(v) for k, v in (("requiredDuringSchedulingIgnoredDuringExecution", required),
                                                      ("preferredDuringSchedulingIgnoredDuringExecution", preferred))
                              if v}
    if anti_required or anti_preferred:
        out["podAntiAffinity"] = {k: list(v) for k, v in
                                  (("requiredDuringSchedulingIgnoredDuringExecution", anti_required),
                                   ("preferredDuringSchedulingIgnoredDuringExecution", anti_preferred)) if v}
    return out


STAY_S1_REGION = affinity(preferred=[weighted(5, term(sel(("security", "In", "S1")), "region"))])
STAY_S2_REGION = affinity(preferred=[weighted(6, term(sel(("security", "In", "S2")), "region"))])
AFFINITY3 = affinity(preferred=[
    weighted(8, term(sel(("security", "NotIn", "S1"), ("security", "In", "S2")), "region")),
    weighted(2, term(sel(("security", "Exists"), ("wrongkey", "DoesNotExist")), "region"))])
HARD_AFFINITY = affinity(required=[term(sel(("security", "In", "S1", "value2")), "region"),
                                   term(sel(("security", "Exists"), ("wrongkey", "DoesNotExist")), "region")])
AWAY_S1_AZ = affinity(anti_preferred=[weighted(5, term(sel(("security", "In", "S1")), "az"))])
AWAY_S2_AZ = affinity(anti_preferred=[weighted(5, term(sel(("security", "In", "S2")), "az"))])
STAY_S1_AWAY_S2 = affinity(preferred=[weighted(8, term(sel(("security", "In", "S1")), "region"))],
                           anti_preferred=[weighted(5, term(sel(("security", "In", "S2")), "az"))])
NS_SELECTOR = sel(("team", "In", "team1"))
AFFINITY_NS = affinity(preferred=[weighted(5, term(sel(("security", "In", "S1")), "region", ["subteam2.team2"],
                                                   NS_SELECTOR))])
ANTI_AFFINITY_NS = affinity(anti_preferred=[weighted(5, term(sel(("security", "In", "S1")), "region",
                                                             ["subteam2.team2"], NS_SELECTOR))])


def build(node_labels, pods):
    """node_labels: [labels per node]; pods: [(node index, kwargs for make_pod)]."""
    nodes = [make_node(f"node{i + 1}", labels=lab) for i, lab in enumerate(node_labels)]
    for j, (i, kwargs) in enumerate(pods):
        place(nodes[i], make_pod(f"e{j}", **kwargs))
    return nodes


SCORE_CASES = [
    ("no affinity anywhere", dict(labels=S1), [CHINA, INDIA, AZ1], [], None),
    ("matching pods in the region", dict(labels=S1, affinity=STAY_S1_REGION), [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1)), (1, dict(labels=S2)), (2, dict(labels=S1))], [100, 0, 0]),
    ("same region value scores the same", dict(affinity=STAY_S1_REGION), [CHINA, CHINA_AZ1, INDIA],
     [(0, dict(labels=S1))], [100, 100, 0]),
    ("more matches, higher score", dict(labels=S1, affinity=STAY_S2_REGION), [CHINA, INDIA, CHINA, CHINA, INDIA],
     [(0, dict(labels=S2)), (0, dict(labels=S2)), (1, dict(labels=S2)), (2, dict(labels=S2)),
      (3, dict(labels=S2)), (4, dict(labels=S2))], [100, 0, 100, 100, 0]),
    ("operators and partial matches", dict(labels=S1, affinity=AFFINITY3), [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1)), (1, dict(labels=S2)), (2, dict(labels=S1))], [20, 100, 0]),
    ("symmetry of existing preferred terms", dict(labels=S2), [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1, affinity=STAY_S1_REGION)), (1, dict(labels=S2, affinity=STAY_S2_REGION))], [0, 100, 0]),
    ("symmetry with namespace selector", dict(labels=S1, namespace="subteam1.team1"), [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1, affinity=AFFINITY_NS)), (1, dict(labels=S2, affinity=STAY_S2_REGION))], [100, 0, 0]),
    ("anti-affinity symmetry with namespace selector", dict(labels=S1, namespace="subteam1.team1"),
     [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1, affinity=ANTI_AFFINITY_NS)), (1, dict(labels=S2, affinity=STAY_S2_REGION))], [0, 100, 100]),
    ("symmetry of existing required terms (hardPodAffinityWeight)", dict(labels=S1), [CHINA, INDIA, AZ1],
     [(0, dict(labels=S1, affinity=HARD_AFFINITY)), (1, dict(labels=S2, affinity=HARD_AFFINITY))], [100, 100, 0]),
    ("anti-affinity: no matching pods is best", dict(labels=S1, affinity=AWAY_S1_AZ), [AZ1, CHINA],
     [(0, dict(labels=S1)), (1, dict(labels=S2))], [0, 100]),
    ("anti-affinity: topology key missing is best", dict(labels=S1, affinity=AWAY_S1_AZ), [AZ1, CHINA],
     [(0, dict(labels=S1)), (1, dict(labels=S1))], [0, 100]),
    ("anti-affinity symmetry", dict(labels=S2), [AZ1, {"az": "az2"}],
     [(0, dict(labels=S1, affinity=AWAY_S2_AZ)), (1, dict(labels=S2, affinity=AWAY_S1_AZ))], [0, 100]),
    ("affinity and anti-affinity", dict(labels=S1, affinity=STAY_S1_AWAY_S2), [CHINA, AZ1],
     [(0, dict(labels=S1)), (1, dict(labels=S1))], [100, 0]),
    ("affinity, anti-affinity and symmetry", dict(labels=S1, affinity=STAY_S1_AWAY_S2),
     [CHINA, AZ1, INDIA, {"az": "az2"}],
     [(0, dict(labels=S1)), (1, dict(labels=S2)), (2, dict(affinity=STAY_S1_AWAY_S2)), (3, dict(affinity=AWAY_S1_AZ))],
     [100, 0, 100, 0]),
    ("pods matching the namespace selector", dict(labels=S1, namespace="subteam1.team1", affinity=AFFINITY_NS),
     [CHINA, INDIA],
     [(0, dict(labels=S1, namespace="subteam1.team1")), (0, dict(labels=S1, namespace="subteam1.team1")),
      (0, dict(labels=S1, namespace="subteam1.team2")), (1, dict(labels=S1, namespace="subteam2.team1"))], [100, 0]),
]


@pytest.mark.parametrize("name, pod_kwargs, node_labels, pods, want", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_score(name, pod_kwargs, node_labels, pods, want):
    nodes = build(node_labels, pods)
    handle = FakeHandle(nodes, objects={"namespaces": NAMESPACES})
    assert run_scores(InterPodAffinity(None, handle), make_pod("p", **pod_kwargs), nodes) == want


def test_hard_pod_affinity_weight_zero_ignores_existing_required_terms():
    nodes = build([CHINA, INDIA, AZ1], [(0, dict(labels=S1, affinity=HARD_AFFINITY)),
                                        (1, dict(labels=S2, affinity=HARD_AFFINITY))])
    plugin = InterPodAffinity({"hardPodAffinityWeight": 0}, FakeHandle(nodes))
    assert run_scores(plugin, make_pod("p", labels=S1), nodes) is None


def test_ignore_preferred_terms_of_existing_pods_skips_pods_without_terms():
    nodes = build([CHINA, INDIA], [(0, dict(labels=S1, affinity=STAY_S1_REGION))])
    plugin = InterPodAffinity({"ignorePreferredTermsOfExistingPods": True}, FakeHandle(nodes))
    assert run_scores(plugin, make_pod("p", labels=S1), nodes) is None


# --- Filter ---------------------------------------------------------------------------

def filter_all(pod, nodes, objects=None):
    plugin = InterPodAffinity(None, FakeHandle(nodes, objects=objects or {"namespaces": NAMESPACES}))
    state = CycleState()
    _unused, status = plugin.pre_filter(state, pod, nodes)
    if status is not None and status.is_skip():
        return "skip"
    assert status is None, status
    return [code_and_reasons(plugin.filter(state, pod, n)) for n in nodes]


REQ_S1_REGION = affinity(required=[term(sel(("security", "In", "S1")), "region")])
ANTI_S1_HOST = affinity(anti_required=[term(sel(("security", "In", "S1")), HOST)])


def test_filter_skips_pods_without_terms_when_no_existing_anti_affinity():
    assert filter_all(make_pod(labels=S1), build([CHINA], [(0, dict(labels=S1))])) == "skip"


def test_filter_required_affinity():
    nodes = build([CHINA, dict(CHINA, az="x"), INDIA, AZ1], [(0, dict(labels=S1))])
    assert filter_all(make_pod(affinity=REQ_S1_REGION), nodes) == [None, None, AFFINITY_REJECTED, AFFINITY_REJECTED]


def test_filter_required_affinity_first_pod_of_the_group():
    # No pod matches anywhere, but the pod matches its own term: any node with the key fits.
    nodes = build([CHINA, INDIA, AZ1], [])
    assert filter_all(make_pod(labels=S1, affinity=REQ_S1_REGION), nodes) == [None, None, AFFINITY_REJECTED]
    assert filter_all(make_pod(labels=S2, affinity=REQ_S1_REGION), nodes) == [AFFINITY_REJECTED] * 3


def test_filter_required_affinity_in_other_namespace_does_not_count():
    nodes = build([CHINA, INDIA], [(0, dict(labels=S1, namespace="other"))])
    # no match in the pod's namespace, and the pod itself does not match (S2)
    assert filter_all(make_pod(labels=S2, affinity=REQ_S1_REGION), nodes) == [AFFINITY_REJECTED] * 2


def test_filter_required_affinity_with_namespaces():
    req = affinity(required=[term(sel(("security", "In", "S1")), "region", namespaces=["other"])])
    nodes = build([CHINA, INDIA], [(0, dict(labels=S1, namespace="other"))])
    assert filter_all(make_pod(labels=S2, affinity=req), nodes) == [None, AFFINITY_REJECTED]


def test_filter_required_affinity_with_namespace_selector():
    req = affinity(required=[term(sel(("security", "In", "S1")), "region", namespace_selector=NS_SELECTOR)])
    nodes = build([CHINA, INDIA], [(0, dict(labels=S1, namespace="subteam2.team1")),
                                   (1, dict(labels=S1, namespace="subteam1.team2"))])
    assert filter_all(make_pod(labels=S2, affinity=req), nodes) == [None, AFFINITY_REJECTED]
    everywhere = affinity(required=[term(sel(("security", "In", "S1")), "region", namespace_selector={})])
    assert filter_all(make_pod(labels=S2, affinity=everywhere), nodes) == [None, None]


def test_filter_required_anti_affinity():
    nodes = build([{HOST: "node1"}, {HOST: "node2"}], [(0, dict(labels=S1))])
    assert filter_all(make_pod(affinity=ANTI_S1_HOST), nodes) == [ANTI_REJECTED, None]


def test_filter_existing_pods_anti_affinity():
    nodes = build([dict(CHINA, **{HOST: "node1"}), dict(CHINA, **{HOST: "node2"}), dict(INDIA, **{HOST: "node3"})],
                  [(0, dict(labels=S2, affinity=affinity(anti_required=[term(sel(("security", "In", "S1")),
                                                                             "region")])))])
    assert filter_all(make_pod(labels=S1), nodes) == [EXISTING_REJECTED, EXISTING_REJECTED, None]
    assert filter_all(make_pod(labels=S2), nodes) == "skip"


def test_filter_anti_affinity_with_both_sides():
    nodes = build([{HOST: "node1"}, {HOST: "node2"}], [(0, dict(labels=S1, affinity=ANTI_S1_HOST))])
    # the pod's own anti-affinity is checked before the existing pod's
    assert filter_all(make_pod(labels=S1, affinity=ANTI_S1_HOST), nodes) == [ANTI_REJECTED, None]


def test_pre_filter_rejects_an_unparsable_term():
    bad = affinity(required=[term(sel(("security", "Bogus", "S1")), "region")])
    plugin = InterPodAffinity(None, FakeHandle([]))
    _unused, status = plugin.pre_filter(CycleState(), make_pod(affinity=bad), [])
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.message().startswith("parsing pod: ")


def test_pre_filter_extensions_follow_added_and_removed_pods():
    nodes = build([{HOST: "node1"}, {HOST: "node2"}], [(0, dict(labels=S1, affinity=ANTI_S1_HOST))])
    plugin = InterPodAffinity(None, FakeHandle(nodes))
    pod = make_pod(labels=S1)
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    assert code_and_reasons(plugin.filter(state, pod, nodes[0])) == EXISTING_REJECTED
    clone = state.clone()
    existing = next(iter(nodes[0].pods.values()))
    plugin.remove_pod(clone, pod, existing, nodes[0])
    assert plugin.filter(clone, pod, nodes[0]) is None
    plugin.add_pod(clone, pod, existing, nodes[1])
    assert code_and_reasons(plugin.filter(clone, pod, nodes[1])) == EXISTING_REJECTED
    assert code_and_reasons(plugin.filter(state, pod, nodes[0])) == EXISTING_REJECTED


@pytest.mark.parametrize("args, field", [
    ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
    ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
    ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
    ({"hardPodAfinityWeight": 1}, "hardPodAfinityWeight"),
])
def test_args_validation(args, field):
    with pytest.raises(PluginArgsError) as err:
        InterPodAffinity(args, FakeHandle())
    assert err.value.field == field


# Upstream's Test_isSchedulableAfterAssignedPodChange and Test_isSchedulableAfterNodeChange
# (interpodaffinity/plugin_test.go, v1.37.1), the same cases in the same order.
def _hint_pod(labels=None, affinity_in=(), anti_in=(), affinity_exists=(), node_name="", nominated=""):
    """A pod for the hint tables: affinity_in/anti_in are (key, topologyKey, values) required
    terms; affinity_exists are (key, topologyKey) required Exists terms."""
    affinity = {}
    required = [term(sel((k, "In", *v)), tk) for k, tk, v in affinity_in] + \
        [term(sel((k, "Exists")), tk) for k, tk in affinity_exists]
    if required:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if anti_in:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            term(sel((k, "In", *v)), tk) for k, tk, v in anti_in]}
    return make_pod("hint", labels=labels, affinity=affinity, node_name=node_name, nominated=nominated)


SCAN = ("service", "region", ("securityscan", "value2"))
SCAN_ONLY = ("service", "region", ("securityscan",))
WEB = ("app", "region", ("web",))


@pytest.mark.parametrize("pod, old, new, queue", [
    pytest.param(_hint_pod(affinity_in=[SCAN]), None, _hint_pod({"service": "securityscan"}, node_name="n"), True,
                 id="add a pod which matches the pod affinity"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), None, _hint_pod({"service": "securityscan"}), False,
                 id="add an un-scheduled pod"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), None, _hint_pod({"aaa": "a"}, node_name="n"), False,
                 id="add a pod which doesn't match the pod affinity"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), _hint_pod({"aaa": "a"}, node_name="n"),
                 _hint_pod({"service": "securityscan"}, node_name="n"), True,
                 id="update a pod from non-match to match pod affinity"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), _hint_pod({"service": "value2"}, node_name="n"),
                 _hint_pod({"service": "securityscan"}, node_name="n"), False,
                 id="the updating pod matches target pod's affinity both before and after label changes"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), _hint_pod({"aaa": "a"}), _hint_pod({"service": "securityscan"}),
                 False, id="update an un-scheduled pod"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), _hint_pod({"service": "securityscan"}, node_name="n"),
                 _hint_pod({"aaa": "a"}, node_name="n"), False,
                 id="update a pod from match to non-match the pod affinity"),
    pytest.param(_hint_pod(affinity_exists=[("aaa", "hostname"), ("bbb", "hostname")]),
                 _hint_pod({"aaa": "a"}, node_name="n"), _hint_pod({"service": "securityscan"}, node_name="n"), False,
                 id="update a pod from match to non-match pod's affinity - multiple terms case"),
    pytest.param(_hint_pod(affinity_exists=[("aaa", "hostname"), ("bbb", "hostname")]),
                 _hint_pod({"aaa": "a"}, node_name="n"), _hint_pod({"aaa": "", "bbb": ""}, node_name="n"), True,
                 id="update a pod from non-match to match pod's affinity - multiple terms case"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"service": "securityscan"}, node_name="n"),
                 _hint_pod({"service": "aaaa"}, node_name="n"), True,
                 id="modify pod label to change it from satisfying pod anti-affinity to not satisfying anti-affinity"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"service": "bbb"}, node_name="n"),
                 _hint_pod({"service": "securityscan"}, node_name="n"), False,
                 id="modify pod label to change it from not satisfying pod anti-affinity to satisfying anti-affinity"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"aaa": "a"}, node_name="n"), None, False,
                 id="delete a pod which doesn't match pod's anti-affinity"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"service": "securityscan"}, node_name="n"), None, True,
                 id="delete a pod which matches pod's anti-affinity"),
    pytest.param(_hint_pod({"service": "securityscan"}), _hint_pod(anti_in=[SCAN], node_name="n"), None, True,
                 id="delete a pod with anti-affinity that matches pending pod"),
    pytest.param(_hint_pod({"service": "foo"}), _hint_pod(anti_in=[SCAN], node_name="n"), None, False,
                 id="delete a pod with anti-affinity that doesn't match pending pod"),
    pytest.param(_hint_pod({"service": "foo"}, anti_in=[SCAN]), _hint_pod({"service": "foo"}, anti_in=[SCAN],
                                                                          node_name="n"), None, False,
                 id="delete a pod which doesn't match pending pod's anti-affinity and has anti-affinity that "
                    "doesn't match pending pod"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"aaa": "a"}, nominated="n"), None, False,
                 id="delete a nominated pod which doesn't match pod's anti-affinity"),
    pytest.param(_hint_pod(anti_in=[SCAN]), _hint_pod({"service": "securityscan"}, nominated="n"), None, True,
                 id="delete a nominated pod which matches pod's anti-affinity"),
    pytest.param(_hint_pod(anti_in=[SCAN_ONLY, WEB]), _hint_pod({"service": "securityscan", "app": "bar"}, node_name="n"),
                 _hint_pod({"service": "foo", "app": "bar"}, node_name="n"), True,
                 id="modify pod label to change it from matching only one of target pod's anti-affinity terms to "
                    "matching none"),
    pytest.param(_hint_pod(anti_in=[SCAN_ONLY, WEB]), _hint_pod({"service": "securityscan", "app": "bar"}, node_name="n"),
                 _hint_pod({"service": "foo", "app": "web"}, node_name="n"), False,
                 id="modify pod label but it still matches one of target pod's anti-affinity terms"),
    pytest.param(_hint_pod(anti_in=[SCAN_ONLY, WEB]), _hint_pod({"service": "securityscan"}, node_name="n"), None,
                 True, id="delete a pod which matches only one of target pod's anti-affinity terms"),
    pytest.param(_hint_pod({"service": "securityscan"}), _hint_pod(anti_in=[SCAN_ONLY, WEB], node_name="n"), None,
                 True, id="delete a pod with anti-affinity that matches pending pod on only one term"),
])
def test_queueing_hint_after_assigned_pod_change(pod, old, new, queue):
    hint = InterPodAffinity({}, FakeHandle([])).is_schedulable_after_assigned_pod_change
    assert hint(pod, old and old.raw, new and new.raw) is queue


def _hint_node(**labels):
    return {"metadata": {"name": "node-a", "labels": labels}}


ANOTHER = ("another", "zone", ("label",))


@pytest.mark.parametrize("pod, old, new, queue", [
    pytest.param(_hint_pod(affinity_in=[("service", "zone", ("securityscan", "value2"))]), None,
                 _hint_node(zone="zone1"), True, id="add a new node with matched pod affinity topologyKey"),
    pytest.param(_hint_pod(affinity_in=[SCAN]), None, _hint_node(zone="zone1"), False,
                 id="add a new node without matched topologyKey"),
    pytest.param(_hint_pod(affinity_in=[("service", "zone", ("securityscan",))]), _hint_node(aaa="a"),
                 _hint_node(aaa="b"), False, id="update node label but not topologyKey"),
    pytest.param(_hint_pod(affinity_in=[("service", "zone", ("securityscan",))]), _hint_node(zone="zone1"),
                 _hint_node(zone="zone1", unrelated="x"), False,
                 id="update node label that isn't related to the pod affinity"),
    pytest.param(_hint_pod(affinity_in=[("service", "zone", ("securityscan",))]), _hint_node(zone="zone1"),
                 _hint_node(zone="zone2"), True, id="update node with different affinity topologyKey value"),
    pytest.param(_hint_pod(affinity_in=[("service", "zone", ("securityscan",))]), _hint_node(aaa="a"),
                 _hint_node(zone="zone1"), True, id="update node to have the affinity topology label"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), None, _hint_node(zone="zone1"), True,
                 id="add a new node with matched pod anti-affinity topologyKey"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), None, _hint_node(), True,
                 id="add a new node without matched pod anti-affinity topologyKey"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), _hint_node(zone="zone1"), _hint_node(zone="zone1", unrelated="x"),
                 False, id="update node label that isn't related to the pod anti-affinity"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), _hint_node(zone="zone1"), _hint_node(zone="zone2"), True,
                 id="update node with different anti-affinity topologyKey value"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), _hint_node(aaa="a"), _hint_node(zone="zone1"), False,
                 id="update node to have the anti-affinity topology label"),
    pytest.param(_hint_pod(anti_in=[ANOTHER]), _hint_node(zone="zone1"), _hint_node(aaa="a"), True,
                 id="update node label not to have anti-affinity topology label"),
])
def test_queueing_hint_after_node_change(pod, old, new, queue):
    assert InterPodAffinity({}, FakeHandle([])).is_schedulable_after_node_change(pod, old, new) is queue


def test_queueing_hint_requeues_when_the_pods_selector_does_not_parse():
    bad = make_pod("bad", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, HOST)]}})
    plugin = InterPodAffinity({}, FakeHandle([]))
    assert plugin.is_schedulable_after_node_change(bad, None, _hint_node()) is True
    assert plugin.is_schedulable_after_assigned_pod_change(bad, None, make_pod("o", node_name="n").raw) is True


def test_existing_anti_affinity_is_remembered_per_node_object_and_recounted_when_the_snapshot_replaces_it():
    avoid_s1 = affinity(anti_required=[term(sel(("security", "In", "S1")), HOST)])
    n1 = place(make_node("n1", labels={HOST: "n1"}), make_pod("a", labels=S2, affinity=avoid_s1))
    n2 = make_node("n2", labels={HOST: "n2"})
    handle = FakeHandle([n1, n2])
    plugin = InterPodAffinity(None, handle)

    def verdicts(pod):
        state = CycleState()
        _unused, status = plugin.pre_filter(state, pod, handle.snapshot().node_info_list)
        if status is not None and status.is_skip():
            return "skip"  # nothing counted against the pod
        return [code_and_reasons(s) for s in plugin.filter_nodes(state, pod, handle.snapshot().node_info_list)]

    assert verdicts(make_pod("p", labels=S1)) == [EXISTING_REJECTED, None]
    assert verdicts(make_pod("q", labels=S1)) == [EXISTING_REJECTED, None]  # remembered
    # n2 gains a pod that avoids S1: the snapshot's new NodeInfo for n2 is counted afresh.
    handle.snapshot().set_nodes([n1, place(make_node("n2", labels={HOST: "n2"}),
                                           make_pod("b", labels=S2, affinity=avoid_s1))])
    assert verdicts(make_pod("r", labels=S1)) == [EXISTING_REJECTED, EXISTING_REJECTED]
    assert verdicts(make_pod("s", labels=S2)) == "skip"  # another shape
    # n2 is deleted: the snapshot's node set is rebuilt, and the memo lets go of n2's NodeInfo.
    handle.snapshot().set_nodes([n1])
    assert verdicts(make_pod("t", labels=S1)) == [EXISTING_REJECTED]
    assert [sorted(t) for t in plugin._existing_memos.tables.values()] == [["n1"]]


def test_existing_anti_affinity_memo_does_not_keep_a_replaced_node_info_alive():
    avoid_s1 = affinity(anti_required=[term(sel(("security", "In", "S1")), HOST)])
    handle = FakeHandle([place(make_node("n1", labels={HOST: "n1"}), make_pod("a", labels=S2, affinity=avoid_s1)),
                         make_node("n2", labels={HOST: "n2"})])
    plugin = InterPodAffinity(None, handle)
    snapshot = handle.snapshot()
    assert plugin.pre_filter(CycleState(), make_pod("p", labels=S1), snapshot.node_info_list)[1] is None
    replaced = snapshot.get("n1")
    snapshot.add_pod(make_pod("b", labels=S2, node_name="n1"), "n1")  # a new clone for n1
    snapshot.add_pod(make_pod("c", labels=S2, node_name="n2", affinity=avoid_s1), "n2")
    assert sys.getrefcount(replaced) == 2  # this test's name and the call's argument: nothing else
    state = CycleState()
    pod = make_pod("q", labels=S1)
    assert plugin.pre_filter(state, pod, snapshot.node_info_list)[1] is None
    assert [code_and_reasons(s) for s in plugin.filter_nodes(state, pod, snapshot.node_info_list)] == \
        [EXISTING_REJECTED, EXISTING_REJECTED]
