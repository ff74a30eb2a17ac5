"""The scheduling queue: ordering, backoff, requeue on events, gates, the 5-minute flush."""

import pytest
from kubesched_fakes import FakeCpuFit, FakeGates, FakeLabelFilter, FakeSort, pod

from kubesched import metrics
from kubesched.backend.queue import ACTIVE, BACKOFF, GATED, PENDING, UNSCHEDULABLE, SchedulingQueue
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def make_queue(clock, **kwargs):
    gates = FakeGates(None, None)
    events = {"FakeLabelFilter": FakeLabelFilter(None, None).events_to_register(),
              "FakeCpuFit": FakeCpuFit(None, None).events_to_register(),
              "FakeGates": gates.events_to_register()}
    return SchedulingQueue(FakeSort(None, None).less, pre_enqueue=gates.pre_enqueue, plugin_events=events,
                           clock=clock, **kwargs)


def fail(q, p, *plugins):
    p.unschedulable_plugins = set(plugins)
    q.add_unschedulable_if_not_present(p)


NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)


def test_highest_priority_first_then_oldest(clock):
    q = make_queue(clock)
    for name, prio in (("low", 1), ("high", 100), ("mid", 10)):
        q.add(pod(name, priority=prio))
        clock.now += 1
    q.add(pod("mid2", priority=10))
    assert [q.pop(timeout=0).name for _unused in range(4)] == ["high", "mid", "mid2", "low"]
    assert q.pop(timeout=0) is None


def test_backoff_doubles_from_initial_and_caps_at_max(clock):
    q = make_queue(clock, initial_backoff=1, max_backoff=10)
    assert [q.backoff_duration(n) for n in range(0, 7)] == [0, 1, 2, 4, 8, 10, 10]


def test_error_goes_to_backoff_and_waits_out_its_backoff(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    fail(q, p)  # no rejecting plugin: an error
    assert q.where(p.uid) == BACKOFF
    assert q.pop(timeout=0) is None  # errors are not popped early
    clock.now += 1.01
    q.flush_backoff_completed()
    assert q.where(p.uid) == ACTIVE
    assert q.pop(timeout=0).name == "p" and p.attempts == 2


def test_unschedulable_pod_waits_for_a_relevant_event(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    q.done(p.uid)
    fail(q, p, "FakeLabelFilter")
    assert q.where(p.uid) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(POD_DELETE)  # FakeLabelFilter does not care about pods
    assert q.where(p.uid) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_TAINT)
    assert q.where(p.uid) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_LABEL)
    assert q.where(p.uid) == BACKOFF  # still inside its 1s backoff
    clock.now += 2
    q.move_all_to_active_or_backoff(NODE_ADD)
    q.flush_backoff_completed()
    assert q.where(p.uid) == ACTIVE


def test_pod_deleted_event_requeues_resource_rejections(clock):
    q = make_queue(clock)
    q.add(pod("p", cpu="1"))
    p = q.pop(timeout=0)
    fail(q, p, "FakeCpuFit")
    clock.now += 5
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert q.where(p.uid) == ACTIVE


