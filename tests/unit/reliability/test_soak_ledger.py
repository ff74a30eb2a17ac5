"""The soak's continuous invariants, fed the events a watch would deliver: each violation it
must see, and the races it must count apart rather than call violations."""

import itertools
import threading

import pytest

from tests.reliability.soak.ledger import Ledger, device_accounting, quantity

_uid = itertools.count()


def node(name, cpu="4", pods=110, labels=None, taints=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)}}}


def pod(name, node_name="", cpu="1", cls="bare", uid=None, phase="Running", selector=None, tolerations=None,
        deleting=False):
    meta = {"name": name, "namespace": "soak", "uid": uid or f"u{next(_uid)}", "labels": {"soak.kubesched.io/class": cls}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node_name, "schedulerName": "s", "nodeSelector": selector or {},
                                       "tolerations": tolerations or [],
                                       "containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}}


@pytest.fixture
def ledger():
    led = Ledger("s", "lease", clock=lambda: 0.0)
    led.node_list([node("n1"), node("n2", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])])
    return led


def bind(ledger, raw, node_name):
    ledger.pod_event("ADDED", raw)
    bound = {**raw, "spec": {**raw["spec"], "nodeName": node_name}}
    ledger.pod_event("MODIFIED", bound)
    return bound


def test_quantities():
    assert quantity("250m", milli=True) == 250 and quantity("2", milli=True) == 2000
    assert quantity("16Gi") == 16 * 2 ** 30 and quantity("110") == 110


def test_pods_that_fit_are_fine_and_the_fifth_cpu_is_an_overcommit(ledger):
    for i in range(4):
        bind(ledger, pod(f"p{i}"), "n1")
    assert ledger.violations == []
    bind(ledger, pod("p4"), "n1")
    assert ledger.violation_counts() == {"overcommitted": 1}


