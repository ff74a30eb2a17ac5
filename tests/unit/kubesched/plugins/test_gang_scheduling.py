"""GangScheduling and the pod group cycle (GenericWorkload): the plugin's texts and rules as
v1.37.1's gangscheduling.go words them, and a gang through a whole Scheduler with the real
default plugins: none of it is bound until all of it fits, and nothing changes with the gate off."""

import random
import time

import pytest
from kubesched_fakes import FakeClient, node_raw, pod_raw

from kubesched import metrics
from kubesched.backend.pod_groups import PodGroups
from kubesched.config import parse_config
from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code
from kubesched.framework.types import PodInfo
from kubesched.framework.waiting_pods import WaitingPod
from kubesched.plugins.gang_scheduling import PERMIT_TIMEOUT_SECONDS, GangScheduling
from kubesched.scheduler import Scheduler

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
GATE = {"GenericWorkload": True}


def member(name, group="train", *, cpu="1", node="", uid=None, namespace="default"):
    raw = pod_raw(name, namespace, cpu=cpu, node=node, uid=uid or f"uid-{name}")
    raw["spec"]["schedulingGroup"] = {"podGroupName": group}
    return raw


def pod_group(name="train", min_count=4, namespace="default", basic=False):
    policy = {"basic": {}} if basic else {"gang": {"minCount": min_count}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}", "generation": 1,
                         "resourceVersion": "1"},
            "spec": {"schedulingPolicy": policy}}


# -- the plugin alone -------------------------------------------------------------------------

class Groups:
    """A PodGroups over plain dicts, with a set of assumed UIDs."""

    def __init__(self, groups=(), pods=(), assumed=()):
        store = {f"{g['metadata']['namespace']}/{g['metadata']['name']}": g for g in groups}
        self.assumed = set(assumed)
        self.pod_groups = PodGroups(store.get, self.assumed.__contains__)
        for raw in pods:
            self.pod_groups.add_pod(raw)


def plugin(groups=(), pods=(), assumed=()):
    g = Groups(groups, pods, assumed)
    return GangScheduling(None, Handle(pod_groups=g.pod_groups)), g


def test_pre_enqueue_lets_pods_of_no_group_and_of_basic_groups_through():
    pl, _unused = plugin([pod_group(basic=True)], [member("a")])
    assert pl.pre_enqueue(PodInfo(pod_raw("lonely"))) is None
    assert pl.pre_enqueue(PodInfo(member("a"))) is None


def test_pre_enqueue_waits_for_the_pod_group_with_upstreams_words():
    pl, _unused = plugin([], [member("a")])
    status = pl.pre_enqueue(PodInfo(member("a")))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == 'waiting for pods\'s pod group "train" to appear in scheduling queue'
    assert status.plugin == "GangScheduling"


def test_pre_enqueue_waits_until_min_count_pods_exist_bound_ones_included():
    pods = [member("a"), member("b"), member("c")]
    pl, g = plugin([pod_group(min_count=4)], pods)
    status = pl.pre_enqueue(PodInfo(pods[0]))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "waiting for minCount pods from a gang to appear in scheduling queue"
    g.pod_groups.add_pod(member("d", node="n1"))
    assert pl.pre_enqueue(PodInfo(pods[0])) is None
    g.pod_groups.remove_pod(pods[2])
    assert pl.pre_enqueue(PodInfo(pods[0])) is not None


@pytest.mark.parametrize("remaining, scheduled, code, message", [
    (3, 0, Code.UNSCHEDULABLE, "minCount (4) cannot be satisfied: 0 scheduled, 3 remaining"),
    (0, 3, Code.UNSCHEDULABLE, "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"),
    (2, 2, Code.WAIT, "minCount (4) is not yet satisfied: 2 scheduled, 2 remaining"),
    (0, 4, None, ""),
    (5, 4, None, ""),
])
def test_placement_feasible_as_upstream(remaining, scheduled, code, message):
    pl, _unused = plugin()
    status = pl.placement_feasible(pod_group(min_count=4), remaining, scheduled)
    if code is None:
        assert status is None
    else:
        assert (status.code, status.message()) == (code, message)


def test_placement_feasible_needs_one_pod_of_a_basic_group():
    pl, _unused = plugin()
    assert pl.placement_feasible(pod_group(basic=True), 0, 1) is None
    assert pl.placement_feasible(pod_group(basic=True), 0, 0).code == Code.UNSCHEDULABLE


