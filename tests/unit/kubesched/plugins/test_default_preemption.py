import threading
import time

import pytest
from plugin_builders import FakeHandle, make_node, make_pod, place

from kubesched import metrics
from kubesched.framework.interface import ActionType, Code, CycleState, EventResource, PluginArgsError, Status
from kubesched.framework.parallelize import Parallelizer
from kubesched.plugins.default_preemption import (
    POD,
    POD_GROUP,
    Candidate,
    DefaultPreemption,
    Victim,
    filter_victims_with_pdb_violation,
)
from kubesched.plugins.node_ports import NodePorts
from kubesched.plugins.node_resources_fit import NodeResourcesFit

U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def low(name, priority, cpu="1", start="2026-01-01T00:00:00Z", **kw):
    return make_pod(name, priority=priority, reqs=[{"cpu": cpu}], start_time=start, **kw)


def units(pods):
    """Each pod a victim of its own, as without GenericWorkload."""
    return [Victim([p], p.priority, POD, 0.0) for p in pods]


# The handles whose preemptions may still run in the background; each ends with its test.
IN_BACKGROUND = []


@pytest.fixture(autouse=True)
def background_work_ends_with_its_test():
    """A test's background preemptions end before the next test starts, so the goroutine
    metrics and activations a test reads are its own."""
    yield
    while IN_BACKGROUND:
        handle = IN_BACKGROUND.pop()
        for event in getattr(handle, "releases", {}).values():
            event.set()
        handle.parallelizer.shutdown()


def setup(node_pods, *, pdbs=(), args=None, filters=None, node_cpu="2", async_preemption=False):
    """node_pods: {node name: [pods]}; returns (plugin, handle, nodes)."""
    nodes = [place(make_node(name, cpu=node_cpu, memory="1Gi", pods=10), *pods) for name, pods in node_pods.items()]
    handle = FakeHandle(nodes, pdbs=list(pdbs))
    handle.async_preemption = async_preemption
    if async_preemption:
        handle.parallelizer = Parallelizer(4, lazy=True)
        IN_BACKGROUND.append(handle)
    handle.filters = filters if filters is not None else [NodeResourcesFit(None, handle)]
    plugin = DefaultPreemption(args, handle)
    plugin.random_offset = lambda n: 0
    plugin.clock = lambda: 2_000_000_000.0
    return plugin, handle, nodes


def preempt(plugin, handle, pod, statuses=None):
    """Run the cycle's PreFilter and Filter as the runtime would, then PostFilter."""
    state = CycleState()
    assert handle.run_pre_filters(state, pod) is None
    if statuses is None:
        statuses = {}
        for node in handle.snapshot().node_info_list:
            status = handle.run_filter_plugins_with_nominated_pods(state, pod, node)
            assert status is not None, f"{node.name} fits; preemption test needs a full cluster"
            statuses[node.name] = status
    return plugin.post_filter(state, pod, statuses)


def deleted(handle):
    return handle.client.deleted()


def test_evicts_only_what_is_needed_lowest_priority_first():
    plugin, handle, _unused = setup({"node1": [low("p1", 1), low("p2", 2)]})
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == "node1"
    assert status.code == Code.SUCCESS
    assert status.message() == "preemption: found a potential placement for pod on node node1, preempting 1 victims"
    assert deleted(handle) == ["p1"]