def test_event_during_the_attempt_sends_the_pod_to_backoff(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(NODE_ADD)  # arrives while p is being scheduled
    fail(q, p, "FakeLabelFilter")
    assert q.where(p.uid) == BACKOFF


def test_an_event_its_rejecting_plugin_ignores_leaves_the_pod_waiting_for_one_it_cares_about(clock):
    # FakeLabelFilter registers node adds and label changes, not pod deletions: a busy cluster's
    # deletions during the attempt must not send the pod round through backoff again and again.
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(POD_DELETE)
    q.move_all_to_active_or_backoff(NODE_TAINT)
    fail(q, p, "FakeLabelFilter")
    assert q.where(p.uid) == UNSCHEDULABLE
    assert not q.in_flight_events, "no attempt open: nothing kept"
    q.move_all_to_active_or_backoff(NODE_LABEL)
    assert q.where(p.uid) == BACKOFF


def test_only_the_events_of_the_pods_own_attempt_count(clock):
    q = make_queue(clock)
    q.add(pod("early"))
    q.add(pod("late"))
    early = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(NODE_ADD)  # during early's attempt only
    late = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(POD_DELETE)
    fail(q, late, "FakeLabelFilter")
    fail(q, early, "FakeLabelFilter")
    assert (q.where(early.uid), q.where(late.uid)) == (BACKOFF, UNSCHEDULABLE)


def test_a_change_of_the_pod_during_its_attempt_sends_it_to_backoff(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    changed = type(p)({**p.raw, "metadata": {**p.raw["metadata"], "labels": {"new": "label"}}})
    q.update(p, changed)
    fail(q, changed, "FakeLabelFilter")
    assert q.where(p.uid) == BACKOFF


def test_in_flight_events_are_trimmed_to_the_oldest_open_attempt(clock, monkeypatch):
    monkeypatch.setattr("kubesched.backend.queue.IN_FLIGHT_EVENTS_TRIM", 10)
    q = make_queue(clock)
    q.add(pod("binding"))
    q.add(pod("p"))
    binding = q.pop(timeout=0)
    q.done(binding.uid)  # binding: its attempt stays open until it is bound or returns
    for _unused in range(5):
        q.move_all_to_active_or_backoff(POD_DELETE)
    p = q.pop(timeout=0)
    for _unused in range(20):
        q.move_all_to_active_or_backoff(POD_DELETE)
    assert q.in_flight_events[0][0] == 0, "the binding pod's events are kept"
    q.delete(binding)  # bound
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert q.in_flight_events[0][0] == 5 and len(q.in_flight_events) == 21
    fail(q, p, "FakeLabelFilter")
    assert not q.in_flight_events
    q.add(pod("stuck"))
    q.done(q.pop(timeout=0).uid)  # a bind that never ends keeps only the latest events
    for _unused in range(100):
        q.move_all_to_active_or_backoff(POD_DELETE)
    assert len(q.in_flight_events) <= 4 * 10 + 1


def test_in_flight_events_go_as_soon_as_no_open_attempt_needs_them(clock):
    # upstream's Done. Kept until the list reached IN_FLIGHT_EVENTS_TRIM, a scheduler that
    # always had some pod binding held thousands of events and the pod versions they were about.
    q = make_queue(clock)
    for name in ("first", "second", "third"):
        q.add(pod(name))
    first = q.pop(timeout=0)
    q.done(first.uid)
    q.move_all_to_active_or_backoff(POD_DELETE)  # event 0
    second = q.pop(timeout=0)
    q.done(second.uid)
    q.move_all_to_active_or_backoff(POD_DELETE)  # event 1
    third = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(POD_DELETE)  # event 2
    q.delete(second)  # bound: first, still binding, needs every event
    assert [number for number, *_rest in q.in_flight_events] == [0, 1, 2]
    q.delete(first)  # bound: the oldest open attempt is third's, from event 2
    assert [number for number, *_rest in q.in_flight_events] == [2]
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, third, "FakeLabelFilter")
    assert q.where(third.uid) == BACKOFF  # the events of its attempt still counted
    assert not q.in_flight_events


def test_the_oldest_open_attempt_is_found_in_any_order_of_ends_and_its_record_stays_bounded(clock):
    # The oldest open attempt is found from the front of a record kept in start order (a
    # minimum over every open attempt on each end cost the binding-heavy hot path time in
    # proportion to the binds in flight); checked here against that minimum.
    import random
    rng = random.Random(7)
    q = make_queue(clock)
    for n in range(40):
        q.add(pod(f"p{n}"))
    stuck = q.pop(timeout=0)
    q.done(stuck.uid)  # a bind that stays open while hundreds of attempts come and go
    oldest = set()
    for step in range(3000):
        clock.now += 1  # backoffs expire
        if step == 1500:
            assert q._oldest_open_attempt() == q.binding[stuck.uid].events_from == 0
            q.delete(stuck)  # bound at last: from now on the oldest is whichever began first
        if q.entries and rng.random() < 0.5:
            p = q.pop(timeout=0)
            if p is not None and rng.random() < 0.8:
                q.done(p.uid)
        elif len(q.in_flight) + len(q.binding) > 1:
            uid = rng.choice([u for u in (*q.in_flight, *q.binding) if u != stuck.uid])
            entry = q.in_flight.get(uid) or q.binding[uid]
            if rng.random() < 0.5:
                q.delete(entry.pod)  # bound
                q.add(pod(f"again{step}"))
            else:
                fail(q, entry.pod, "FakeLabelFilter")
        q.move_all_to_active_or_backoff(NODE_LABEL)  # the failed come back
        opened = [e.events_from for table in (q.in_flight, q.binding) for e in table.values()]
        if opened:
            assert q._oldest_open_attempt() == min(opened)
            assert len(q._attempts) <= 2 * len(opened) + 64 + 1
            oldest.add(min(opened))
    assert len(oldest) > 100, "the oldest open attempt changed as attempts ended"


def test_backoff_pod_is_popped_early_when_nothing_else_waits(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, p, "FakeLabelFilter")
    assert q.where(p.uid) == BACKOFF
    q.add(pod("fresh"))
    assert q.pop(timeout=0).name == "fresh"
    assert q.pop(timeout=0).name == "p"


def test_unschedulable_pods_are_flushed_after_five_minutes(clock):
    q = make_queue(clock)
    q.add(pod("p"))
    p = q.pop(timeout=0)
    fail(q, p, "FakeLabelFilter")
    clock.now += 299
    q.flush_unschedulable_leftover()
    assert q.where(p.uid) == UNSCHEDULABLE
    clock.now += 2
    q.flush_unschedulable_leftover()
    assert q.where(p.uid) == ACTIVE


def test_gated_pod_waits_until_its_gates_are_removed(clock):
    q = make_queue(clock)
    gated = pod("g", gates=["example.com/wait"])
    q.add(gated)
    assert q.where(gated.uid) == GATED
    assert q.pop(timeout=0) is None
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where(gated.uid) == GATED
    ungated = pod("g", uid=gated.uid)
    q.update(gated, ungated)
    assert q.where(gated.uid) == ACTIVE
    assert q.pop(timeout=0).name == "g"


def test_update_of_unschedulable_pod_requeues_only_on_spec_change(clock):
    q = make_queue(clock)
    q.add(pod("p", uid="u1"))
    p = q.pop(timeout=0)
    fail(q, p, "FakeLabelFilter")
    same = pod("p", uid="u1")
    same.raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    q.update(p, same)
    assert q.where("u1") == UNSCHEDULABLE
    relabelled = pod("p", uid="u1", labels={"new": "label"})
    clock.now += 5
    q.update(same, relabelled)
    assert q.where("u1") == ACTIVE
    assert q.pop(timeout=0).attempts == 2  # the first attempt carried over to the new object


def test_delete_removes_from_any_place(clock):
    q = make_queue(clock)
    a, b = pod("a"), pod("b")
    q.add(a)
    q.add(b)
    q.delete(a)
    assert q.pop(timeout=0).name == "b"
    assert q.pop(timeout=0) is None
    assert q.counts == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, PENDING: 0}


