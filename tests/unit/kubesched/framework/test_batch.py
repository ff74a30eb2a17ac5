"""OpportunisticBatching: the scenarios of upstream's own integration test
(test/integration/scheduler/batch/batch_test.go at v1.37.1, its expected nodes and which pods
were batched) run through kubesched's scheduler with its real plugins, and one test per rule
that makes a kept ranking unusable. Placement agreement with the real kube-scheduler is in
tests/integration/kubesched/test_batching_agreement.py."""

from __future__ import annotations

import time

import pytest
from kubesched_fakes import FakeClient, node_raw, pod_raw

from kubesched import metrics
from kubesched.config import parse_config
from kubesched.framework import batch as batch_module
from kubesched.framework.batch import ScoredNode, SortedScoredNodes
from kubesched.framework.types import PodInfo
from kubesched.plugins.image_locality import ImageLocality
from kubesched.scheduler import Scheduler

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
# As upstream's test: no default topology spread, else PodTopologySpread signs no pod.
NO_DEFAULT_SPREAD = {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}


def profile(name: str = "default-scheduler", **extra) -> dict:
    return {"schedulerName": name, "pluginConfig": [NO_DEFAULT_SPREAD], **extra}


def scheduler(*profiles: dict, gate: bool = True) -> Scheduler:
    cfg = parse_config({**BASE, "profiles": list(profiles) or [profile()]})
    return Scheduler(cfg, FakeClient(), feature_gates={"OpportunisticBatching": gate})


def node(name: str, max_pods: int, labels: dict | None = None) -> dict:
    return node_raw(name, cpu="100", pods=max_pods, labels=labels)


def batch_pod(name: str, preferred: list[str] = (), scheduler_name: str = "default-scheduler",
              node_selector: dict | None = None, **extra) -> dict:
    """upstream's newPod: 10 cpu, 4Mi, preferred node affinity by name, weights len..1."""
    raw = pod_raw(name, scheduler=scheduler_name)
    spec = raw["spec"]
    spec["containers"][0]["resources"] = {"requests": {"cpu": "10", "memory": str(4 * 1024 * 1024)}}
    if preferred:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": len(preferred) - i, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [target]}]}}
            for i, target in enumerate(preferred)]}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    spec.update(extra)
    return raw


def run(sched: Scheduler, pods: list[dict]) -> tuple[list[str], list[bool]]:
    """Each pod added, popped and scheduled in turn; returns (node per pod, batched per pod)."""
    placed, batched = [], []
    for raw in pods:
        sched.on_pod_add(raw)
        pod = sched.queue.pop(timeout=1)
        assert pod is not None and pod.name == raw["metadata"]["name"]
        fwk = sched.frameworks[pod.scheduler_name]
        before = fwk.batch.batched_pods if fwk.batch else 0
        sched.schedule_one(pod)
        assert sched.wait_for_binds(5)
        placed.append(next((n for key, n, _uid in sched.client.binds if key == pod.key), ""))
        batched.append(bool(fwk.batch) and fwk.batch.batched_pods > before)
    return placed, batched


def nodes_of(sched: Scheduler, *raws: dict) -> Scheduler:
    for raw in raws:
        sched.on_node_add(raw)
    return sched


# (name, nodes as (name, maxPods), pods as (name, preferred nodes, scheduler), expected nodes, batched)
UPSTREAM_SCENARIOS = [
    ("one pod one node", [("n1", 1)], [("p1", [], None)], ["n1"], [False]),
    ("three pod batch", [("n3", 1), ("n2", 1), ("n1", 1)],
     [("p1", ["n1", "n2", "n3"], None), ("p2", ["n1", "n2", "n3"], None), ("p3", ["n1", "n2", "n3"], None)],
     ["n1", "n2", "n3"], [False, True, True]),
    ("two consecutive batches", [("n4", 1), ("n3", 1), ("n2", 1), ("n1", 1)],
     [("p1", ["n1", "n2"], None), ("p2", ["n1", "n2"], None), ("p3", ["n4", "n3"], None), ("p4", ["n4", "n3"], None)],
     ["n1", "n2", "n4", "n3"], [False, True, False, True]),
    ("rescoring enables batching for multiple pods per node", [("n4", 2), ("n3", 2), ("n2", 2), ("n1", 2)],
     [("p1", ["n1", "n2"], None), ("p2", ["n1", "n2"], None), ("p3", ["n4", "n3"], None), ("p4", ["n4", "n3"], None)],
     ["n1", "n1", "n4", "n4"], [False, True, False, True]),
    ("rescoring falls back to next cached node when last chosen node is not feasible", [("n1", 2), ("n2", 2)],
     [("p1", ["n1", "n2"], None), ("p2", ["n1", "n2"], None), ("p3", ["n1", "n2"], None)],
     ["n1", "n1", "n2"], [False, True, True]),
    ("no batching between schedulers", [("n3", 1), ("n2", 1), ("n1", 1)],
     [("p1", ["n1", "n2", "n3"], None), ("p2", ["n1", "n2", "n3"], "mysched")], ["n1", "n2"], [False, False]),
]


