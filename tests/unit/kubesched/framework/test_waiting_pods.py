"""Permit Wait: waiting pods allowed, rejected, timed out and preempted, as upstream's
framework defines them (waiting_pods_map.go, RunPermitPlugins, WaitOnPermit), and the
scheduler's binding cycle resuming without holding a thread while a pod waits."""

from __future__ import annotations

import datetime
import random
import threading
import time

import pytest
from kubesched_fakes import FAKE_REGISTRY, FakeClient, node_raw, pod, pod_raw

from kubesched.config import parse_config
from kubesched.framework.interface import Code, Status
from kubesched.framework.waiting_pods import MAX_PERMIT_TIMEOUT, WaitingPod, go_duration, permit_outcome
from kubesched.scheduler import Scheduler


@pytest.mark.parametrize("seconds, text", [(2, "2s"), (0.5, "500ms"), (1.5, "1.5s"), (60, "1m0s"),
                                           (90.25, "1m30.25s"), (3600, "1h0m0s"), (0, "0s"), (900, "15m0s")])
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


def wait_signal(waiting: WaitingPod, timeout: float = 5.0) -> Status:
    done = threading.Event()
    got: list[Status] = []
    waiting.on_done(lambda s: (got.append(s), done.set()))
    assert done.wait(timeout), "the waiting pod got no signal"
    return got[0]


def test_allowed_by_every_waiting_plugin_only():
    waiting = WaitingPod(pod("p"), {"A": 30, "B": 30})
    waiting.allow("A")
    assert waiting.status() is None and waiting.get_pending_plugins() == ["B"]
    waiting.allow("B")
    assert permit_outcome(wait_signal(waiting)) is None


def test_timeout_rejects_with_upstreams_message():
    waiting = WaitingPod(pod("p"), {"Gang": 0.2})
    status = permit_outcome(wait_signal(waiting))
    assert (status.code, status.plugin, status.message()) == \
        (Code.UNSCHEDULABLE, "Gang", "rejected due to timeout after waiting 200ms at plugin Gang")


def test_first_signal_wins_and_a_second_reject_reports_false():
    waiting = WaitingPod(pod("p"), {"A": 30})
    assert waiting.reject("A", "no quorum")
    assert not waiting.reject("A", "again")
    waiting.allow("A")
    assert wait_signal(waiting).message() == "no quorum"


def test_preempted_waiting_pod_is_an_error_not_unschedulable():
    waiting = WaitingPod(pod("p"), {"A": 30})
    assert waiting.preempt("DefaultPreemption", "preempted")
    status = permit_outcome(wait_signal(waiting))
    assert (status.code, status.message()) == (Code.ERROR, "waiting on permit for pod: preempted")


# --- through the scheduler ------------------------------------------------------------------

class FakeGate:
    """Permit: Wait 30s (or args.timeout) for pods labelled gate=wait, reject gate=no."""

    name = "FakeGate"

    def __init__(self, args, handle):
        self.handle = handle
        self.timeout = (args or {}).get("timeout", 30)

    def permit(self, state, p, node_name):
        gate = p.labels.get("gate")
        if gate == "wait":
            return Status(Code.WAIT), self.timeout
        if gate == "no":
            return Status(Code.UNSCHEDULABLE, "gate closed"), 0
        return None


REGISTRY = {**FAKE_REGISTRY, FakeGate.name: FakeGate}
BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def make(fake_registry, gate_args=None, bind_workers=1):
    fake_registry[FakeGate.name] = FakeGate
    profile = {"plugins": {"permit": {"enabled": [{"name": "FakeGate"}]}}}
    if gate_args:
        profile["pluginConfig"] = [{"name": "FakeGate", "args": gate_args}]
    cfg = parse_config({**BASE, "profiles": [profile]})
    client = FakeClient()
    sched = Scheduler(cfg, client, registry=REGISTRY, rng=random.Random(1), bind_workers=bind_workers)
    sched.on_node_add(node_raw("n1"))
    return sched, client, sched.frameworks["default-scheduler"]


def schedule_all(sched):
    while (p := sched.queue.pop(timeout=0)) is not None:
        sched.schedule_one(p)