def test_a_queue_that_is_never_popped_keeps_no_item_of_a_pod_that_left(clock, monkeypatch):
    # A standby's queue: pods arrive, change, and leave (bound by the leader, deleted), and
    # nothing pops. Each left a heap item behind, and a standby held every pending pod it ever
    # saw (the soak's standbys grew 8 KB per arriving pod).
    monkeypatch.setattr("kubesched.backend.queue.STALE_HEAP_ITEMS", 50)
    q = make_queue(clock)
    for n in range(1000):
        p = pod(f"p{n}", priority=n % 7, uid=f"u{n}")
        q.add(p)
        clock.now += 1
        q.update(p, pod(f"p{n}", priority=n % 7, uid=f"u{n}"))  # a status change re-places it
        if n % 10:
            q.delete(p)
        assert len(q.active_heap) <= 2 * q.counts[ACTIVE] + 50 + 1
    # What remains still pops in order: the highest priority first, then the oldest.
    left = [q.pop(timeout=0).name for _unused in range(q.counts[ACTIVE])]
    assert q.pop(timeout=0) is None
    assert left == sorted((f"p{n}" for n in range(0, 1000, 10)), key=lambda name: (-(int(name[1:]) % 7),
                                                                                   int(name[1:])))


def test_a_pod_deleted_while_it_is_scheduled_leaves_nothing_behind(clock):
    q = make_queue(clock)
    q.add(pod("gone"))
    q.add(pod("other"))
    gone = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(POD_DELETE)
    q.delete(gone)  # deleted mid-attempt: no later event names its uid
    q.done(gone.uid)  # the attempt ends (a bind that finds no pod, or a failure it abandons)
    assert not q.in_flight and not q.binding and not q.in_flight_events
    assert q.pop(timeout=0).name == "other"