def test_victim_gets_disruption_target_then_is_deleted_and_an_event():
    plugin, handle, _unused = setup({"node1": [low("p1", 1, cpu="2")]})
    pod = make_pod("hi", priority=10, reqs=[{"cpu": "1"}], uid="uid-hi")
    preempt(plugin, handle, pod)
    patch, delete = handle.client.calls[0], handle.client.calls[1]
    assert patch[:2] == ("patch_status", "default/p1")
    (condition,) = patch[2]["status"]["conditions"]
    assert condition["type"] == "DisruptionTarget" and condition["status"] == "True"
    assert condition["reason"] == "PreemptionByScheduler"
    assert condition["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert delete[:2] == ("delete", "default/p1") and delete[2]["uid"].startswith("uid-p1")
    assert handle.event_recorder.events == [("p1", "Normal", "Preempted", "Preempting",
                                             "Preempted by pod uid-hi on node node1")]
    # The framework, not the plugin, nominates the preemptor from PostFilter's result.
    assert not any(c[1] == "default/hi" for c in handle.client.calls)


def test_lower_priority_nominated_pods_lose_their_nomination():
    plugin, handle, _unused = setup({"node1": [low("p1", 1, cpu="2")]})
    waiting_low = make_pod("waiting-low", priority=5)
    waiting_high = make_pod("waiting-high", priority=50)
    handle.nominator.add_nominated_pod(waiting_low, "node1")
    handle.nominator.add_nominated_pod(waiting_high, "node1")
    preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert ("patch_status", "default/waiting-low", {"status": {"nominatedNodeName": None}}) in handle.client.calls
    assert not any(c[1] == "default/waiting-high" for c in handle.client.calls)
    assert waiting_high in handle.nominator.nominated_pods_for_node("node1")
    assert waiting_low not in handle.nominator.nominated_pods_for_node("node1")


def test_preemption_policy_never():
    plugin, handle, _unused = setup({"node1": [low("p1", 1, cpu="2")]})
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}],
                                                         preemption_policy="Never"))
    assert nominated is None
    assert (status.code, status.message()) == (U, "preemption: not eligible due to preemptionPolicy=Never.")
    assert handle.client.calls == []