def until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def events(sched):
    return [(item[3], item[5]) for item in list(sched.broadcaster.pending.queue)]


def test_waiting_pods_hold_no_bind_thread_and_bind_once_allowed(fake_registry):
    sched, client, fwk = make(fake_registry, bind_workers=1)
    for i in range(3):
        sched.on_pod_add(pod_raw(f"w{i}", labels={"gate": "wait"}))
    sched.on_pod_add(pod_raw("plain"))
    schedule_all(sched)
    # One bind thread, three pods waiting on it: the plain pod still binds.
    assert until(lambda: [k for k, _n, _u in client.binds] == ["default/plain"])
    waiting = []
    fwk.iterate_over_waiting_pods(waiting.append)
    assert sorted(w.get_pod().name for w in waiting) == ["w0", "w1", "w2"]
    assert all(w.get_pending_plugins() == ["FakeGate"] for w in waiting)
    # NominatedNodeNameForExpectation: a waiting pod's nominatedNodeName says where it goes.
    assert until(lambda: sum(1 for _ns, _n, patch in client.status_patches
                             if patch == {"status": {"nominatedNodeName": "n1"}}) == 3)
    for w in waiting:
        fwk.get_waiting_pod(w.get_pod().uid).allow("FakeGate")
    assert until(lambda: len(client.binds) == 4)
    assert fwk.get_waiting_pod(waiting[0].get_pod().uid) is None
    assert sched.wait_for_binds(5)


def test_rejected_waiting_pod_is_unreserved_and_requeued_with_the_reason(fake_registry):
    sched, client, fwk = make(fake_registry)
    sched.on_pod_add(pod_raw("w", labels={"gate": "wait"}))
    schedule_all(sched)
    found = []
    fwk.iterate_over_waiting_pods(found.append)
    [w] = found
    assert sched.cache.is_assumed(w.get_pod().uid)
    assert w.reject("FakeGate", "quorum lost")
    assert until(lambda: ("FailedScheduling", "0/1 nodes are available: 1 quorum lost.") in events(sched))
    assert not sched.cache.is_assumed(w.get_pod().uid) and not client.binds
    assert sched.wait_for_binds(5)
    entry = sched.queue.entries[w.get_pod().uid]
    assert entry.pod.unschedulable_plugins == {"FakeGate"}


def test_timeout_fails_the_attempt_with_upstreams_event(fake_registry):
    sched, client, fwk = make(fake_registry, gate_args={"timeout": 0.3})
    sched.on_pod_add(pod_raw("w", labels={"gate": "wait"}))
    schedule_all(sched)
    assert until(lambda: ("FailedScheduling", "0/1 nodes are available: 1 rejected due to timeout after waiting "
                                              "300ms at plugin FakeGate.") in events(sched))
    assert not client.binds


def test_permit_rejection_and_timeout_cap(fake_registry):
    sched, client, fwk = make(fake_registry, gate_args={"timeout": 10**6})
    sched.on_pod_add(pod_raw("no", labels={"gate": "no"}))
    sched.on_pod_add(pod_raw("w", labels={"gate": "wait"}))
    schedule_all(sched)
    assert ("FailedScheduling", "0/1 nodes are available: 1 gate closed.") in events(sched)
    status, wait = fwk.run_permit_plugins(None, pod("x", labels={"gate": "wait"}), "n1")
    assert status.code == Code.WAIT and wait == {"FakeGate": MAX_PERMIT_TIMEOUT}
    fwk.plugins["FakeGate"].timeout = datetime.timedelta(seconds=90)
    assert fwk.run_permit_plugins(None, pod("y", labels={"gate": "wait"}), "n1")[1] == {"FakeGate": 90.0}
    assert status.message() == "one or more plugins asked to wait and no plugin rejected pod"


def test_deleting_a_waiting_pod_rejects_it(fake_registry):
    sched, client, fwk = make(fake_registry)
    raw = pod_raw("w", labels={"gate": "wait"})
    sched.on_pod_add(raw)
    schedule_all(sched)
    sched.on_pod_delete(raw)
    assert until(lambda: not sched.cache.is_assumed(raw["metadata"]["uid"]))
    assert fwk.get_waiting_pod(raw["metadata"]["uid"]) is None and not client.binds