def test_a_pod_deleted_while_it_is_scheduled_does_not_come_back_from_its_attempt(clock):
    q = make_queue(clock)
    q.add(p := pod("gone"))
    q.pop(timeout=0)
    q.delete(p)  # the watch's delete lands while the attempt's failure is being handled
    fail(q, p, "FakeLabelFilter")
    assert q.entries == {} and q.pop(timeout=0) is None


def test_a_pod_skipped_and_popped_again_is_forgotten_from_both_tables_on_delete(clock):
    # A deleting pod (a finalizer) is skipped, its entry left as binding; the finalizer's removal
    # queues it again, and it is popped again before its final delete arrives.
    q = make_queue(clock)
    q.add(p := pod("finalized", uid="u1"))
    q.done(q.pop(timeout=0).uid)
    q.update(p, pod("finalized", uid="u1"))
    q.pop(timeout=0)
    q.delete(p)
    q.done(p.uid)
    assert not q.in_flight and not q.binding


def test_nominator_tracks_pods_per_node(clock):
    q = make_queue(clock)
    p = pod("p")
    q.nominator.add_nominated_pod(p, "n1")
    assert [x.name for x in q.nominator.nominated_pods_for_node("n1")] == ["p"]
    q.nominator.add_nominated_pod(p, "n2")
    assert q.nominator.nominated_pods_for_node("n1") == []
    q.delete(p)
    assert not q.nominator.has_nominated_pods()


def test_unschedulable_pods_metric_counts_per_rejecting_plugin(clock):
    from kubesched.metrics import REGISTRY

    def value():
        return REGISTRY.get_sample_value("scheduler_unschedulable_pods",
                                         {"plugin": "FakeCpuFit", "profile": "metric-profile"}) or 0

    q = make_queue(clock)
    q.add(pod("p", scheduler="metric-profile"))
    p = q.pop(timeout=0)
    before = value()
    fail(q, p, "FakeCpuFit")
    assert value() == before + 1
    clock.now += 5
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert value() == before


def test_a_pod_already_nominated_keeps_its_nomination(clock):
    q = make_queue(clock)
    p = pod("nominated")
    p.nominated_node_name = "n7"
    q.add(p)
    assert [x.name for x in q.nominator.nominated_pods_for_node("n7")] == ["nominated"]


def test_requeued_pod_runs_pre_enqueue_again_and_waits_gated_if_rejected(clock):
    # Upstream's moveToActiveQ/moveToBackoffQ: e.g. a pod's ResourceClaim deleted while it
    # waited unschedulable goes back to waiting in PreEnqueue, not into a failing cycle.
    from kubesched.framework.interface import Code, Status

    rejected: set[str] = set()
    q = SchedulingQueue(FakeSort(None, None).less, clock=clock,
                        pre_enqueue=lambda p: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "claim gone",
                                                     plugin="FakeClaims") if p.uid in rejected else None,
                        plugin_events={"FakeLabelFilter": FakeLabelFilter(None, None).events_to_register()})
    q.add(pod("p", uid="u1"))
    p = q.pop(timeout=0)
    fail(q, p, "FakeLabelFilter")
    rejected.add("u1")
    q.move_all_to_active_or_backoff(NODE_LABEL)
    assert q.where("u1") == GATED
    rejected.clear()
    q.move_all_to_active_or_backoff(NODE_LABEL)  # FakeClaims registers nothing: any event may help
    assert q.where("u1") in (ACTIVE, BACKOFF)


