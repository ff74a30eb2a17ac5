"""lab/demo.py: the placement table reads the API's pods and events, and flags what a scenario does not allow."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from lab_fakes import FakeCoreV1

from lab import demo

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def event(pod_name: str, reason: str, message: str, seconds: int, reporter: str = "default-scheduler",
          uid: str | None = None):
    return SimpleNamespace(involved_object=SimpleNamespace(name=pod_name, uid=uid or f"uid-{pod_name}"), reason=reason, message=message,
                           last_timestamp=START + timedelta(seconds=seconds), event_time=None,
                           metadata=SimpleNamespace(creation_timestamp=None), reporting_component=reporter,
                           source=None)


def live_pod(name: str, node: str | None, scheduler: str = "default-scheduler", deleting: bool = False,
             app: str | None = None, phase: str | None = None):
    """A pod as the API lists it; bound pods are Running (kwok runs them) unless phase says otherwise."""
    return SimpleNamespace(metadata=SimpleNamespace(name=name, uid=f"uid-{name}", labels={"app": app or name},
                                                    deletion_timestamp=START if deleting else None),
                           spec=SimpleNamespace(node_name=node, scheduler_name=scheduler),
                           status=SimpleNamespace(phase=phase or ("Running" if node else "Pending")))


def as_the_scenarios_say() -> tuple[dict, dict]:
    """Every demo pod where its scenario puts it; low-priority-2 preempted."""
    pods = {
        "demo-s2": [live_pod("waits-for-ready-node", "demo-node-notready-0")],
        "demo-s3": [live_pod("tolerates-blue", "demo-node-0"),
                    live_pod("blue-no-toleration", None),
                    live_pod("wants-large", "demo-node-1")],
        "demo-s5": [live_pod("low-priority-1", "demo-node-2"), live_pod("high-priority", "demo-node-2")],
        "demo-s6": [live_pod(f"for-{s}", "demo-node-2", scheduler=s)
                    for s in ("my-scheduler", "my-scheduler2", "my-scheduler3", "default-scheduler")],
        "demo-apps": [*(live_pod(f"web-5d4f-{suffix}", node, app="web")
                        for suffix, node in (("a", "demo-node-1"), ("b", "demo-node-2"), ("c", "demo-node-1"),
                                             ("d", "demo-node-2"))),
                      *(live_pod(f"node-agent-{i}", f"demo-node-{i}", app="node-agent") for i in range(3))],
    }
    events = {
        "demo-s2": [event("waits-for-ready-node", "Scheduled", "Successfully assigned demo-s2/waits-for-ready-node "
                          "to demo-node-notready-0", 5),
                    event("waits-for-ready-node", "FailedScheduling", "0/4 nodes are available: 1 node(s) had "
                          "untolerated taint {node.kubernetes.io/not-ready: }.", 1),
                    event("waits-for-ready-node", "FailedScheduling", "0/4 nodes are available: 1 node(s) had "
                          "untolerated taint {node.kubernetes.io/not-ready: }.", 2)],
        "demo-s5": [event("low-priority-2", "Preempted", "Preempted by pod uid-high-priority on node demo-node-2", 3)],
    }
    return pods, events


def test_the_history_is_oldest_first_with_repeats_folded():
    pods, events = as_the_scenarios_say()
    history = demo.scheduling_history(events["demo-s2"], "waits-for-ready-node")
    assert [line.split(" ", 1)[0] for line in history] == ["FailedScheduling", "Scheduled"]
    assert history[1].startswith("Scheduled (default-scheduler): Successfully assigned")


def test_an_earlier_pod_of_the_same_name_lends_no_history():
    pods, events = as_the_scenarios_say()
    events["demo-s2"].append(event("waits-for-ready-node", "Scheduled", "Successfully assigned demo-s2/waits-for-ready-node "
                                   "to demo-node-1", 0, uid="uid-of-the-last-run"))
    found = {p.demo_pod.name: p for p in demo.placements(FakeCoreV1(pods, events))}
    assert not any("demo-node-1" in line for line in found["waits-for-ready-node"].history)
    assert len(found["waits-for-ready-node"].history) == 2


def test_placements_as_the_scenarios_say_raise_no_surprise():
    found = demo.placements(FakeCoreV1(*as_the_scenarios_say()))
    victim = {p.demo_pod.name: p for p in found}["low-priority-2"]
    assert victim.node == demo.PREEMPTED
    assert victim.history == ["Preempted (default-scheduler): Preempted by pod uid-high-priority (high-priority) on node demo-node-2"]
    assert demo.surprises(found) == []


def test_a_pod_on_a_node_its_scenario_forbids_is_named():
    pods, events = as_the_scenarios_say()
    pods["demo-s3"][1] = live_pod("blue-no-toleration", "demo-node-0")
    problems = demo.surprises(demo.placements(FakeCoreV1(pods, events)))
    assert problems == ["demo-s3/blue-no-toleration is on demo-node-0, expected (Pending)"]


def test_a_bound_pod_that_does_not_run_is_named():
    pods, events = as_the_scenarios_say()
    pods["demo-s3"][2] = live_pod("wants-large", "demo-node-1", phase="Pending")
    problems = demo.surprises(demo.placements(FakeCoreV1(pods, events)))
    assert problems == ["demo-s3/wants-large is on demo-node-1 (Pending), expected demo-node-1, Running"]


def test_the_workloads_get_a_row_per_pod_with_its_phase():
    found = demo.placements(FakeCoreV1(*as_the_scenarios_say()))
    apps = [p for p in found if p.demo_pod.namespace == "demo-apps"]
    assert [(p.demo_pod.name, p.node, p.phase) for p in apps] == [
        ("web-5d4f-a", "demo-node-1", "Running"), ("web-5d4f-b", "demo-node-2", "Running"),
        ("web-5d4f-c", "demo-node-1", "Running"), ("web-5d4f-d", "demo-node-2", "Running"),
        ("node-agent-0", "demo-node-0", "Running"), ("node-agent-1", "demo-node-1", "Running"),
        ("node-agent-2", "demo-node-2", "Running")]
    table = demo.render_table(found)
    assert any(line.split()[:4] == ["node-agent-0", "default-scheduler", "demo-node-0", "Running"]
               for line in table.splitlines())


def test_a_workload_short_of_running_pods_is_named():
    pods, events = as_the_scenarios_say()
    pods["demo-apps"][0] = live_pod("web-5d4f-a", None, app="web")
    pods["demo-apps"][-1] = live_pod("node-agent-2", "demo-node-2", app="node-agent", deleting=True)
    problems = demo.surprises(demo.placements(FakeCoreV1(pods, events)))
    assert "demo-apps/web-5d4f-a is on (Pending), expected demo-node-1 or demo-node-2, Running" in problems
    assert "Deployment demo-apps/web runs 3 of 4 pods" in problems
    assert "DaemonSet demo-apps/node-agent runs 2 of 3 pods" in problems


def test_a_daemonset_with_two_pods_on_one_node_is_named():
    pods, events = as_the_scenarios_say()
    pods["demo-apps"][-1] = live_pod("node-agent-2", "demo-node-1", app="node-agent")
    problems = demo.surprises(demo.placements(FakeCoreV1(pods, events)))
    assert "DaemonSet demo-apps/node-agent has two pods on one node" in problems


@pytest.mark.parametrize("victims", [0, 2])
def test_s5_needs_exactly_one_victim(victims):
    pods, events = as_the_scenarios_say()
    events["demo-s5"] = [event(f"low-priority-{i}", "Preempted", "Preempted", 3) for i in range(1, victims + 1)]
    pods["demo-s5"] = [live_pod(f"low-priority-{i}", "demo-node-2") for i in range(victims + 1, 3)]
    pods["demo-s5"].append(live_pod("high-priority", "demo-node-2" if victims else None))
    problems = demo.surprises(demo.placements(FakeCoreV1(pods, events)))
    assert any(f"S5 preempted {victims} low-priority pods" in problem for problem in problems)


def test_a_pod_being_deleted_without_a_preempted_event_is_missing_not_preempted():
    pods, events = as_the_scenarios_say()
    pods["demo-s3"][0] = live_pod("tolerates-blue", "demo-node-0", deleting=True)
    found = {p.demo_pod.name: p.node for p in demo.placements(FakeCoreV1(pods, events))}
    assert found["tolerates-blue"] == "(missing)"


def test_the_table_has_a_row_per_pod_and_marks_surprises():
    pods, events = as_the_scenarios_say()
    pods["demo-s3"][2] = live_pod("wants-large", "demo-node-2")
    found = demo.placements(FakeCoreV1(pods, events))
    table = demo.render_table(found, width=100)
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["POD", "SCHEDULER", "NODE", "PHASE", "WHY"]
    assert all(len(line) <= 100 for line in lines if line.startswith("      "))
    for demo_pod in demo.all_demo_pods():
        assert any(line[2:].startswith(demo_pod.name + " ") for line in lines), demo_pod.name
    marked = [line for line in lines if line.startswith("!")]
    assert len(marked) == 1 and "wants-large" in marked[0] and "demo-node-2" in marked[0]


def test_the_kubeconfig_follows_lab_dir(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LAB_DIR", str(tmp_path))
    assert demo.default_kubeconfig() == str(tmp_path / "admin.kubeconfig")
    assert demo.main(["table"]) == 1
    assert f"{tmp_path}/admin.kubeconfig does not exist" in capsys.readouterr().err