def test_no_lower_priority_pods():
    plugin, handle, _unused = setup({"node1": [low("p1", 10, cpu="2")]})
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == ""
    assert (status.code, status.message()) == (
        U, "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_unresolvable_nodes_are_not_helpful():
    plugin, handle, _unused = setup({"node1": [], "node2": []})
    statuses = {"node1": Status(UU, "node(s) had untolerated taint(s)"),
                "node2": Status(UU, "node(s) didn't match Pod's node affinity/selector")}
    nominated, status = plugin.post_filter(CycleState(), make_pod("hi", priority=10), statuses)
    assert nominated == ""
    assert status.message() == "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def test_reasons_histogram_mixes_node_statuses_and_absent_nodes():
    plugin, handle, _unused = setup({"node1": [low("p1", 10, cpu="2")], "node2": [low("p2", 10, cpu="2")], "node3": []})
    pod = make_pod("hi", priority=10, reqs=[{"cpu": "1"}])
    statuses = {"node1": Status(U, "Insufficient cpu"), "node2": Status(U, "Insufficient cpu"),
                "node3": Status(UU, "node(s) had untolerated taint(s)")}
    _unused, status = preempt(plugin, handle, pod, statuses)
    assert status.message() == ("preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
                                "2 No preemption victims found for incoming pod.")


def test_removing_all_victims_is_not_enough():
    high_resident = low("resident", 100, cpu="1500m")
    plugin, handle, _unused = setup({"node1": [high_resident, low("p1", 1, cpu="500m")]})
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == ""
    assert status.message() == "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    assert handle.client.calls == []


def test_other_filters_count_when_victims_are_removed():
    port = [{"containerPort": 80, "hostPort": 80}]
    holder = make_pod("holder", priority=1, ports=port)
    plugin, handle, nodes = setup({"node1": [holder]}, node_cpu="4")
    handle.filters = [NodeResourcesFit(None, handle), NodePorts(None, handle)]
    nominated, _unused = preempt(plugin, handle, make_pod("hi", priority=10, ports=port))
    assert nominated == "node1" and deleted(handle) == ["holder"]


def pdb(selector_labels, allowed, namespace="default", disrupted=None):
    return {"metadata": {"name": "pdb", "namespace": namespace},
            "spec": {"selector": {"matchLabels": selector_labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted or {}}}


def test_pdb_protected_pod_is_reprieved_first():
    early = low("early", 1, start="2026-01-01T00:00:00Z", labels={"app": "b"})
    late = low("late", 1, start="2026-01-02T00:00:00Z", labels={"app": "a"})
    # Without a PDB the earlier-started pod is more important and stays.
    plugin, handle, _unused = setup({"node1": [early, late]})
    preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert deleted(handle) == ["late"]
    # A PDB that allows no disruption of "late" gets it reprieved before anyone else.
    early2 = low("early", 1, start="2026-01-01T00:00:00Z", labels={"app": "b"})
    late2 = low("late", 1, start="2026-01-02T00:00:00Z", labels={"app": "a"})
    plugin, handle, _unused = setup({"node1": [early2, late2]}, pdbs=[pdb({"app": "a"}, 0)])
    preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert deleted(handle) == ["early"]


def test_pdb_violation_counted_when_unavoidable_and_node_without_violation_preferred():
    plugin, handle, _unused = setup({"node1": [low("a1", 1, cpu="2", labels={"app": "a"})],
                                     "node2": [low("b1", 5, cpu="2", labels={"app": "b"})]},
                                    pdbs=[pdb({"app": "a"}, 0)])
    nominated, _unused = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    # node1's victim has lower priority but violates its PDB: node2 wins on fewest violations.
    assert nominated == "node2" and deleted(handle) == ["b1"]


@pytest.mark.parametrize("pdbs, want_violating", [
    ([pdb({"app": "a"}, 0)], ["a1", "a2"]),
    ([pdb({"app": "a"}, 1)], ["a2"]),
    ([pdb({"app": "a"}, 0, disrupted={"a1": "2026-01-01T00:00:00Z"})], ["a2"]),
    ([pdb({"app": "a"}, 0, namespace="other")], []),
    ([pdb({}, 0)], []),      # an empty selector selects nothing for preemption
])
def test_filter_victims_with_pdb_violation(pdbs, want_violating):
    pods = [low("a1", 1, labels={"app": "a"}), low("a2", 1, labels={"app": "a"}), low("c", 1)]
    violating, non_violating = filter_victims_with_pdb_violation(units(pods), pdbs)
    assert [(v.pods[0].name, count) for v, count in violating] == [(name, 1) for name in want_violating]
    assert [v.pods[0].name for v in non_violating] == [p.name for p in pods if p.name not in want_violating]


def test_a_victim_group_violates_as_a_whole():
    """A group evicted whole is one victim: one pod a budget protects makes all of it violating."""
    group = Victim([low("a1", 1, labels={"app": "a"}), low("c", 1)], 1, POD_GROUP, 0.0)
    violating, non_violating = filter_victims_with_pdb_violation([group], [pdb({"app": "a"}, 0)])
    assert violating == [(group, 1)] and non_violating == []


def test_victim_stops_counting_at_the_first_pdb_it_violates():
    # v1.37.1's FilterVictimsWithPDBViolation (framework/preemption/util.go) returns at the first
    # violated PDB: a1 breaks "apps" and leaves "web" untouched, so b1 still fits in "web".
    apps = pdb({"app": "a"}, 0)
    web = pdb({"tier": "web"}, 1)
    web["metadata"]["name"] = "web"
    victims = [low("a1", 1, labels={"app": "a", "tier": "web"}), low("b1", 1, labels={"app": "b", "tier": "web"})]
    violating, non_violating = filter_victims_with_pdb_violation(units(victims), [apps, web])
    assert [v.pods[0].name for v, _count in violating] == ["a1"] and [v.pods[0].name for v in non_violating] == ["b1"]


@pytest.mark.parametrize("layout, want", [
    # lowest highest-victim priority
    ({"node1": [low("a", 5, cpu="2")], "node2": [low("b", 3, cpu="2")]}, "node2"),
    # same highest priority: lowest sum of priorities
    ({"node1": [low("a", 3), low("a2", 3)], "node2": [low("b", 3), low("b2", 1)]}, "node2"),
    # same priorities: fewer victims means a lower sum
    ({"node1": [low("a", 1), low("a2", 1)], "node2": [low("b", 1, cpu="2")]}, "node2"),
    # latest start time of the most important victims
    ({"node1": [low("a", 1, cpu="2", start="2026-01-01T00:00:00Z")],
      "node2": [low("b", 1, cpu="2", start="2026-01-05T00:00:00Z")]}, "node2"),
])
def test_pick_one_node_for_preemption(layout, want):
    plugin, handle, _unused = setup(layout)
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "2"}]))
    assert status.code == Code.SUCCESS and nominated == want