def member(name, group="g"):
    p = pod(name)
    p.raw["spec"]["schedulingGroup"] = {"podGroupName": group}
    return type(p)(p.raw)


def test_a_member_arriving_while_its_group_is_scheduled_waits_and_returns_with_the_rejected_group(clock):
    q = make_queue(clock)
    a, b = member("a"), member("b")
    q.add(a)
    q.add(b)
    first = q.pop(timeout=0)
    others = q.pop_pod_group_members("default/g", [b.uid if first is a else a.uid])
    late, stranger, elsewhere = member("late"), pod("stranger"), member("other", group="h")
    q.add(late)
    q.add(stranger)
    q.add(elsewhere)
    assert q.where(late.uid) == PENDING and q.pending()[PENDING] == [late]
    assert metrics.pending_pods.labels(PENDING)._value.get() == 1  # pylint: disable=protected-access
    assert q.where(stranger.uid) == ACTIVE and q.where(elsewhere.uid) == ACTIVE, "only the group in flight parks"
    clock.now += 5
    for p in [first, *others]:
        q.add_attempted_pod_group_member(p, rejected=True, group_size=2)
    assert q.where(late.uid) == PENDING, "until the attempt is over"
    q.pod_group_attempted()
    assert q.where(late.uid) == BACKOFF
    entries = [q.entries[p.uid] for p in (first, late)]
    assert [e.unschedulable_count for e in entries] == [1, 1]
    assert q.backoff_time(entries[1]) == q.backoff_time(entries[0]) == 1006.0, "the group's backoff, not a pod's own"
    assert not q.pending()[PENDING] and q.pod_group_in_flight == ""
    q.add(member("after"))
    assert q.pending()[PENDING] == [], "no group in flight: a new member queues as any pod"


def test_after_a_group_that_was_placed_its_late_member_goes_straight_to_the_active_queue(clock):
    q = make_queue(clock)
    q.add(member("a"))
    first = q.pop(timeout=0)
    assert q.pop_pod_group_members("default/g", []) == []
    late = member("late")
    q.add(late)
    q.done(first.uid)  # bound: it does not return
    q.pod_group_attempted()
    assert q.where(late.uid) == ACTIVE and q.entries[late.uid].unschedulable_count == 0


def test_a_late_member_deleted_while_it_waits_is_gone(clock):
    q = make_queue(clock)
    q.add(member("a"))
    q.pop(timeout=0)
    q.pop_pod_group_members("default/g", [])
    late = member("late")
    q.add(late)
    q.delete(late)
    assert q.where(late.uid) == "" and q.counts[PENDING] == 0
    q.pod_group_attempted()
    assert q.where(late.uid) == ""


def preemption_queue(clock, waiting: set):
    """A queue whose PreEnqueue holds the pods in waiting, as DefaultPreemption holds a pod
    whose victims are still being evicted; the gate's own event hint always skips."""
    def pre_enqueue(p):
        if p.uid in waiting:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for the preemption", plugin="Preempting")
        return None

    events = {"FakeCpuFit": FakeCpuFit(None, None).events_to_register(),
              "Preempting": [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, hint=lambda *a: False)]}
    return SchedulingQueue(FakeSort(None, None).less, pre_enqueue=pre_enqueue, plugin_events=events, clock=clock)


