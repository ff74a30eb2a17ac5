"""Events: events.k8s.io/v1 objects as kube-scheduler writes them, repeats folded into a series."""

from kubesched_fakes import FakeClient, pod_raw

from kubesched.events import EventBroadcaster, micro_time


def test_event_object_and_series():
    client = FakeClient()
    broadcaster = EventBroadcaster(client, "host-1")
    recorder = broadcaster.recorder("my-scheduler")
    pod = pod_raw("web", uid="u-1")
    for _unused in range(3):
        broadcaster._send(recorder.controller, pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes", 100.0)
    broadcaster._send(recorder.controller, pod, "Normal", "Scheduled", "Binding", "Successfully assigned", 101.0)
    created, patch1, patch2, scheduled = client.events
    assert created["reportingController"] == "my-scheduler"
    assert created["reportingInstance"] == "my-scheduler-host-1"
    assert (created["type"], created["reason"], created["action"], created["note"]) == \
        ("Warning", "FailedScheduling", "Scheduling", "0/1 nodes")
    assert created["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web",
                                    "uid": "u-1", "resourceVersion": "1"}
    assert created["metadata"]["name"].startswith("web.")
    assert created["eventTime"] == micro_time(100.0) == "1970-01-01T00:01:40.000000Z"
    assert patch1 == {"patch": {"series": {"count": 2, "lastObservedTime": micro_time(100.0)}},
                      "name": created["metadata"]["name"]}
    assert patch2["patch"]["series"]["count"] == 3
    assert scheduled["reason"] == "Scheduled"


def test_repeat_after_the_series_window_creates_a_new_event():
    client = FakeClient()
    broadcaster = EventBroadcaster(client, "h")
    pod = pod_raw("web", uid="u-1")
    broadcaster._send("s", pod, "Warning", "FailedScheduling", "Scheduling", "m", 0.0)
    broadcaster._send("s", pod, "Warning", "FailedScheduling", "Scheduling", "m", 400.0)
    assert [("patch" in e) for e in client.events] == [False, False]