def test_terminating_victim_on_nominated_node_blocks_preemption():
    terminating = low("t", 1, cpu="2", deleting=True, conditions=[
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}])
    plugin, handle, _unused = setup({"node1": [terminating]})
    pod = make_pod("hi", priority=10, reqs=[{"cpu": "1"}], nominated="node1")
    _unused, status = preempt(plugin, handle, pod)
    assert status.message() == "preemption: not eligible due to a terminating pod on the nominated node."


def test_victims_already_terminating_are_not_deleted_again():
    plugin, handle, _unused = setup({"node1": [low("t", 1, cpu="2", deleting=True)]})
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == "node1" and deleted(handle) == []


def test_api_error_fails_the_preemption():
    plugin, handle, _unused = setup({"node1": [low("p1", 1, cpu="2")]})
    handle.client.fail("delete", RuntimeError("apiserver down"))
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated is None and status.code == Code.ERROR and "apiserver down" in status.message()


def test_victim_already_gone_is_fine():
    class NotFound(Exception):
        status = 404

    plugin, handle, _unused = setup({"node1": [low("p1", 1, cpu="2")]})
    handle.client.fail("delete", NotFound("gone"))
    nominated, status = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == "node1" and status.code == Code.SUCCESS


def test_candidate_search_stops_after_enough_candidates_from_the_offset():
    layout = {f"node{i}": [low(f"p{i}", 1, cpu="2")] for i in range(5)}
    plugin, handle, _unused = setup(layout, args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    plugin.random_offset = lambda n: 3
    nominated, _unused = preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "1"}]))
    assert nominated == "node3"


@pytest.mark.parametrize("pct, absolute, nodes, want", [
    (5, 100, 10, 10),
    (10, 100, 300, 100),
    (10, 100, 1000, 100),
    (20, 100, 1000, 200),
    (10, 0, 5000, 500),
    (0, 1, 50, 1),
])
def test_calculate_num_candidates(pct, absolute, nodes, want):
    plugin = DefaultPreemption({"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": absolute},
                               FakeHandle())
    assert plugin.calculate_num_candidates(nodes) == want


@pytest.mark.parametrize("args, field, message", [
    ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage", "not in valid range [0, 100]"),
    ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute", "not in valid range [0, inf)"),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "minCandidateNodesPercentage",
     "cannot be zero at the same time as minCandidateNodesAbsolute"),
    ({"minCandidateNodesPercentage": "10"}, "minCandidateNodesPercentage", "must be an integer"),
])
def test_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        DefaultPreemption(args, FakeHandle())
    assert err.value.field == field and message in err.value.message


def test_default_args():
    plugin = DefaultPreemption(None, FakeHandle())
    assert (plugin.min_candidate_nodes_percentage, plugin.min_candidate_nodes_absolute) == (10, 100)


# --- SchedulerAsyncPreemption ---------------------------------------------------------------

def hold_deletes(client, names):
    """Each named victim's delete call waits until its release is set; started says it began."""
    started = {name: threading.Event() for name in names}
    release = {name: threading.Event() for name in names}
    delete_pod = client.delete_pod

    def held(namespace, name, uid=None, grace_period=None):
        if name in release:
            started[name].set()
            assert release[name].wait(5)
        delete_pod(namespace, name, uid=uid, grace_period=grace_period)

    client.delete_pod = held
    return started, release