def test_a_pod_gated_after_its_attempt_is_requeued_by_the_plugins_that_rejected_it(clock):
    waiting: set = set()
    q = preemption_queue(clock, waiting)
    q.add(pod("hi", cpu="2"))
    p = q.pop(timeout=0)
    waiting.add(p.uid)
    q.done(p.uid)
    fail(q, p, "FakeCpuFit")
    clock.now += 5
    q.move_all_to_active_or_backoff(POD_DELETE)  # a first victim gone, the preemption still running
    assert q.where(p.uid) == GATED
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert q.where(p.uid) == GATED
    waiting.clear()
    q.move_all_to_active_or_backoff(NODE_TAINT)  # FakeCpuFit does not register it: the pod stays
    assert q.where(p.uid) == GATED
    q.move_all_to_active_or_backoff(POD_DELETE)  # the last victim gone: FakeCpuFit cares, the gate opens
    assert q.where(p.uid) == ACTIVE


def test_a_gated_pod_whose_gate_opened_without_an_event_goes_at_the_five_minute_flush(clock):
    waiting: set = set()
    q = preemption_queue(clock, waiting)
    q.add(pod("hi", cpu="2"))
    q.add(pod("still", cpu="2"))
    hi, still = q.pop(timeout=0), q.pop(timeout=0)
    waiting.update((hi.uid, still.uid))
    for p in (hi, still):
        q.done(p.uid)
        fail(q, p, "FakeCpuFit")
    q.move_all_to_active_or_backoff(POD_DELETE)  # a first victim gone, the preemptions still running
    assert q.where(hi.uid) == q.where(still.uid) == GATED
    waiting.discard(hi.uid)  # the gate opened, and no event came to say so
    clock.now += 299
    q.flush_unschedulable_leftover()
    assert q.where(hi.uid) == GATED
    clock.now += 2
    q.flush_unschedulable_leftover()
    assert q.where(hi.uid) == ACTIVE and q.where(still.uid) == GATED
    assert q.counts[GATED] == 1 and q.counts[ACTIVE] == 1
    # One still held back is asked again five minutes later, not at every flush.
    waiting.clear()
    clock.now += 30
    q.flush_unschedulable_leftover()
    assert q.where(still.uid) == GATED
    clock.now += 300
    q.flush_unschedulable_leftover()
    assert q.where(still.uid) == ACTIVE


def test_activate_moves_a_waiting_pod_past_its_backoff_and_marks_one_in_flight(clock):
    waiting: set = set()
    q = preemption_queue(clock, waiting)
    for name in ("a", "b", "c"):
        q.add(pod(name, cpu="2"))
    a, b = q.pop(timeout=0), q.pop(timeout=0)
    fail(q, a, "FakeCpuFit")  # waits for an event
    assert q.where(a.uid) == UNSCHEDULABLE
    b.unschedulable_plugins = set()
    q.add_unschedulable_if_not_present(b)  # an error: backoff
    assert q.where(b.uid) == BACKOFF
    c = q.pop(timeout=0)
    q.activate([a, b, c])
    assert q.where(a.uid) == ACTIVE and q.where(b.uid) == ACTIVE
    fail(q, c, "FakeCpuFit")  # activated while in flight: no waiting for an event
    assert q.where(c.uid) == BACKOFF
    # Activation goes through PreEnqueue.
    d = pod("d", cpu="2")
    q.add(d)
    d = q.pop(timeout=0)
    fail(q, d, "FakeCpuFit")
    waiting.add(d.uid)
    q.activate([d])
    assert q.where(d.uid) == GATED


def test_the_record_of_attempts_stays_bounded_when_no_event_is_ever_recorded(clock):
    # Attempts that end with no in-flight event to drop never look for the oldest open one;
    # the record of attempts must not grow with them (a binding pod is always open here).
    q = make_queue(clock)
    q.add(pod("binding"))
    q.done(q.pop(timeout=0).uid)
    for n in range(1000):
        q.add(pod(f"p{n}"))
        p = q.pop(timeout=0)
        q.done(p.uid)
        q.delete(p)  # bound
    assert not q.in_flight_events
    assert len(q._attempts) <= 2 * 1 + 64 + 1