def test_permit_waits_five_minutes_until_min_count_are_scheduled_then_allows_the_waiting():
    pods = [member("a"), member("b")]
    pl, g = plugin([pod_group(min_count=2)], pods, assumed={"uid-a"})
    status, timeout = pl.permit(None, PodInfo(pods[0]), "n1")
    assert (status.code, status.message(), timeout) == (Code.WAIT, "waiting for minCount pods from a gang to be "
                                                        "scheduled", PERMIT_TIMEOUT_SECONDS)
    waiting = pl.handle.waiting_pods
    first = WaitingPod(PodInfo(pods[0]), {"GangScheduling": timeout})
    waiting.add(first)
    g.assumed.add("uid-b")
    assert pl.permit(None, PodInfo(pods[1]), "n2") == (None, 0.0)
    assert first.status() is not None and first.status().is_success()


def test_permit_passes_pods_of_no_group_and_basic_groups():
    pl, _unused = plugin([pod_group(basic=True)], [member("a")])
    assert pl.permit(None, PodInfo(pod_raw("lonely")), "n1") == (None, 0.0)
    assert pl.permit(None, PodInfo(member("a")), "n1") == (None, 0.0)


def test_queueing_hints_wake_only_the_same_group():
    pl, _unused = plugin()
    events = {(e.resource.value, int(e.action)): e.hint for e in pl.events_to_register()}
    waiting = PodInfo(member("a"))
    added = next(h for (r, _a), h in events.items() if r == "UnschedulablePod")
    assert added(waiting, None, member("b"))
    assert not added(waiting, None, member("x", group="other"))
    assert not added(waiting, None, pod_raw("lonely"))
    assert not added(PodInfo(pod_raw("lonely")), None, member("b"))
    pg_events = [e for e in pl.events_to_register() if e.resource.value == "scheduling.k8s.io/PodGroup"]
    on_add, on_update = pg_events[0].hint, pg_events[1].hint
    assert on_add(waiting, None, pod_group()) and not on_add(waiting, None, pod_group("other"))
    assert on_update(waiting, pod_group(min_count=4), pod_group(min_count=3))
    assert not on_update(waiting, pod_group(min_count=3), pod_group(min_count=4))
    assert not on_update(waiting, pod_group(min_count=4), pod_group(basic=True))


# -- the configuration -------------------------------------------------------------------------

def multi_point(cfg):
    return [p.name for p in cfg.profiles[0].plugins["multiPoint"].enabled]


def test_the_gate_appends_gang_scheduling_to_the_default_profile_as_upstream():
    assert "GangScheduling" not in multi_point(parse_config(BASE))
    assert multi_point(parse_config(BASE, feature_gates=GATE))[-1] == "GangScheduling"


def test_a_profile_may_name_gang_scheduling_with_the_gate_off_as_upstream_accepts_it():
    cfg = parse_config({**BASE, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]}}}]})
    assert multi_point(cfg)[-1] == "GangScheduling"


# -- a gang through the scheduler ---------------------------------------------------------------

def make(gate=True, nodes=("n1", "n2", "n3")):
    gates = GATE if gate else {}
    sched = Scheduler(parse_config(BASE, feature_gates=gates), FakeClient(), rng=random.Random(1),
                      feature_gates=gates)
    for name in nodes:
        sched.on_node_add(node_raw(name, cpu="1"))
    return sched


def drain(sched, limit=50):
    for _unused in range(limit):
        pod = sched.queue.pop(timeout=0)
        if pod is None:
            break
        sched.schedule_one(pod)
    sched.wait_for_binds(5)
    # An asynchronous preemption hands its evictions to the dispatcher from a background
    # thread: on a busy machine the dispatcher was idle before that thread had run.
    preemptions = [plugin for framework in sched.frameworks.values() for plugin in framework.plugins.values()
                   if hasattr(plugin, "_preempting")]
    deadline = time.monotonic() + 5
    while any(plugin._preempting for plugin in preemptions) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sched.api_dispatcher.wait_idle(5)


def bound(sched):
    return sorted(k for k, _node, _uid in sched.client.binds)


def failures(sched):
    return {item[1][3]: item[5] for item in list(sched.broadcaster.pending.queue)
            if item[3] == "FailedScheduling"}


def podgroup_attempts(result):
    return metrics.REGISTRY.get_sample_value("scheduler_podgroup_schedule_attempts_total",
                                             {"result": result, "profile": "default-scheduler"}) or 0.0