@pytest.mark.parametrize("name,nodes,pods,expected,batched", UPSTREAM_SCENARIOS, ids=[s[0] for s in UPSTREAM_SCENARIOS])
def test_upstream_batch_scenarios(name, nodes, pods, expected, batched):
    sched = nodes_of(scheduler(profile(), profile("mysched")), *(node(n, m) for n, m in nodes))
    raws = [batch_pod(p, preferred, scheduler_name=s or "default-scheduler") for p, preferred, s in pods]
    assert run(sched, raws) == (expected, batched)


@pytest.mark.parametrize("name,nodes,pods,expected,_batched", UPSTREAM_SCENARIOS,
                         ids=[s[0] for s in UPSTREAM_SCENARIOS])
def test_the_gate_off_places_the_same_and_batches_nothing(name, nodes, pods, expected, _batched):
    sched = nodes_of(scheduler(profile(), profile("mysched"), gate=False), *(node(n, m) for n, m in nodes))
    raws = [batch_pod(p, preferred, scheduler_name=s or "default-scheduler") for p, preferred, s in pods]
    assert run(sched, raws) == (expected, [False] * len(pods))
    assert all(fwk.batch is None for fwk in sched.frameworks.values())


def test_distinct_pods_on_distinct_nodes_never_batch():
    sched = nodes_of(scheduler(), *(node(f"n{i}", 10, {"forpod": str(i)}) for i in (3, 2, 1)))
    raws = [batch_pod(f"p{i}", node_selector={"forpod": str(i)}) for i in (1, 2, 3)]
    assert run(sched, raws) == (["n1", "n2", "n3"], [False, False, False])


def test_an_unschedulable_pod_is_not_batched():
    sched = nodes_of(scheduler(), node("n1", 1))
    placed, batched = run(sched, [batch_pod("p1"), batch_pod("p2")])
    assert placed == ["n1", ""] and batched == [False, False]


# -- what makes a pod unsignable, or a profile unable to sign ------------------------------

def test_default_topology_spread_makes_every_pod_unbatchable():
    sched = nodes_of(scheduler({"schedulerName": "default-scheduler"}), *(node(f"n{i}", 1) for i in (3, 2, 1)))
    pods = [batch_pod(f"p{i}", ["n1", "n2", "n3"]) for i in (1, 2, 3)]
    assert run(sched, pods) == (["n1", "n2", "n3"], [False, False, False])
    assert sched.frameworks["default-scheduler"].sign_pod(PodInfo(pods[0])) is None


@pytest.mark.parametrize("extra", [
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
    {"affinity": {"podAntiAffinity": {}}},
    {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}},
    {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
], ids=["topology spread", "pod anti-affinity", "pod affinity", "resource claim"])
def test_pods_a_plugin_cannot_sign(extra):
    fwk = scheduler().frameworks["default-scheduler"]
    assert fwk.sign_pod(PodInfo(batch_pod("p", **extra))) is None
    assert fwk.sign_pod(PodInfo(batch_pod("p"))) is not None


