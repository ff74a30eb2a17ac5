"""The status patch line: one waiting call per object, in order per object, droppable."""

import threading

from kubesched.backend.api_dispatcher import APIDispatcher, merge_status_patches


class Recorder:
    """A sender that records what it sent and can be held mid-send."""

    def __init__(self):
        self.sent = []
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.sending = {}
        self.overlap = False

    def sender(self, key):
        def send(body):
            with self.lock:
                self.overlap |= self.sending.get(key, 0) > 0
                self.sending[key] = self.sending.get(key, 0) + 1
            self.started.release()
            self.release.wait(10)
            with self.lock:
                self.sending[key] -= 1
                self.sent.append((key, body))
        return send


def condition(message):
    return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "message": message}]}}


def one_being_sent(workers, key, body):
    """A dispatcher whose first call (key, body) is being sent and held there until
    rec.release is set."""
    rec = Recorder()
    dispatcher = APIDispatcher(workers=workers)
    rec.release.clear()
    dispatcher.add(key, body, rec.sender(key))
    assert rec.started.acquire(timeout=5)
    return rec, dispatcher


def test_patches_for_one_pod_merge_while_it_waits_the_newest_condition_the_last_nomination():
    rec, dispatcher = one_being_sent(1, "held", condition("first"))  # the only worker is busy with "held"
    dispatcher.add("web", {"status": {"nominatedNodeName": "n1", **condition("a")["status"]}}, rec.sender("web"))
    for i in range(500):
        dispatcher.add("web", condition(f"attempt {i}"), rec.sender("web"))
    assert dispatcher.pending() == 2
    rec.release.set()
    assert dispatcher.wait_idle(5)
    assert rec.sent == [("held", condition("first")),
                        ("web", {"status": {"nominatedNodeName": "n1", **condition("attempt 499")["status"]}})]
    dispatcher.close(1)


def test_one_call_per_object_at_a_time_in_the_order_made():
    rec, dispatcher = one_being_sent(4, "web", condition("1"))
    dispatcher.add("web", condition("2"), rec.sender("web"))   # waits for "1", three workers idle
    dispatcher.add("db", condition("x"), rec.sender("db"))
    assert rec.started.acquire(timeout=5)  # "db" is not held up by "web"
    assert not rec.started.acquire(timeout=0.3)  # "2" has not started beside "1"
    rec.release.set()
    assert dispatcher.wait_idle(5)
    assert not rec.overlap
    assert [body for key, body in rec.sent if key == "web"] == [condition("1"), condition("2")]
    dispatcher.close(1)


def test_a_dropped_call_is_not_sent_and_one_being_sent_finishes():
    rec, dispatcher = one_being_sent(1, "web", condition("sending"))
    dispatcher.add("web", condition("stale"), rec.sender("web"))
    assert dispatcher.has_waiting("web")
    dispatcher.drop("web")
    assert not dispatcher.has_waiting("web")
    rec.release.set()
    assert dispatcher.wait_idle(5)
    assert rec.sent == [("web", condition("sending"))]
    dispatcher.close(1)


def test_a_failing_sender_does_not_stop_the_line():
    rec = Recorder()
    dispatcher = APIDispatcher(workers=1)

    def broken(_body):
        raise RuntimeError("boom")

    dispatcher.add("bad", condition("x"), broken)
    dispatcher.add("web", condition("y"), rec.sender("web"))
    assert dispatcher.wait_idle(5)
    assert rec.sent == [("web", condition("y"))]
    dispatcher.close(1)


def test_close_sends_what_waits_within_the_timeout_and_counts_the_rest():
    rec = Recorder()
    dispatcher = APIDispatcher(workers=2)
    for key in ("a", "b", "c"):
        dispatcher.add(key, condition(key), rec.sender(key))
    assert dispatcher.close(5) == 0
    assert sorted(key for key, _body in rec.sent) == ["a", "b", "c"]
    dispatcher.add("late", condition("late"), rec.sender("late"))  # closed: ignored
    assert dispatcher.pending() == 0

    held, stuck = one_being_sent(1, "a", condition("a"))
    stuck.add("b", condition("b"), held.sender("b"))
    assert stuck.close(0.2) == 2  # "a" still being sent, "b" never started
    held.release.set()


def test_merge_keeps_the_older_fields_the_newer_does_not_set():
    older = {"status": {"nominatedNodeName": "n1", "conditions": [1]}}
    assert merge_status_patches(older, {"status": {"conditions": [2]}}) == \
        {"status": {"nominatedNodeName": "n1", "conditions": [2]}}
    assert merge_status_patches(older, {"status": {"nominatedNodeName": None}}) == \
        {"status": {"nominatedNodeName": None, "conditions": [1]}}
