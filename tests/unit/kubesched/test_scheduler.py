"""schedule_one end to end with fake plugins and a recording client: filter, score, select,
assume, bind asynchronously, events, status, requeue."""

import random

import pytest
from kubesched_fakes import FAKE_REGISTRY, FakeClient, node_raw, pod_raw

from kubesched.config import parse_config
from kubesched.framework.types import PodInfo
from kubesched.schedule_one import CLEAR_NOMINATION, num_feasible_nodes_to_find, select_host, status_patch
from kubesched.scheduler import Scheduler

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


@pytest.mark.parametrize("nodes, percentage, expected", [
    (50, 0, 50), (99, 0, 99), (100, 0, 100), (500, 0, 230), (1000, 0, 420), (5000, 0, 500),
    (6000, 0, 300), (10000, 0, 500), (100000, 0, 5000), (1000, 10, 100), (5000, 10, 500), (300, 50, 150),
    (5000, 1, 100), (5000, 100, 5000),
])
def test_num_feasible_nodes_to_find_matches_upstream(nodes, percentage, expected):
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_select_host_takes_the_best_and_breaks_ties_evenly():
    assert select_host(["a", "b", "c"], [1, 9, 3]) == "b"
    rng = random.Random(7)
    picks = [select_host(["a", "b", "c", "d"], [5, 9, 9, 9], rng) for _unused in range(3000)]
    assert "a" not in picks
    for name in "bcd":
        assert 850 < picks.count(name) < 1150


def make(profiles=None, nodes=(), pods=(), **cfg_fields):
    cfg = parse_config({**BASE, "profiles": profiles or [{}], **cfg_fields})
    client = FakeClient()
    sched = Scheduler(cfg, client, registry=FAKE_REGISTRY, rng=random.Random(1))
    for raw in nodes:
        sched.on_node_add(raw)
    for raw in pods:
        sched.on_pod_add(raw)
    return sched, client


def drain(sched, limit=100):
    """Schedule until the active queue is empty; wait for the binds."""
    for _unused in range(limit):
        p = sched.queue.pop(timeout=0)
        if p is None:
            break
        sched.schedule_one(p)
    sched.bind_pool.shutdown(wait=True)


def events(sched):
    return [(item[2], item[3], item[5]) for item in list(sched.broadcaster.pending.queue)]


def confirm_binds(sched, client):
    """Feed the bindings back as the watch would."""
    for key, node, uid in client.binds:
        ns, name = key.split("/")
        sched.on_pod_update(pod_raw(name, ns, uid=uid), pod_raw(name, ns, uid=uid, node=node))


def test_pod_is_bound_to_the_best_node_with_the_scheduled_event(fake_registry):
    sched, client = make(nodes=[node_raw("n1", labels={"score": "10"}), node_raw("n2", labels={"score": "90"})],
                         pods=[pod_raw("web")])
    drain(sched)
    assert [(k, n) for k, n, _unused in client.binds] == [("default/web", "n2")]
    assert events(sched) == [("Normal", "Scheduled", "Successfully assigned default/web to n2")]
    assert sched.cache.is_assumed(client.binds[0][2])
    confirm_binds(sched, client)
    assert not sched.cache.is_assumed(client.binds[0][2])
    assert sched.cache.nodes["n2"].pods


def test_unschedulable_pod_gets_failed_scheduling_event_and_condition(fake_registry):
    sched, client = make(nodes=[node_raw("n1", labels={"broken": "yes"}), node_raw("n2", labels={"reject": "yes"}),
                                node_raw("n3", labels={"reject": "yes"})],
                         pods=[pod_raw("web")])
    drain(sched)
    msg = ("0/3 nodes are available: 1 node(s) were broken, 2 node(s) had reject label. preemption: 0/3 nodes are "
           "available: 3 No preemption victims found for incoming pod.")
    assert events(sched) == [("Warning", "FailedScheduling", msg)]
    [(key, _unused, patch)] = client.status_patches
    cond = patch["status"]["conditions"][0]
    assert (key, cond["type"], cond["status"], cond["reason"], cond["message"]) == \
        ("default/web", "PodScheduled", "False", "Unschedulable", msg)
    uid = next(iter(sched.queue.entries))
    assert sched.queue.where(uid) == "unschedulable"
    assert sched.queue.entries[uid].pod.unschedulable_plugins == {"FakeLabelFilter"}


def test_removing_the_rejection_reschedules_without_restart(fake_registry):
    bad = node_raw("n1", labels={"reject": "yes"}, rv="1")
    sched, client = make(nodes=[bad], pods=[pod_raw("web")])
    drain(sched)
    assert client.binds == []
    good = node_raw("n1", rv="2")
    sched.on_node_update(bad, good)
    sched.queue.clock = lambda: 10**9  # backoff over
    sched.queue.flush_backoff_completed()
    sched.bind_pool = type(sched.bind_pool)(max_workers=2)
    drain(sched)
    assert [(k, n) for k, n, _unused in client.binds] == [("default/web", "n1")]


def test_failed_bind_is_forgotten_and_requeued(fake_registry):
    sched, client = make(nodes=[node_raw("n1")], pods=[pod_raw("web")])
    client.fail_binds.add("web")
    drain(sched)
    uid = next(iter(sched.queue.entries))
    assert not sched.cache.is_assumed(uid)
    assert sched.cache.nodes["n1"].requested.milli_cpu == 0
    assert sched.queue.where(uid) == "backoff"
    assert [e[1] for e in events(sched)] == ["FailedScheduling"]


