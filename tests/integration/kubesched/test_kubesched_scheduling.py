"""kubesched against the lab: a bind and its event, the not-ready taint, spreading, several profiles.

Each test serves its own schedulerName, so a scheduler someone else runs against the shared
lab never takes these pods, and kubesched never takes theirs."""

import json
import uuid
from collections import Counter

import pytest
from kubesched_lab import events_for, node_of, pod_manifest, wait_for

from lab.fake_nodes import NOT_READY_ANNOTATION

# Upstream 1.37's words: the Filter histogram, then DefaultPreemption's verdict on the same nodes.
# (1.37 no longer names the taint; the pinned kube-scheduler words it exactly so.)
S2_MESSAGE = ("0/1 nodes are available: 1 node(s) had untolerated taint(s). "
              "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


@pytest.fixture
def scheduler_name():
    return f"kubesched-it-{uuid.uuid4().hex[:6]}"


def pod_scheduled_condition(core_v1, namespace, name):
    pod = json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), None)


def create_pod(core_v1, namespace, name, **spec):
    core_v1.create_namespaced_pod(namespace, pod_manifest(name, **spec), _preload_content=False)


def test_s1_pending_pod_is_bound_and_the_event_says_so(run_kubesched, nodes, core_v1, api_client, namespace,
                                                       scheduler_name):
    names = nodes(3)
    sched = run_kubesched({"profiles": [{"schedulerName": scheduler_name}]})
    create_pod(core_v1, namespace, "web", schedulerName=scheduler_name)
    node = wait_for(lambda: node_of(core_v1, namespace, "web"), 20, what="web to be bound")
    assert node in names
    scheduled = wait_for(lambda: [e for e in events_for(api_client, namespace, "web") if e["reason"] == "Scheduled"],
                         10, what="the Scheduled event")
    event = scheduled[0]
    assert event["type"] == "Normal" and event["action"] == "Binding"
    assert event["note"] == f"Successfully assigned {namespace}/web to {node}"
    assert event["reportingController"] == scheduler_name
    log = sched.log()
    assert f'"Successfully bound pod to node" pod="{namespace}/web" node="{node}" evaluatedNodes=' in log
    assert sched.metric("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": scheduler_name}) == 1


def test_s2_not_ready_node_then_ready_schedules_without_restart(run_kubesched, nodes, core_v1, api_client,
                                                                namespace, scheduler_name):
    # A node whose kubelet reports NotReady: the API server tainted it not-ready when it
    # registered, and the node lifecycle controller keeps the taint while it stays so.
    [node] = nodes(1, ready=False)
    sched = run_kubesched({"profiles": [{"schedulerName": scheduler_name}]})
    create_pod(core_v1, namespace, "waiting", schedulerName=scheduler_name)
    failed = wait_for(lambda: [e for e in events_for(api_client, namespace, "waiting")
                               if e["reason"] == "FailedScheduling"], 20, what="FailedScheduling")
    assert failed[0]["type"] == "Warning"
    assert failed[0]["note"] == S2_MESSAGE
    # The event and the status patch are written independently; wait for the condition too.
    cond = wait_for(lambda: pod_scheduled_condition(core_v1, namespace, "waiting"), 10, what="PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", S2_MESSAGE)
    assert not node_of(core_v1, namespace, "waiting")
    # The kubelet recovers (kwok reports Ready); the controller lifts the taint.
    core_v1.patch_node(node, {"metadata": {"annotations": {NOT_READY_ANNOTATION: None}}})
    assert wait_for(lambda: node_of(core_v1, namespace, "waiting"), 30, what="the pod to be bound") == node
    assert sched.proc.poll() is None


def test_s9_equal_pods_spread_evenly_over_equal_nodes(run_kubesched, nodes, core_v1, namespace, scheduler_name):
    names = nodes(3)
    run_kubesched({"profiles": [{"schedulerName": scheduler_name}]})
    for i in range(9):
        create_pod(core_v1, namespace, f"spread-{i}", schedulerName=scheduler_name)
    placed = wait_for(lambda: all(node_of(core_v1, namespace, f"spread-{i}") for i in range(9)) and
                      [node_of(core_v1, namespace, f"spread-{i}") for i in range(9)], 30, what="9 pods bound")
    assert Counter(placed) == {name: 3 for name in names}


# A Score plugin whose PreScore was disabled has no state to read; upstream fails the attempt
# with exactly this error (checked against the pinned kube-scheduler).
NO_PRESCORE_ERROR = ('running Score plugins: plugin "TaintToleration" failed with: '
                     'failed to read "PreScoreTaintToleration" from cycleState: not found')


def test_s7_profiles_serve_several_scheduler_names_and_leave_others_alone(run_kubesched, nodes, core_v1,
                                                                          api_client, namespace, scheduler_name):
    [plain] = nodes(1, prefix="s7plain-")
    nodes(1, prefix="s7soft-", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    first, second, third = (f"{scheduler_name}-{i}" for i in (1, 2, 3))
    run_kubesched({"profiles": [
        {"schedulerName": first, "plugins": {"score": {"disabled": [{"name": "TaintToleration"}]}}},
        {"schedulerName": second, "plugins": {"preScore": {"disabled": [{"name": "*"}]}}},
        {"schedulerName": third},
    ]})
    for profile in (first, second, third):
        for i in range(3):
            create_pod(core_v1, namespace, f"p{profile[-1]}-{i}", schedulerName=profile)
    create_pod(core_v1, namespace, "foreign", schedulerName=f"{scheduler_name}-someone-else")
    for profile in (first, third):
        for i in range(3):
            name = f"p{profile[-1]}-{i}"
            wait_for(lambda n=name: node_of(core_v1, namespace, n), 20, what=f"{name} bound")
            event = wait_for(lambda n=name: [e for e in events_for(api_client, namespace, n)
                                             if e["reason"] == "Scheduled"], 10, what=f"{name} Scheduled event")
            assert event[0]["reportingController"] == profile
    # The default profile's TaintToleration score keeps the third profile off the PreferNoSchedule node.
    assert {node_of(core_v1, namespace, f"p3-{i}") for i in range(3)} == {plain}
    failed = wait_for(lambda: [e for e in events_for(api_client, namespace, "p2-0")
                               if e["reason"] == "FailedScheduling"], 20, what="p2-0 FailedScheduling")
    assert failed[0]["note"] == NO_PRESCORE_ERROR and failed[0]["reportingController"] == second
    cond = wait_for(lambda: pod_scheduled_condition(core_v1, namespace, "p2-0"), 10, what="PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "SchedulerError")
    foreign = json.loads(core_v1.read_namespaced_pod("foreign", namespace, _preload_content=False).data)
    assert not foreign["spec"].get("nodeName")
    assert not (foreign["status"].get("conditions") or [])
    assert events_for(api_client, namespace, "foreign") == []