def goroutines(result):
    return metrics.REGISTRY.get_sample_value("scheduler_preemption_goroutines_execution_total",
                                             {"result": result}) or 0.0


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def held_async_preemption(node_pods):
    """An async-preemption plugin whose victims (the pods of node_pods, in the pods informer too)
    are deleted only once released; activations are collected."""
    plugin, handle, _unused = setup(node_pods, async_preemption=True)
    victims = [pod for pods in node_pods.values() for pod in pods]
    handle.add("pods", *(v.raw for v in victims))
    started, release = hold_deletes(handle.client, [v.name for v in victims])
    handle.releases = release
    activated = []
    handle.activate = activated.extend
    return plugin, handle, started, release, activated


def terminating(pod):
    """The pod as the informer has it once its deletion began."""
    return {**pod.raw, "metadata": {**pod.raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:01Z"}}


def first_started(started):
    """The victim whose delete call began first (all but the last begin side by side)."""
    wait_for(lambda: any(event.is_set() for event in started.values()))
    return next(name for name, event in started.items() if event.is_set())


def test_async_preemption_returns_at_once_and_the_preemptor_waits_until_its_last_victim_goes():
    victims = {"p1": low("p1", 1), "p2": low("p2", 2)}
    plugin, handle, started, release, activated = held_async_preemption({"node1": list(victims.values())})
    succeeded = goroutines("success")
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "2"}], uid="uid-hi")

    nominated, status = preempt(plugin, handle, hi)
    assert nominated == "node1" and status.code == Code.SUCCESS
    assert deleted(handle) == []
    waiting = plugin.pre_enqueue(hi)
    assert waiting.code == UU and waiting.plugin == "DefaultPreemption"
    assert waiting.message() == "waiting for the preemption for this pod to be finished"
    assert plugin.pre_enqueue(make_pod("other", priority=10)) is None
    # All but the last side by side, then the last once they are done.
    first = first_started(started)
    last = next(name for name in victims if name != first)
    time.sleep(0.05)
    assert not started[last].is_set()
    release[first].set()
    assert started[last].wait(5)
    assert plugin.pre_enqueue(hi) is not None  # the last victim is still there, not terminating
    # Its deletion reached the informer before the call returned: the preemptor may go.
    handle.informers.remove("pods", victims[last].raw)
    assert plugin.pre_enqueue(hi) is None
    release[last].set()
    wait_for(lambda: goroutines("success") == succeeded + 1)
    assert sorted(deleted(handle)) == ["p1", "p2"] and activated == []
    assert not plugin.is_pod_running_preemption(hi.uid)


def test_a_terminating_last_victim_ends_the_wait():
    victims = {"p1": low("p1", 1), "p2": low("p2", 2)}
    plugin, handle, started, release, _activated = held_async_preemption({"node1": list(victims.values())})
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "2"}])
    preempt(plugin, handle, hi)
    first = first_started(started)
    last = next(name for name in victims if name != first)
    release[first].set()
    assert started[last].wait(5)
    handle.add("pods", terminating(victims[last]))
    assert plugin.pre_enqueue(hi) is None
    release[last].set()


def test_a_preemptor_held_back_before_its_last_victim_was_known_is_activated_when_that_victim_is_gone():
    """The last victim was already terminating (an earlier attempt's) and its deletion was seen
    while PreEnqueue still had no last victim to look at: no event will come to let it go."""
    victims = {"p1": low("p1", 1), "p2": low("p2", 2)}
    plugin, handle, started, release, activated = held_async_preemption({"node1": list(victims.values())})
    succeeded = goroutines("success")
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "2"}])
    preempt(plugin, handle, hi)
    first = first_started(started)
    last = next(name for name in victims if name != first)
    handle.informers.remove("pods", victims[last].raw)  # deleted by the kubelet (or kwok) meanwhile
    assert plugin.pre_enqueue(hi) is not None  # held back: the last victim is not known yet
    release[first].set()
    release[last].set()
    wait_for(lambda: activated)  # its last step, after the goroutine metric
    assert activated == [hi] and goroutines("success") == succeeded + 1 and plugin.pre_enqueue(hi) is None