def test_a_gang_of_four_where_three_fit_binds_none_then_all_once_a_node_arrives():
    sched = make()
    before = {result: podgroup_attempts(result) for result in ("scheduled", "unschedulable")}
    sched.informers.put("podgroups", pod_group(min_count=4))
    for name in "abcd":
        sched.on_pod_add(member(name))
    drain(sched)
    assert bound(sched) == []
    assert not sched.cache.assumed, "a gang that cannot reach minCount keeps no place"
    group = ("minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, pod group preemption: "
             "No preemption victims found for incoming preemptor")
    assert sorted(failures(sched).values()) == ["0/3 nodes are available: 3 Insufficient cpu."] + \
        ["pod group is unschedulable, " + group] * 3
    condition = pod_group_conditions(sched)[-1]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "PodGroupInitiallyScheduled", "False", "Unschedulable", group)
    # As upstream's AddAttemptedPodGroupIfNeeded: the group carries no rejecting plugin, so it
    # waits out its backoff (not cut short when nothing else is queued) instead of an event.
    assert len(sched.queue.pending()["backoff"]) == 4
    assert sched.queue.pop(timeout=0) is None
    sched.on_node_add(node_raw("n4", cpu="1"))
    later = time.monotonic() + 60
    sched.queue.clock = lambda: later  # past every backoff
    sched.queue.flush_backoff_completed()
    drain(sched)
    assert bound(sched) == ["default/a", "default/b", "default/c", "default/d"]
    assert pod_group_conditions(sched)[-1]["status"] == "True"
    assert {result: podgroup_attempts(result) - count for result, count in before.items()} == {
        "scheduled": 1, "unschedulable": 1}