def test_finished_pods_free_their_room_and_terminating_ones_do_not(ledger):
    pods = [bind(ledger, pod(f"p{i}"), "n1") for i in range(4)]
    ledger.pod_event("MODIFIED", {**pods[0], "status": {"phase": "Succeeded"}})
    bind(ledger, pod("after-success"), "n1")
    assert ledger.violations == []
    terminating = {**pods[1], "metadata": {**pods[1]["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    ledger.pod_event("MODIFIED", terminating)
    bind(ledger, pod("too-early"), "n1")
    assert ledger.violation_counts() == {"overcommitted": 1}


def test_a_node_name_that_changes_is_a_double_bind(ledger):
    bound = bind(ledger, pod("p"), "n1")
    ledger.pod_event("MODIFIED", {**bound, "spec": {**bound["spec"], "nodeName": "n2"}})
    assert ledger.violation_counts()["double_bind"] == 1


def test_selector_taint_and_anti_affinity_violations(ledger):
    bind(ledger, pod("sel", selector={"disk": "ssd"}), "n1")
    bind(ledger, pod("taint"), "n2")
    bind(ledger, pod("tolerated", tolerations=[{"key": "dedicated", "operator": "Exists"}]), "n2")
    bind(ledger, pod("a1", cls="anti", cpu="10m"), "n1")
    bind(ledger, pod("a2", cls="anti", cpu="10m"), "n1")
    assert ledger.violation_counts() == {"node_selector": 1, "untolerated_taint": 1, "anti_affinity": 1}


def test_condition_taints_are_races_and_an_unknown_node_is_checked_when_it_arrives(ledger):
    ledger.node_event("MODIFIED", node("n1", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]))
    bind(ledger, pod("racing"), "n1")
    assert ledger.violations == [] and ledger.races["bound_on_condition_tainted_node"] == 1
    bind(ledger, pod("early", cpu="3"), "n3")
    bind(ledger, pod("early2", cpu="3"), "n3")
    assert ledger.violations == []
    ledger.node_event("ADDED", node("n3"))
    assert ledger.violation_counts() == {"overcommitted": 1}
    bind(ledger, pod("gone"), "n9")
    ledger.close_deferred()
    assert ledger.races["bound_to_missing_node"] == 1


def test_a_relist_forgets_deleted_pods_and_checks_new_bindings_after_the_removals(ledger):
    old = [bind(ledger, pod(f"old{i}"), "n1") for i in range(4)]
    newcomer = pod("new", node_name="n1")
    # While the watch was away: two old pods went, one new pod was bound in their room.
    ledger.pod_list([old[2], old[3], newcomer])
    assert ledger.violations == [] and len(ledger.pods) == 3


def test_a_device_in_two_claims_and_a_volume_in_two_claims(ledger):
    def claim(name, device):
        return {"metadata": {"name": name, "namespace": "soak", "uid": name},
                "status": {"allocation": {"devices": {"results": [
                    {"driver": "gpu.example.com", "pool": "n1", "device": device}]}}}}

    ledger.claim_event("ADDED", claim("a", "gpu-0"))
    ledger.claim_event("ADDED", claim("b", "gpu-1"))
    assert ledger.violations == []
    ledger.claim_event("DELETED", claim("a", "gpu-0"))
    ledger.claim_event("ADDED", claim("c", "gpu-0"))  # free again: fine
    ledger.claim_event("MODIFIED", claim("d", "gpu-1"))
    assert ledger.violation_counts() == {"device_in_two_claims": 1}

    def pvc(name, volume):
        return {"metadata": {"name": name, "namespace": "soak", "uid": name}, "spec": {"volumeName": volume}}

    ledger.pvc_event("ADDED", pvc("x", "pv-1"))
    ledger.pvc_event("DELETED", pvc("x", "pv-1"))
    ledger.pvc_event("ADDED", pvc("y", "pv-1"))
    ledger.pvc_event("ADDED", pvc("z", "pv-1"))
    assert ledger.violation_counts()["volume_in_two_claims"] == 1


def test_device_accounting_finds_free_devices_and_claims_held_for_no_pod():
    slices = [{"spec": {"driver": "gpu.example.com", "pool": {"name": node},
                        "devices": [{"name": f"gpu-{i}"} for i in range(2)]}} for node in ("n1", "n2")]

    def claim(name, node, device, reserved_for):
        result = {"driver": "gpu.example.com", "pool": node, "device": device}
        return {"metadata": {"name": name, "namespace": "soak"},
                "status": {"allocation": {"devices": {"results": [result]}},
                           "reservedFor": [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved_for]}}

    running, finished = pod("a", "n1", uid="pa"), pod("b", "n1", uid="pb", phase="Succeeded")
    claims = [claim("a-gpu", "n1", "gpu-0", ["pa"]),
              claim("b-gpu", "n1", "gpu-1", ["pb"]),       # its pod finished: the device is held for nobody
              claim("gone-gpu", "n2", "gpu-0", ["pz"]),    # its pod is gone
              claim("unreserved", "n2", "gpu-1", []),
              {"metadata": {"name": "pending", "namespace": "soak"}, "status": {}}]
    assert device_accounting(slices, claims, [running, finished]) == {
        "devices": 4, "allocated": 4, "free": 0,
        "held_for_no_pod": ["soak/b-gpu", "soak/gone-gpu", "soak/unreserved"]}
    assert device_accounting(slices, claims[:1], [running]) == {
        "devices": 4, "allocated": 1, "free": 3, "held_for_no_pod": []}


def test_handover_gaps_come_from_the_lease_times():
    led = Ledger("s", "lease")

    def lease(holder, renew, acquire):
        return {"metadata": {"name": "lease"}, "spec": {"holderIdentity": holder, "renewTime": renew,
                                                        "acquireTime": acquire}}

    led.lease_event("ADDED", lease("a", "2026-01-01T00:00:10.000000Z", "2026-01-01T00:00:00.000000Z"))
    led.lease_event("MODIFIED", lease("a", "2026-01-01T00:00:11.000000Z", "2026-01-01T00:00:00.000000Z"))
    led.lease_event("MODIFIED", lease("b", "2026-01-01T00:00:18.500000Z", "2026-01-01T00:00:18.500000Z"))
    led.lease_event("MODIFIED", lease("", "2026-01-01T00:00:20.000000Z", "2026-01-01T00:00:20.000000Z"))
    led.lease_event("MODIFIED", lease("c", "2026-01-01T00:00:21.000000Z", "2026-01-01T00:00:20.750000Z"))
    gaps = [(h["to"], h["gap_s"], h["released"]) for h in led.handovers()]
    assert gaps == [("b", 7.5, False), ("c", 0.75, True)]


def test_a_relist_across_which_the_lease_changed_makes_the_hand_over_an_upper_bound():
    led = Ledger("s", "lease")

    def lease(holder, renew, acquire):
        return {"metadata": {"name": "lease"}, "spec": {"holderIdentity": holder, "renewTime": renew,
                                                        "acquireTime": acquire}}

    led.lease_list([lease("a", "2026-01-01T00:00:10.000000Z", "2026-01-01T00:00:00.000000Z")])
    # The watch stalled and relisted: a's later renewals were never seen, b holds it now.
    led.lease_list([lease("b", "2026-01-01T00:02:00.000000Z", "2026-01-01T00:02:00.000000Z")])
    led.lease_list([lease("b", "2026-01-01T00:02:00.000000Z", "2026-01-01T00:02:00.000000Z")])  # unchanged
    led.lease_event("MODIFIED", lease("c", "2026-01-01T00:02:09.000000Z", "2026-01-01T00:02:09.000000Z"))
    assert [(h["to"], h["gap_s"], h["observed"]) for h in led.handovers()] == [("b", 110.0, False), ("c", 9.0, True)]


def test_a_relist_of_many_pods_does_not_hold_the_lease_back():
    """A pod relist holds the pod lock; the Lease's events take their own (a stalled lease
    watch relists and loses renewals)."""
    led = Ledger("s", "lease")
    event = threading.Thread(target=led.lease_event, daemon=True, args=("ADDED", {
        "metadata": {"name": "lease"}, "spec": {"holderIdentity": "a", "renewTime": "2026-01-01T00:00:10.000000Z"}}))
    with led.lock:  # as a pod relist holds it
        event.start()
        event.join(5)
        assert not event.is_alive()
    assert [r["holder"] for r in led.lease_records] == ["a"]


def test_a_relist_frees_what_it_shows_freed_before_it_checks_what_it_shows_taken(ledger):
    def claim(name, device=None):
        results = [{"driver": "gpu.example.com", "pool": "n1", "device": device}] if device else []
        return {"metadata": {"name": name, "namespace": "soak", "uid": name},
                "status": {"allocation": {"devices": {"results": results}}} if device else {}}

    def pvc(name, volume=""):
        return {"metadata": {"name": name, "namespace": "soak", "uid": name}, "spec": {"volumeName": volume}}

    ledger.claim_event("ADDED", claim("b-old", "gpu-0"))
    ledger.pvc_event("ADDED", pvc("b-old", "pv-0"))
    # While the watch was away, gpu-0 and pv-0 moved to a claim the list names first.
    ledger.claim_list([claim("a-new", "gpu-0"), claim("b-old")])
    ledger.pvc_list([pvc("a-new", "pv-0"), pvc("b-old")])
    assert ledger.violations == []
    ledger.claim_list([claim("c", "gpu-0"), claim("a-new", "gpu-0")])  # two claims at once: still caught
    ledger.pvc_list([pvc("c", "pv-0"), pvc("a-new", "pv-0")])
    assert ledger.violation_counts() == {"device_in_two_claims": 1, "volume_in_two_claims": 1}


def test_the_population_is_counted_by_where_each_pod_is_in_its_life(ledger):
    ledger.pod_event("ADDED", pod("waiting"))
    bind(ledger, pod("running"), "n1")
    bind(ledger, pod("done", phase="Succeeded"), "n1")
    bind(ledger, pod("going", deleting=True), "n2")
    assert ledger.population() == {"unbound": 1, "bound": 1, "deleting": 1, "finished": 1}


def test_kwok_backlog_counts_what_the_kubelets_owe_past_their_time():
    now = [0.0]
    led = Ledger("s", "lease", clock=lambda: now[0])
    led.node_list([node("n1", cpu="64")])
    bind(led, pod("not-started", phase="Pending"), "n1")
    bind(led, pod("running"), "n1")
    bind(led, pod("job-pod", cls="job"), "n1")
    gone = pod("deleted-long-ago", deleting=True)  # deletionTimestamp in 2026-01-01
    led.pod_event("ADDED", gone)
    assert led.kwok_backlog() == 1  # only the deletion is overdue yet
    now[0] = 12.0
    assert led.kwok_backlog() == 2  # the pod kwok has not started
    now[0] = 20.0
    assert led.kwok_backlog() == 3  # and the Job pod it has not finished; a running pod owes nothing
    bind(led, pod("done", cls="job", phase="Succeeded"), "n1")
    assert led.kwok_backlog() == 3