def test_a_preemption_ends_only_its_own_wait_not_a_newer_one_of_the_same_pod():
    """The last victim of the first attempt is terminating, which lets the preemptor go; its
    next attempt preempts again before the first one's background work has ended."""
    victims = {"p1": low("p1", 1, cpu="2"), "p2": low("p2", 1, cpu="2")}
    plugin, handle, started, release, activated = held_async_preemption(
        {"node1": [victims["p1"]], "node2": [victims["p2"]]})
    succeeded = goroutines("success")
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "2"}])
    preempt(plugin, handle, hi)
    first = first_started(started)
    second = "p2" if first == "p1" else "p1"
    handle.add("pods", terminating(victims[first]))
    assert plugin.pre_enqueue(hi) is None
    plugin.prepare_candidate_async(Candidate(f"node{second[1]}", [victims[second]], 0), hi)
    assert started[second].wait(5)
    release[first].set()
    wait_for(lambda: goroutines("success") == succeeded + 1)
    waiting = plugin.pre_enqueue(hi)  # the second attempt's victim is still there
    assert waiting is not None and waiting.message() == "waiting for the preemption for this pod to be finished"
    assert activated == []
    handle.informers.remove("pods", victims[second].raw)
    release[second].set()
    wait_for(lambda: goroutines("success") == succeeded + 2)
    assert plugin.pre_enqueue(hi) is None and sorted(deleted(handle)) == ["p1", "p2"]


def test_a_failed_async_eviction_spares_the_last_victim_and_activates_the_preemptor():
    plugin, handle, _unused = setup({"node1": [low("p1", 1), low("p2", 2)]}, async_preemption=True)
    handle.client.fail("delete", RuntimeError("apiserver down"))
    activated = []
    handle.activate = activated.extend
    failed = goroutines("error")
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "2"}])
    nominated, status = preempt(plugin, handle, hi)
    assert nominated == "node1" and status.code == Code.SUCCESS
    wait_for(lambda: activated)
    assert activated == [hi] and goroutines("error") == failed + 1
    assert [c[0] for c in handle.client.calls if c[0] == "delete"] == ["delete"]  # the last one was not tried
    assert plugin.pre_enqueue(hi) is None


def test_async_preemption_of_terminating_victims_starts_nothing():
    plugin, handle, _unused = setup({"node1": [low("t", 1, cpu="2", deleting=True)]}, async_preemption=True)
    hi = make_pod("hi", priority=10, reqs=[{"cpu": "1"}])
    nominated, _status = preempt(plugin, handle, hi)
    assert nominated == "node1" and plugin.pre_enqueue(hi) is None and deleted(handle) == []


def test_the_deletion_event_is_registered_only_with_async_preemption():
    sync_plugin, _handle, _unused = setup({"node1": [low("p1", 1)]})
    assert sync_plugin.events_to_register() == []
    plugin, _handle, _unused = setup({"node1": [low("p1", 1)]}, async_preemption=True)
    (event,) = plugin.events_to_register()
    assert event.resource == EventResource.ASSIGNED_POD and event.action == ActionType.DELETE
    assert event.hint(make_pod("hi"), {"spec": {"nodeName": "node1"}}, None) is False


def test_a_preemption_leaves_no_thread_behind():
    """Its background work runs on the Handle's Parallelizer (the scheduler's, started with it),
    its evictions on threads that end with them (the soak's thread check)."""
    victims = {f"p{i}": low(f"p{i}", i) for i in range(1, 5)}
    plugin, handle, started, release, _activated = held_async_preemption({"node1": list(victims.values())})
    handle.parallelizer = Parallelizer(4)  # started whole, as the scheduler's; the fixture ends it
    before = threading.active_count()
    preempt(plugin, handle, make_pod("hi", priority=10, reqs=[{"cpu": "2"}]))
    wait_for(lambda: sum(event.is_set() for event in started.values()) == 3)  # all but the last at once
    for event in release.values():
        event.set()
    wait_for(lambda: sorted(deleted(handle)) == sorted(victims))
    wait_for(lambda: threading.active_count() == before)
