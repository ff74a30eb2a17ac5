"""Events: events.k8s.io/v1 objects as kube-scheduler writes them, repeats folded into a
series keyed and timed as client-go's tools/events broadcaster (v0.37.1) does it."""

import sys

from kubesched_fakes import FakeClient, pod_raw

from kubesched.client import ApiError
from kubesched.events import FINISH_TIME, REFRESH_TIME, EventBroadcaster, micro_time, regarding_of


class Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def make():
    client = FakeClient()
    clock = Clock()
    broadcaster = EventBroadcaster(client, "host-1", clock=clock)
    broadcaster.tick()  # the series timers start with the broadcaster, as client-go's StartRecordingToSink
    return client, clock, broadcaster


def failed(broadcaster, pod, note="0/1 nodes", ts=None):
    broadcaster._send("my-scheduler", regarding_of(pod), "Warning", "FailedScheduling", "Scheduling", note,
                      broadcaster.clock() if ts is None else ts)


def test_event_object_and_first_repeat_start_a_series():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    failed(broadcaster, pod)
    clock.now = 105.0
    failed(broadcaster, pod, note="a different message")  # the note is not part of the key
    created, patch1 = client.events
    assert created["reportingController"] == "my-scheduler"
    assert created["reportingInstance"] == "my-scheduler-host-1"
    assert (created["type"], created["reason"], created["action"], created["note"]) == \
        ("Warning", "FailedScheduling", "Scheduling", "0/1 nodes")
    assert created["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web",
                                    "uid": "u-1", "resourceVersion": "1"}
    # client-go's name: the regarding object's name, then the event time in hexadecimal nanoseconds
    assert created["metadata"] == {"name": "web.174876e800", "namespace": "default"}
    assert created["eventTime"] == micro_time(100.0) == "1970-01-01T00:01:40.000000Z"
    assert patch1 == {"patch": {"series": {"count": 2, "lastObservedTime": micro_time(105.0)}},
                      "name": created["metadata"]["name"]}
    assert [target for verb, target, _body in client.calls if verb == "patch_event"] == ["default/web.174876e800"]


def test_a_series_whose_event_is_gone_creates_it_again_as_it_was_first_written():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    failed(broadcaster, pod)
    client.fail("patch_event", ApiError(404, "NotFound", 'events.events.k8s.io "web.x" not found'))
    clock.now = 105.0
    failed(broadcaster, pod, note="another message")
    first, _refused_patch, again = client.events
    assert again == {**first, "series": {"count": 2, "lastObservedTime": micro_time(105.0)}}


def test_later_repeats_count_in_memory_and_reach_the_api_when_the_series_finishes():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    for step in range(5):
        clock.now = 100.0 + step
        failed(broadcaster, pod)
    assert len(client.events) == 2  # the create and the series start; counts 3..5 stay in memory
    clock.now = 100.0 + FINISH_TIME  # the finish timer's next run: last seen at 104, not yet 6 minutes
    broadcaster.tick()
    assert len(client.events) == 2
    clock.now = 100.0 + 2 * FINISH_TIME
    broadcaster.tick()
    assert client.events[-1]["patch"] == {"series": {"count": 5, "lastObservedTime": micro_time(104.0)}}
    failed(broadcaster, pod)  # the series is over: a new event
    assert "patch" not in client.events[-1] and client.events[-1]["note"] == "0/1 nodes"


def test_long_series_is_refreshed_every_thirty_minutes():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    sent = 0
    while clock.now < 100.0 + REFRESH_TIME:
        failed(broadcaster, pod)
        sent += 1
        clock.now += 60.0
        broadcaster.tick()
    refreshes = [e for e in client.events if "patch" in e]
    assert len(refreshes) == 2  # the series start, then the 30-minute refresh with the count so far
    assert refreshes[-1]["patch"]["series"]["count"] == sent


def test_a_new_resource_version_is_a_new_event():
    client, clock, broadcaster = make()
    failed(broadcaster, pod_raw("web", uid="u-1"))
    newer = pod_raw("web", uid="u-1")
    newer["metadata"]["resourceVersion"] = "2"
    failed(broadcaster, newer)
    assert [("patch" in e) for e in client.events] == [False, False]


def test_single_event_is_forgotten_after_six_minutes():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    failed(broadcaster, pod)
    clock.now += 2 * FINISH_TIME
    broadcaster.tick()
    failed(broadcaster, pod)
    assert [("patch" in e) for e in client.events] == [False, False]


def test_scheduled_event_after_failures_is_its_own_event():
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    failed(broadcaster, pod)
    broadcaster._send("my-scheduler", regarding_of(pod), "Normal", "Scheduled", "Binding", "Successfully assigned",
                      101.0)
    assert [e.get("reason") for e in client.events] == ["FailedScheduling", "Scheduled"]


def test_an_event_waiting_to_be_sent_keeps_a_reference_not_the_object():
    """A burst of events waits in the queue; each keeps the regarding object's reference
    fields, not the pod (whose old versions would otherwise stay alive until it is sent)."""
    client, _clock, broadcaster = make()
    pod = pod_raw("web", uid="u-1")
    held = sys.getrefcount(pod)
    broadcaster.recorder("my-scheduler").eventf(pod, "Normal", "Scheduled", "Binding", "Successfully assigned")
    assert sys.getrefcount(pod) == held
    item = broadcaster.pending.get_nowait()
    assert item[1] == ("v1", "Pod", "default", "web", "u-1", pod["metadata"].get("resourceVersion"))
    broadcaster._send(*item)
    (event,) = client.events
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web",
                                  "uid": "u-1", "resourceVersion": pod["metadata"].get("resourceVersion")}


def test_a_sent_event_keeps_none_of_its_pods_strings_until_it_repeats():
    """A leader keeps 6 to 12 minutes of events, most about pods deleted since: an event that
    has not repeated keeps a digest of its key, not the pod's name, UID and resourceVersion
    (which would outlive the pod). Its first repeat keeps the key, to name the series."""
    client, clock, broadcaster = make()
    pod = pod_raw("web", uid="".join(("u-", "1")))  # strings of this test alone
    pod["metadata"]["resourceVersion"] = "".join(("4", "2"))
    strings = [pod["metadata"][field] for field in ("name", "uid", "resourceVersion")]
    held = [sys.getrefcount(s) for s in strings]
    failed(broadcaster, pod)
    assert client.events[0]["regarding"]["uid"] == "u-1"
    client.calls.clear()  # the fake client's record of what was sent holds them too
    assert [sys.getrefcount(s) for s in strings] == held
    clock.now = 105.0
    failed(broadcaster, pod)
    assert client.events[0]["patch"]["series"]["count"] == 2
    client.calls.clear()
    assert [sys.getrefcount(s) for s in strings] == [h + 1 for h in held]
