"""The Framework: extension-point lists from profiles, weights, filters, scores, handle."""

import numpy as np
import pytest
from kubesched_fakes import FAKE_REGISTRY, node_raw, pod

from kubesched.config import parse_config
from kubesched.framework.interface import Code, CycleState, PreFilterResult, Status
from kubesched.framework.runtime import Framework, FrameworkError, NodeScores, ScoreError
from kubesched.framework.types import NodeInfo

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def framework(profile=None, **handle):
    cfg = parse_config({**BASE, "profiles": [profile or {}]})
    return Framework(cfg.profiles[0], FAKE_REGISTRY, **handle)


def names(plugins):
    return [p.name for p in plugins]


def test_multipoint_expands_to_each_extension_point(fake_registry):
    fwk = framework()
    assert names(fwk.pre_enqueue_plugins) == ["FakeGates"]
    assert names(fwk.queue_sort_plugins) == ["FakeSort"]
    assert names(fwk.filter_plugins) == ["FakeLabelFilter", "FakeCpuFit"]
    assert names(fwk.score_plugins) == ["FakeScore", "FakeLeastPods"]
    assert fwk.score_weights == {"FakeScore": 2, "FakeLeastPods": 1}
    assert names(fwk.bind_plugins) == ["FakeBinder"]


def test_disabling_one_score_plugin_keeps_its_filter(fake_registry):
    fwk = framework({"plugins": {"score": {"disabled": [{"name": "FakeScore"}]}}})
    assert names(fwk.score_plugins) == ["FakeLeastPods"]


def test_disable_star_at_one_point_and_reenable_with_weight(fake_registry):
    fwk = framework({"plugins": {"score": {"disabled": [{"name": "*"}],
                                           "enabled": [{"name": "FakeLeastPods", "weight": 5}]}}})
    assert names(fwk.score_plugins) == ["FakeLeastPods"]
    assert fwk.score_weights == {"FakeLeastPods": 5}


def test_explicit_point_overrides_multipoint_order_and_weight(fake_registry):
    fwk = framework({"plugins": {"score": {"enabled": [{"name": "FakeLeastPods", "weight": 7}]}}})
    assert names(fwk.score_plugins) == ["FakeLeastPods", "FakeScore"]
    assert fwk.score_weights["FakeLeastPods"] == 7


def test_plugin_args_error_names_the_pluginconfig_path(fake_registry):
    with pytest.raises(FrameworkError) as info:
        framework({"pluginConfig": [{"name": "FakeLabelFilter", "args": {"mode": "loose"}}]})
    assert info.value.field == "profiles[0].pluginConfig[0].args.mode"
    assert "strict, lenient" in info.value.message


def test_missing_queue_sort_or_binder_is_refused(fake_registry):
    with pytest.raises(FrameworkError, match="only one queue sort plugin"):
        framework({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}})
    with pytest.raises(FrameworkError, match="at least one bind plugin"):
        framework({"plugins": {"bind": {"disabled": [{"name": "FakeBinder"}]}}})


def test_plugin_that_does_not_extend_the_point_is_refused(fake_registry):
    with pytest.raises(FrameworkError, match="does not extend filter"):
        framework({"plugins": {"filter": {"enabled": [{"name": "FakeScore"}]}}})


def test_filter_status_carries_the_rejecting_plugin(fake_registry):
    fwk = framework()
    status = fwk.run_filter_plugins(CycleState(), pod("p"), NodeInfo(node_raw("n", labels={"reject": "yes"})))
    assert status.code == Code.UNSCHEDULABLE and status.plugin == "FakeLabelFilter"
    assert fwk.run_filter_plugins(CycleState(), pod("p"), NodeInfo(node_raw("n"))) is None


def test_skipped_filter_plugins_are_not_run(fake_registry):
    fwk = framework()
    state = CycleState()
    state.skip_filter_plugins.add("FakeLabelFilter")
    assert fwk.run_filter_plugins(state, pod("p"), NodeInfo(node_raw("n", labels={"reject": "yes"}))) is None


def test_scores_are_normalised_and_weighted(fake_registry):
    fwk = framework()
    a = NodeInfo(node_raw("a", labels={"score": "10"}))
    b = NodeInfo(node_raw("b", labels={"score": "50"}))
    b.add_pod(pod("x", node="b"))
    breakdown = {}
    totals = fwk.run_score_plugins(CycleState(), pod("p"), [a, b], breakdown)
    # FakeScore weight 2; FakeLeastPods normalised: a has 0 pods -> 100, b has the most -> 0.
    assert totals == [10 * 2 + 100, 50 * 2 + 0]
    assert breakdown["FakeScore"] == {"a": 20, "b": 100}