def test_signature_covers_what_plugins_read_and_nothing_else():
    fwk = scheduler().frameworks["default-scheduler"]

    def sign(**changes) -> str:
        raw = batch_pod("p", ["n1"])
        for key, value in changes.items():
            raw["spec"][key] = value
        return fwk.sign_pod(PodInfo(raw))

    base = sign()
    # Names, configMap and secret volumes and container names do not matter.
    other = batch_pod("other-name", ["n1"])
    other["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y"}}]
    assert fwk.sign_pod(PodInfo(other)) == base
    assert sign(tolerations=[{"key": "a", "operator": "Exists"}]) != base
    assert sign(nodeSelector={"a": "b"}) != base
    assert sign(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]) != base
    labelled = batch_pod("p", ["n1"])
    labelled["metadata"]["labels"] = {"app": "x"}
    assert fwk.sign_pod(PodInfo(labelled)) != base  # existing pods' affinity may match labels
    ignoring = scheduler(profile(pluginConfig=[NO_DEFAULT_SPREAD, {
        "name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}])).frameworks["default-scheduler"]
    assert ignoring.sign_pod(PodInfo(labelled)) == ignoring.sign_pod(PodInfo(batch_pod("p", ["n1"])))


def test_a_plugin_without_a_signer_turns_signatures_off(monkeypatch):
    monkeypatch.delattr(ImageLocality, "sign_pod")
    fwk = scheduler().frameworks["default-scheduler"]
    assert fwk.signers is None and fwk.sign_pod(PodInfo(batch_pod("p"))) is None


# -- each rule that drops a kept ranking (batchStateCompatible, refreshHintCandidates) -------

def flushed(reason: str) -> float:
    return metrics.REGISTRY.get_sample_value("scheduler_batch_cache_flushed_total",
                                             {"profile": "default-scheduler", "reason": reason}) or 0.0


def three_full_nodes() -> Scheduler:
    return nodes_of(scheduler(profile(), profile("mysched")), *(node(f"n{i}", 1) for i in (3, 2, 1)))


def test_rule_another_pod_in_between_drops_the_ranking():
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    sched.queue.scheduling_cycle += 1  # a pod popped and skipped, or failed, in between
    before = flushed("pod_skipped")
    assert run(sched, [batch_pod("p2", ["n1", "n2", "n3"])])[1] == [False]
    assert flushed("pod_skipped") == before + 1


def test_rule_a_nominated_pod_drops_the_ranking():
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    nominated = batch_pod("p2", ["n1", "n2", "n3"])
    nominated["status"]["nominatedNodeName"] = "n3"
    before = flushed("pod_nominated")
    assert run(sched, [nominated]) == (["n3"], [False])  # the nomination, not the hint n2
    assert flushed("pod_nominated") == before + 1


def test_rule_a_different_signature_drops_the_ranking():
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    before = flushed("pod_incompatible")
    assert run(sched, [batch_pod("p2", ["n3", "n2", "n1"])]) == (["n3"], [False])
    assert flushed("pod_incompatible") == before + 1


def test_rule_a_ranking_older_than_500ms_expires(monkeypatch):
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    later = time.monotonic() + batch_module.MAX_BATCH_AGE_S + 0.1
    monkeypatch.setattr(batch_module.time, "monotonic", lambda: later)
    before = flushed("expired")
    assert run(sched, [batch_pod("p2", ["n1", "n2", "n3"])]) == (["n2"], [False])
    assert flushed("expired") == before + 1


def test_rule_the_previous_node_gone_drops_the_ranking():
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    sched.on_node_delete(node("n1", 1))
    before = flushed("node_missing")
    assert run(sched, [batch_pod("p2", ["n1", "n2", "n3"])]) == (["n2"], [False])
    assert flushed("node_missing") == before + 1


def test_rule_a_kept_node_gone_drops_the_ranking_on_rescore():
    sched = nodes_of(scheduler(), node("n1", 2), node("n2", 2))
    run(sched, [batch_pod("p1", ["n1", "n2"])])
    sched.on_node_delete(node("n2", 2))
    before = flushed("node_missing")
    assert run(sched, [batch_pod("p2", ["n1", "n2"])]) == (["n1"], [False])
    assert flushed("node_missing") == before + 1


def test_rule_a_hint_that_fails_its_filters_falls_back_to_a_full_cycle():
    sched = three_full_nodes()
    run(sched, [batch_pod("p1", ["n1", "n2", "n3"])])
    sched.on_node_update(node("n2", 1), dict(node("n2", 1), spec={"unschedulable": True}))
    hint_not_used = metrics.REGISTRY.get_sample_value(
        "scheduler_batch_attempts_total", {"profile": "default-scheduler", "result": "hint_not_used"}) or 0.0
    assert run(sched, [batch_pod("p2", ["n1", "n2", "n3"])]) == (["n3"], [False])
    assert metrics.REGISTRY.get_sample_value(
        "scheduler_batch_attempts_total", {"profile": "default-scheduler", "result": "hint_not_used"}) == hint_not_used + 1


def test_rule_a_single_feasible_node_leaves_no_ranking():
    sched = nodes_of(scheduler(), node("n1", 1), node("n2", 1))
    before = flushed("empty_list")
    # p2 differs from p1 (no hint) and only n2 is left for it.
    assert run(sched, [batch_pod("p1", ["n1", "n2"]), batch_pod("p2", ["n2", "n1"])]) == (["n1", "n2"], [False, False])
    assert flushed("empty_list") == before + 1
    assert sched.frameworks["default-scheduler"].batch.sorted_nodes is None


def test_sorted_scored_nodes_pop_as_gos_heap():
    totals = [5, 9, 9, 1, 9, 5, 7]
    ranking = SortedScoredNodes([ScoredNode(f"n{i}", {}, t) for i, t in enumerate(totals)])
    popped = [ranking.pop() for _unused in totals]
    assert [n.total for n in popped] == sorted(totals, reverse=True)
    # The first pop is the node select_host picks, ties broken by the heap's layout.
    from kubesched.schedule_one import select_host_index
    assert popped[0].name == f"n{select_host_index(totals)}"


def test_the_feature_gate_flag_reaches_the_scheduler():
    from kubesched import cli

    args, warnings = cli.parse_flags(["--feature-gates=OpportunisticBatching=false"])
    assert warnings == [] and args.feature_gates == {"OpportunisticBatching": False}
    cfg = parse_config({**BASE, "profiles": [profile()]})
    assert Scheduler(cfg, FakeClient(), feature_gates=args.feature_gates).frameworks["default-scheduler"].batch is None
    assert Scheduler(cfg, FakeClient()).frameworks["default-scheduler"].batch is not None  # on by default, as v1.37