def test_foreign_scheduler_name_is_never_touched(fake_registry):
    sched, client = make(profiles=[{"schedulerName": "mine"}], nodes=[node_raw("n1")],
                         pods=[pod_raw("theirs", scheduler="default-scheduler"), pod_raw("ours", scheduler="mine")])
    drain(sched)
    assert [k for k, _unused, _unused in client.binds] == ["default/ours"]
    assert all(e[2].endswith("ours to n1") for e in events(sched))


def test_several_profiles_in_one_process(fake_registry):
    sched, client = make(profiles=[{"schedulerName": "a"},
                                   {"schedulerName": "b", "plugins": {"filter": {"disabled": [{"name": "*"}]}}}],
                         nodes=[node_raw("n1", labels={"reject": "yes"})],
                         pods=[pod_raw("pa", scheduler="a"), pod_raw("pb", scheduler="b")])
    drain(sched)
    assert [k for k, _unused, _unused in client.binds] == ["default/pb"]


def test_terminating_and_already_bound_pods_are_skipped(fake_registry):
    sched, client = make(nodes=[node_raw("n1")])
    sched.queue.add(PodInfo(pod_raw("dying", deleting=True)))
    sched.on_pod_add(pod_raw("bound", node="n1"))
    drain(sched)
    assert client.binds == []
    assert events(sched) == [("Warning", "FailedScheduling", "skip schedule deleting pod: default/dying")]


def test_no_nodes_message(fake_registry):
    sched, client = make(pods=[pod_raw("web")])
    drain(sched)
    assert events(sched) == [("Warning", "FailedScheduling", "no nodes available to schedule pods")]


def test_preemption_nominates_a_node(fake_registry):
    sched, client = make(nodes=[node_raw("n1", labels={"reject": "yes"})],
                         pods=[pod_raw("urgent", labels={"nominate": "n1"})])
    drain(sched)
    patch = client.status_patches[0][2]["status"]
    assert patch["nominatedNodeName"] == "n1"
    assert [p.name for p in sched.nominator.nominated_pods_for_node("n1")] == ["urgent"]


def test_preemption_without_a_candidate_clears_the_nomination(fake_registry):
    # A pod nominated earlier (status and nominator) whose next preemption finds no candidate
    # loses the nomination in memory and on the API (upstream: ModeOverride with "").
    raw = pod_raw("urgent")
    raw["status"]["nominatedNodeName"] = "n1"
    sched, client = make(nodes=[node_raw("n1", labels={"reject": "yes"})], pods=[raw])
    assert [p.name for p in sched.nominator.nominated_pods_for_node("n1")] == ["urgent"]
    drain(sched)
    assert client.status_patches[0][2]["status"]["nominatedNodeName"] is None
    assert sched.nominator.nominated_pods_for_node("n1") == [] and not sched.nominator.has_nominated_pods()


def test_no_post_filter_plugins_clears_the_nomination(fake_registry):
    raw = pod_raw("urgent")
    raw["status"]["nominatedNodeName"] = "n1"
    sched, client = make(profiles=[{"plugins": {"postFilter": {"disabled": [{"name": "*"}]}}}],
                         nodes=[node_raw("n1", labels={"reject": "yes"})], pods=[raw])
    drain(sched)
    assert client.status_patches[0][2]["status"]["nominatedNodeName"] is None
    assert not sched.nominator.has_nominated_pods()


def test_round_robin_start_index_advances_by_processed_nodes(fake_registry):
    nodes = [node_raw(f"n{i:03d}") for i in range(200)]
    sched, client = make(nodes=nodes, pods=[pod_raw("a")], percentageOfNodesToScore=10)
    drain(sched)
    # 200 nodes at 10% -> 100 feasible nodes to find (the minimum): the next cycle starts at 100.
    assert sched.next_start_node_index == 100


def test_status_patch_is_skipped_when_nothing_changes():
    raw = pod_raw("p")
    raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "same", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert status_patch(raw, "Unschedulable", "same", None) is None
    patch = status_patch(raw, "Unschedulable", "different", None)
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    raw["status"]["nominatedNodeName"] = "n1"
    assert status_patch(raw, "Unschedulable", "same", CLEAR_NOMINATION) == {"status": {"nominatedNodeName": None}}
    assert status_patch(raw, "Unschedulable", "same", "n1") is None
    assert status_patch(raw, "Unschedulable", "same", "n2") == {"status": {"nominatedNodeName": "n2"}}


def test_pod_scheduled_condition_carries_the_observed_generation():
    # 1.37 writes observedGeneration (PodObservedGenerationTracking) and a new generation alone
    # makes the condition differ (podutil.UpdatePodCondition compares it).
    raw = pod_raw("p")
    raw["metadata"]["generation"] = 3
    cond = status_patch(raw, "Unschedulable", "msg", None)["status"]["conditions"][0]
    assert cond["observedGeneration"] == 3
    raw["status"]["conditions"] = [cond]
    assert status_patch(raw, "Unschedulable", "msg", None) is None
    raw["metadata"]["generation"] = 4
    assert status_patch(raw, "Unschedulable", "msg", None)["status"]["conditions"][0]["observedGeneration"] == 4


def test_repeated_bind_failures_back_off_longer(fake_registry):
    sched, client = make(nodes=[node_raw("n1")], pods=[pod_raw("web")])
    client.fail_binds.add("web")
    drain(sched)
    uid = next(iter(sched.queue.entries))
    first = sched.queue.entries[uid]
    assert first.consecutive_errors == 1 and first.pod.attempts == 1
    sched.queue.clock = lambda: 10**9
    sched.queue.flush_backoff_completed()
    sched.bind_pool = type(sched.bind_pool)(max_workers=2)
    drain(sched)
    again = sched.queue.entries[uid]
    assert again.consecutive_errors == 2 and again.pod.attempts == 2
    assert sched.queue.backoff_duration(again.consecutive_errors) == 2