def test_a_plugins_scores_read_as_a_dict_by_scan_and_then_by_index():
    names = [f"n{i}" for i in range(10)]
    scores = NodeScores(names, np.arange(10, dtype=np.int64) * 3)
    assert "n4" in scores and "other" not in scores and len(scores) == 10 and list(scores) == names
    # More lookups than NodeScores.SCANS: the later ones go through the index, with the same answers.
    assert [scores[name] for name in reversed(names)] == [3 * i for i in reversed(range(10))]
    assert isinstance(scores["n1"], int) and scores.get("other", -1) == -1
    fresh = NodeScores(names, np.zeros(10, dtype=np.int64))
    with pytest.raises(KeyError):
        fresh["other"]
    assert fresh.get("n9") == 0 and dict(fresh) == dict.fromkeys(names, 0)


def test_out_of_range_score_is_an_error(fake_registry):
    fwk = framework()
    with pytest.raises(ScoreError, match="invalid score 500"):
        fwk.run_score_plugins(CycleState(), pod("p"), [NodeInfo(node_raw("a", labels={"score": "500"}))])


class _Restrict:
    name = "Restrict"

    def __init__(self, nodes):
        self.nodes = nodes

    def pre_filter(self, state, pod, nodes):
        return PreFilterResult(set(self.nodes)), None


class _Reject:
    name = "Reject"

    def __init__(self, code):
        self.code = code

    def pre_filter(self, state, pod, nodes):
        return None, Status(self.code, "no way")


def test_prefilter_results_intersect_and_empty_intersection_rejects(fake_registry):
    fwk = framework()
    fwk.pre_filter_plugins = [_Restrict({"a", "b"}), _Restrict({"b", "c"})]
    result, status, plugins = fwk.run_pre_filter_plugins(CycleState(), pod("p"), [])
    assert result.node_names == {"b"} and status is None and plugins == {"Restrict"}
    fwk.pre_filter_plugins = [_Restrict({"a"}), _Restrict({"c"})]
    result, status, _unused = fwk.run_pre_filter_plugins(CycleState(), pod("p"), [])
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "node(s) didn't satisfy plugin(s) [Restrict Restrict] simultaneously"


def test_prefilter_unresolvable_stops_and_unschedulable_continues(fake_registry):
    fwk = framework()
    fwk.pre_filter_plugins = [_Reject(Code.UNSCHEDULABLE), _Restrict({"a"})]
    result, status, _unused = fwk.run_pre_filter_plugins(CycleState(), pod("p"), [])
    assert status.code == Code.UNSCHEDULABLE and status.plugin == "Reject"
    fwk.pre_filter_plugins = [_Reject(Code.UNSCHEDULABLE_AND_UNRESOLVABLE), _Restrict({"a"})]
    result, status, plugins = fwk.run_pre_filter_plugins(CycleState(), pod("p"), [])
    assert result is None and plugins == {"Reject"}


def test_nominated_pods_take_room_when_filtering(fake_registry):
    from kubesched.backend.queue import Nominator

    nominator = Nominator()
    fwk = framework(nominator=nominator)
    node = NodeInfo(node_raw("n", cpu="1"))
    incoming = pod("low", cpu="600m", priority=1)
    assert fwk.run_filter_plugins_with_nominated_pods(CycleState(), incoming, node) is None
    nominator.add_nominated_pod(pod("high", cpu="600m", priority=10), "n")
    status = fwk.run_filter_plugins_with_nominated_pods(CycleState(), incoming, node)
    assert status is not None and status.reasons == ["Insufficient cpu"]
    # A lower-priority nominated pod does not block.
    assert fwk.run_filter_plugins_with_nominated_pods(CycleState(), pod("top", cpu="600m", priority=100), node) is None
    assert len(node.pods) == 0  # the node itself is never modified


def test_batch_filtering_matches_node_by_node(fake_registry):
    fwk = framework()
    nodes = [NodeInfo(node_raw("ok")), NodeInfo(node_raw("broken", labels={"broken": "yes", "reject": "yes"})),
             NodeInfo(node_raw("full", cpu="100m")), NodeInfo(node_raw("rejected", labels={"reject": "yes"})),
             NodeInfo(node_raw("ok2"))]
    incoming = pod("p", cpu="500m")
    plugins = fwk.active_filter_plugins(CycleState())
    passed, rejected = fwk.run_filter_plugins_on_nodes(CycleState(), incoming, nodes, plugins)
    one_by_one = {n.name: fwk.run_filter_plugins(CycleState(), incoming, n) for n in nodes}
    assert [n.name for n in passed] == [name for name, st in one_by_one.items() if st is None]
    assert {n.name: (s.plugin, s.reasons) for n, s in rejected} == {
        name: (st.plugin, st.reasons) for name, st in one_by_one.items() if st is not None}


def test_batch_filter_error_names_the_plugin(fake_registry):
    from kubesched.framework.runtime import FilterError

    class Broken:
        name = "Broken"

        def filter(self, state, pod, node_info):
            raise ValueError("boom")

    fwk = framework()
    with pytest.raises(FilterError, match='running "Broken" filter plugin: boom'):
        fwk.run_filter_plugins_on_nodes(CycleState(), pod("p"), [NodeInfo(node_raw("n"))], [Broken()])