def pod_group_conditions(sched, timeout=5.0):
    """The conditions the scheduler's PodGroup status patches carried (sent off the loop)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        patches = [body["status"]["conditions"][-1] for verb, path, body in list(sched.client.calls)
                   if verb == "PATCH" and "/podgroups/" in path]
        if patches:
            return patches
        time.sleep(0.01)
    raise AssertionError("no PodGroup status patch")


def test_gang_pods_wait_outside_the_queue_until_their_pod_group_and_min_count_exist():
    sched = make(nodes=("n1", "n2", "n3", "n4"))
    for name in "abc":
        sched.on_pod_add(member(name))
    drain(sched)
    assert bound(sched) == [] and len(sched.queue.pending()["gated"]) == 3
    sched.informers.put("podgroups", pod_group(min_count=4))
    drain(sched)
    assert bound(sched) == []
    sched.on_pod_add(member("d"))
    drain(sched)
    assert bound(sched) == ["default/a", "default/b", "default/c", "default/d"]


def test_pods_without_a_group_are_scheduled_one_by_one_with_the_gate_on():
    sched = make()
    sched.informers.put("podgroups", pod_group(min_count=4))
    for name in ("x", "y"):
        sched.on_pod_add(pod_raw(name, cpu="1"))
    drain(sched)
    assert bound(sched) == ["default/x", "default/y"]


def test_with_the_gate_off_a_group_field_changes_nothing():
    sched = make(gate=False)
    assert sched.pod_groups is None and "GangScheduling" not in sched.frameworks["default-scheduler"].plugins
    for name in "abcd":
        sched.on_pod_add(member(name))
    drain(sched)
    assert len(bound(sched)) == 3


def test_a_member_deleted_while_the_group_waits_holds_the_rest_until_a_replacement_comes():
    sched = make()
    sched.informers.put("podgroups", pod_group(min_count=4))
    members = {name: member(name) for name in "abcd"}
    for raw in members.values():
        sched.on_pod_add(raw)
    drain(sched)
    sched.on_pod_delete(members["d"])
    sched.on_node_add(node_raw("n4", cpu="1"))
    later = time.monotonic() + 60
    sched.queue.clock = lambda: later
    sched.queue.flush_backoff_completed()
    drain(sched)
    assert bound(sched) == [] and not sched.cache.assumed
    assert len(sched.queue.pending()["gated"]) == 3, "three of four: PreEnqueue holds them again"
    sched.on_pod_add(member("e"))
    drain(sched)
    assert bound(sched) == ["default/a", "default/b", "default/c", "default/e"]


def test_validate_config_takes_the_gate_and_refuses_what_feature_gates_refuses(tmp_path, capsys):
    from kubesched import cli

    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "clientConnection: {kubeconfig: ''}\n")
    assert cli.main(["validate-config", str(path), "--feature-gates", "GenericWorkload=true"]) == 0
    assert cli.main(["validate-config", str(path), "--feature-gates", "GenericWorkload=maybe"]) == 1
    assert "--feature-gates" in capsys.readouterr().err


def test_a_group_split_across_profiles_fails_as_upstreams_validate_pod_group():
    gates = GATE
    cfg = parse_config({**BASE, "profiles": [{"schedulerName": "one"}, {"schedulerName": "two"}]}, feature_gates=gates)
    sched = Scheduler(cfg, FakeClient(), rng=random.Random(1), feature_gates=gates)
    for name in ("n1", "n2"):
        sched.on_node_add(node_raw(name, cpu="1"))
    sched.informers.put("podgroups", pod_group(min_count=2))
    for name, profile in (("a", "one"), ("b", "two")):
        raw = member(name)
        raw["spec"]["schedulerName"] = profile
        sched.on_pod_add(raw)
    drain(sched)
    assert bound(sched) == []
    assert set(failures(sched).values()) == {
        'all pods in a single pod group should have the same .spec.schedulerName set, got: "two" and "one"'}
    assert sorted(p.name for p in sched.queue.pending()["backoff"]) == ["a", "b"], "both back in the queue"


@pytest.mark.parametrize("field, values, group_priority, message", [
    ("priority", (0, 100), None,
     "all pods in a single pod group should have the same priority as the pod group's priority, got 100 and 0"),
    ("priority", (100, 100), 50,
     "all pods in a single pod group should have the same priority as the pod group's priority, got 100 and 50"),
    ("preemptionPolicy", ("PreemptLowerPriority", "Never"), None,
     "all pods in a single pod group should have the same preemption policy, got Never and PreemptLowerPriority"),
])
def test_a_group_whose_pods_differ_in_priority_or_preemption_policy_fails_as_upstreams_validate_pod_group(
        field, values, group_priority, message):
    sched = make()
    group = pod_group(min_count=2)
    if group_priority is not None:
        group["spec"]["priority"] = group_priority
    sched.informers.put("podgroups", group)
    for name, value in zip("ab", values):
        raw = member(name)
        raw["spec"][field] = value
        sched.on_pod_add(raw)
    drain(sched)
    assert bound(sched) == [] and not sched.cache.assumed
    assert set(failures(sched).values()) == {message}
    condition = pod_group_conditions(sched)[-1]
    assert (condition["reason"], condition["message"]) == ("SchedulerError", message)


def test_the_group_check_covers_its_bound_pods_too():
    # validateScheduledPods: a bound member of another priority fails the queued ones.
    sched = make()
    sched.informers.put("podgroups", pod_group(min_count=2))
    bound_member = member("a", node="n1")
    bound_member["spec"]["priority"] = 7
    sched.on_pod_add(bound_member)
    sched.on_pod_add(member("b"))
    drain(sched)
    assert bound(sched) == []
    assert set(failures(sched).values()) == {
        "all pods in a single pod group should have the same priority as the pod group's priority, got 7 and 0"}


def test_a_group_short_of_members_before_its_first_pod_errors_in_dynamic_resources_as_upstream():
    # v1.37.1: PlacementFeasible rejects the group before any member ran PreFilter, so
    # DynamicResources' PodGroupPostFilter finds no group state and the group fails with an
    # error (seen on the pinned kube-scheduler in the lab's member-deleted scenario).
    sched = make()
    sched.informers.put("podgroups", pod_group(min_count=4))
    members = {name: member(name) for name in "abcd"}
    for raw in members.values():
        sched.on_pod_add(raw)
    sched.on_pod_delete(members["d"])  # after PreEnqueue let the others in
    drain(sched)
    assert bound(sched) == []
    assert set(failures(sched).values()) == {'error in "DynamicResources" PodGroupPostFilter plugins: not found'}
    condition = pod_group_conditions(sched)[-1]
    assert (condition["reason"], condition["message"]) == (
        "SchedulerError", 'error in "DynamicResources" PodGroupPostFilter plugins: not found')
    assert sorted(p.name for p in sched.queue.pending()["gated"]) == ["a", "b", "c"], "PreEnqueue now counts three"


def no_simulation():
    raise AssertionError("the group was not to be placed")


def test_pod_group_post_filter_refuses_with_upstreams_words_before_simulating():
    sched = make()
    preemption = sched.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    never = PodInfo(member("a"))
    never.preemption_policy = "Never"
    nominations, status = preemption.pod_group_post_filter(pod_group(), [never], [], no_simulation)
    assert (nominations, status.code, status.message()) == (
        {}, Code.UNSCHEDULABLE, "pod group preemption: not eligible due to preemptionPolicy=Never.")
    # Only pods of the group's own priority (0) are placed: nobody to preempt.
    sched.on_pod_add(pod_raw("same", cpu="100m", node="n1", priority=0))
    sched.cache.update_snapshot(sched.snapshot)
    nominations, status = preemption.pod_group_post_filter(pod_group(), [PodInfo(member("a"))], [], no_simulation)
    assert (nominations, status.code, status.message()) == (
        {}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "pod group preemption: No preemption victims found for incoming preemptor")


def deleted(sched):
    return sorted(target.split("/")[1] for verb, target, _body in sched.client.calls if verb == "delete")


def fill(sched, names_nodes, cpu="600m", priority=-5, group=None):
    """Pods of lower priority already running, one per (name, node)."""
    raws = {}
    for name, node in names_nodes:
        raw = pod_raw(name, cpu=cpu, node=node, priority=priority, uid=f"uid-{name}")
        raw["status"]["startTime"] = "2026-01-01T00:00:00Z"
        if group:
            raw["spec"]["schedulingGroup"] = {"podGroupName": group}
        sched.on_pod_add(raw)
        raws[name] = raw
    return raws


def test_a_gang_preempts_the_fewest_victims_it_needs_and_binds_where_it_was_nominated():
    sched = make()
    victims = fill(sched, [("low-1", "n1"), ("low-2", "n2"), ("low-3", "n3")])
    before = {result: podgroup_attempts(result) for result in ("waiting_on_preemption", "scheduled")}
    attempts = metrics.REGISTRY.get_sample_value("scheduler_workload_preemption_attempts_total",
                                                 {"result": "Success"}) or 0.0
    sched.informers.put("podgroups", pod_group(min_count=2))
    for name in "ab":
        sched.on_pod_add(member(name, cpu="600m"))
    drain(sched)
    # Room for the two members on two of the three nodes: two victims, the third reprieved.
    gone = deleted(sched)
    assert len(gone) == 2 and set(gone) < set(victims), gone
    assert bound(sched) == []
    nominated = {target.split("/")[1]: body["status"]["nominatedNodeName"]
                 for verb, target, body in sched.client.calls
                 if verb == "patch_status" and "nominatedNodeName" in (body.get("status") or {})}
    assert sorted(nominated) == ["a", "b"]
    assert sorted(nominated.values()) == sorted(victims[name]["spec"]["nodeName"] for name in gone)
    # a, tried first, keeps its own fit error; b, never tried (minCount was out of reach once a
    # failed), the group's status from before the preemption (as kube-scheduler words both);
    # the PodGroup's condition carries the preemption.
    assert failures(sched) == {
        "a": "0/3 nodes are available: 3 Insufficient cpu.",
        "b": "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"}
    assert pod_group_conditions(sched)[-1]["message"] == (
        "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
        "pod group preemption: found a placement for podgroup, preempting 2 victims")
    conditions = [c for verb, target, body in sched.client.calls if verb == "patch_status"
                  for c in (body.get("status") or {}).get("conditions") or () if c["type"] == "DisruptionTarget"]
    assert len(conditions) == 2 and {c["message"] for c in conditions} == {
        "default-scheduler: preempting to accommodate a higher priority podgroup"}
    assert podgroup_attempts("waiting_on_preemption") == before["waiting_on_preemption"] + 1
    assert metrics.REGISTRY.get_sample_value("scheduler_workload_preemption_attempts_total",
                                             {"result": "Success"}) == attempts + 1
    # The victims go; the members come back and are bound where they were nominated.
    for name in gone:
        sched.on_pod_delete(victims[name])
    later = time.monotonic() + 60
    sched.queue.clock = lambda: later  # past the group's backoff
    sched.queue.flush_backoff_completed()
    drain(sched)
    placed = {k.split("/")[1]: node for k, node, _uid in sched.client.binds}
    assert placed == nominated


def preempt_for_one_pod(disruption_mode, in_group=True):
    """n1 and n2 run a PodGroup of lower priority, n3 a pod of the preemptor's own: one pod of
    priority 0 (a member of a group of one, or a pod of no group) needs one node. What is
    deleted? (and the PodGroup condition, or the pod's FailedScheduling message)"""
    sched = make()
    low = pod_group("batch", min_count=2)
    low["spec"]["priority"] = -5
    if disruption_mode:
        low["spec"]["disruptionMode"] = {disruption_mode: {}}
    sched.informers.put("podgroups", low)
    fill(sched, [("batch-1", "n1"), ("batch-2", "n2")], group="batch")
    fill(sched, [("same", "n3")], priority=0)
    if in_group:
        sched.informers.put("podgroups", pod_group(min_count=1))
        sched.on_pod_add(member("a", cpu="600m"))
    else:
        sched.on_pod_add(pod_raw("a", cpu="600m", priority=0, uid="uid-a"))
    drain(sched)
    return deleted(sched), pod_group_conditions(sched)[-1]["message"] if in_group else failures(sched)["a"]


def preempt_for_one_member(disruption_mode):
    return preempt_for_one_pod(disruption_mode)


def sample(name, **labels):
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_group_whose_disruption_mode_is_all_is_evicted_whole():
    before = {"disruptions": sample("scheduler_preemption_workload_disruptions_count", preemptor="podgroup"),
              "victims": sample("scheduler_workload_preemption_victims_sum"),
              "evaluated": sample("scheduler_preemption_evaluation_duration_seconds_count", preemptor="podgroup",
                                  result="Success"),
              "executed": sample("scheduler_preemption_execution_duration_seconds_count", preemptor="podgroup",
                                 result="success")}
    gone, condition = preempt_for_one_member("all")
    assert gone == ["batch-1", "batch-2"]
    assert condition.endswith("pod group preemption: found a placement for podgroup, preempting 2 victims")
    # One disruption (the whole group), two victim pods, one evaluation, one execution.
    assert sample("scheduler_preemption_workload_disruptions_sum", preemptor="podgroup") >= 1
    assert sample("scheduler_preemption_workload_disruptions_count", preemptor="podgroup") == before["disruptions"] + 1
    assert sample("scheduler_workload_preemption_victims_sum") == before["victims"] + 2
    assert sample("scheduler_preemption_evaluation_duration_seconds_count", preemptor="podgroup",
                  result="Success") == before["evaluated"] + 1
    assert sample("scheduler_preemption_execution_duration_seconds_count", preemptor="podgroup",
                  result="success") == before["executed"] + 1


def test_a_pods_own_preemption_evicts_a_victim_group_whole_in_the_all_mode_and_one_pod_otherwise():
    gone, message = preempt_for_one_pod("all", in_group=False)
    assert gone == ["batch-1", "batch-2"]
    assert message.endswith("preempting 2 victims")
    gone, message = preempt_for_one_pod("single", in_group=False)
    assert len(gone) == 1 and message.endswith("preempting 1 victims")


def test_evicting_a_victim_a_disruption_budget_protects_counts_the_violation():
    from kubesched.plugins.default_preemption import POD, Preemptor, Victim

    sched = make()
    preemption = sched.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    victim = Victim([PodInfo(pod_raw("low", cpu="100m", node="n1", priority=-5))], -5, POD, time.time())
    before = sample("scheduler_preemption_pdb_violations_total", preemptor="podgroup")
    preemption.evict_pod_group_victims(Preemptor("podgroup", "pg-uid", "default-scheduler"), [victim], 1)
    assert sample("scheduler_preemption_pdb_violations_total", preemptor="podgroup") == before + 1
    assert deleted(sched) == ["low"]


def test_the_single_disruption_mode_evicts_only_the_pod_it_needs():
    for mode in ("single", None):
        gone, condition = preempt_for_one_member(mode)
        assert len(gone) == 1 and gone[0].startswith("batch-"), (mode, gone)
        assert condition.endswith("preempting 1 victims")


def test_a_groups_backoff_is_capped_at_the_max_times_the_square_root_of_its_size():
    sched = make()
    queue = sched.queue  # podInitialBackoffSeconds 1, podMaxBackoffSeconds 10
    assert [queue.backoff_duration(n) for n in (1, 4, 5)] == [1.0, 8.0, 10.0]
    assert [queue.backoff_duration(n, 4) for n in (1, 5, 6)] == [1.0, 16.0, 20.0]
