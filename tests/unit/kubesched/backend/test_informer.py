"""List+watch: events in order, 410 Gone relists with a diff, paged listings, lost connections retried."""

import threading
import time

import urllib3
from kubesched_fakes import CatchUpProbe, FakeClient

from kubesched.backend import informer as informer_module
from kubesched.backend.informer import Informer
from kubesched.client import WatchExpired


def obj(name, rv):
    return {"metadata": {"name": name, "resourceVersion": rv}}


def run(lists, watches, before=None):
    stop = threading.Event()
    client = FakeClient(listings=lists, watches=watches, stop=stop)
    seen = []
    inf = Informer(client, "/api/v1/nodes", name="nodes",
                   on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                   on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
                   on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    inf.stop = stop
    if before is not None:
        before(inf)
    inf.run()
    return inf, client, seen


def test_watch_events_update_the_store_and_resource_version():
    inf, client, seen = run(
        [{"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "10"}, "items": [obj("a", "9")]}],
        [[{"type": "ADDED", "object": obj("b", "11")}, {"type": "MODIFIED", "object": obj("a", "12")},
          {"type": "BOOKMARK", "object": obj("", "15")}, {"type": "DELETED", "object": obj("b", "16")}]])
    assert seen == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "b")]
    assert list(inf.store) == ["a"] and inf.resource_version == "16"
    assert client.watch_rvs == ["10", "16"]
    assert inf.store["a"]["metadata"]["resourceVersion"] == "12"


def test_expired_watch_relists_and_reports_the_difference():
    inf, client, seen = run(
        [{"metadata": {"resourceVersion": "10"}, "items": [obj("a", "1"), obj("b", "1"), obj("c", "1")]},
         {"metadata": {"resourceVersion": "50"}, "items": [obj("a", "1"), obj("b", "2"), obj("d", "3")]}],
        [WatchExpired("too old resource version"), []])
    assert seen[3:] == [("delete", "c"), ("update", "b"), ("add", "d")]
    assert inf.relists == 2 and client.watch_rvs == ["10", "50", "50"]


def test_lost_connection_retries_from_the_last_version(monkeypatch):
    monkeypatch.setattr(informer_module, "INITIAL_RETRY", 0.001)
    inf, client, seen = run(
        [{"metadata": {"resourceVersion": "10"}, "items": []}],
        [ConnectionResetError("reset by peer"), [{"type": "ADDED", "object": obj("a", "11")}]])
    assert seen == [("add", "a")]
    assert inf.relists == 1 and client.watch_rvs[:2] == ["10", "10"]


def test_retry_now_ends_the_wait_before_the_next_attempt(monkeypatch):
    monkeypatch.setattr(informer_module, "INITIAL_RETRY", 60.0)
    started = time.monotonic()
    _inf, client, seen = run(
        [{"metadata": {"resourceVersion": "10"}, "items": []}],
        [ConnectionResetError("reset by peer"), [{"type": "ADDED", "object": obj("a", "11")}]],
        before=lambda inf: threading.Timer(0.2, inf.retry_now).start())
    assert time.monotonic() - started < 10 and seen == [("add", "a")] and client.watch_rvs[:2] == ["10", "10"]


def test_a_wake_restarts_the_backoff_and_without_one_the_delay_doubles():
    stop, wake = threading.Event(), threading.Event()
    assert informer_module._back_off(stop, None, 1.6, 0.0) == 3.2
    assert informer_module._back_off(stop, wake, 20.0, 0.0) == informer_module.MAX_RETRY
    wake.set()
    assert informer_module._back_off(stop, wake, 20.0, 60.0) == informer_module.INITIAL_RETRY
    assert not wake.is_set()  # one wake ends one wait
    stop.set()
    started = time.monotonic()
    assert informer_module._back_off(stop, wake, 1.6, 60.0) == 1.6
    assert time.monotonic() - started < 1


def test_recreated_object_is_a_delete_and_an_add_not_an_update():
    old = {"metadata": {"name": "a", "uid": "1", "resourceVersion": "1"}}
    new = {"metadata": {"name": "a", "uid": "2", "resourceVersion": "5"}}
    inf, client, seen = run(
        [{"metadata": {"resourceVersion": "1"}, "items": [old]},
         {"metadata": {"resourceVersion": "9"}, "items": [new]}],
        [WatchExpired("gone"), []])
    assert seen == [("add", "a"), ("delete", "a"), ("add", "a")]


def test_a_paged_listing_is_applied_once_whole():
    inf, client, seen = run(
        [[{"kind": "NodeList", "metadata": {"continue": "x"}, "items": [obj("a", "1")]},
          {"kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": [obj("b", "2")]}]],
        [])
    assert seen == [("add", "a"), ("add", "b")] and inf.resource_version == "10" and inf.relists == 1
    assert inf.store["b"]["kind"] == "Node"


def test_a_listing_broken_off_midway_leaves_no_page_behind(monkeypatch):
    monkeypatch.setattr(informer_module, "INITIAL_RETRY", 0.001)
    inf, client, seen = run(
        [[{"metadata": {"continue": "x"}, "items": [obj("stale", "1")]}, ConnectionResetError("reset by peer")],
         {"metadata": {"resourceVersion": "20"}, "items": [obj("a", "2")]}],
        [])
    assert seen == [("add", "a")] and list(inf.store) == ["a"] and inf.relists == 1
    assert client.watch_rvs == ["20"]


PODS = "/api/v1/pods"


def owed(client, seen):
    return informer_module.owed_version(client, PODS, seen, time.monotonic() + 5)


def test_an_informer_at_the_servers_version_owes_nothing_and_no_watch_is_made():
    client = CatchUpProbe("40")
    assert owed(client, "40") is None and owed(client, "41") is None
    assert client.watched == []


def test_the_last_change_at_or_before_now_is_owed_and_later_ones_are_not():
    quiet = urllib3.exceptions.ReadTimeoutError(None, PODS, "read timed out")
    changes = [{"type": "MODIFIED", "object": obj("a", "31")}, {"type": "DELETED", "object": obj("b", "37")}]
    assert owed(CatchUpProbe("40", {PODS: changes}, then=quiet), "30") == "37"
    later = changes + [{"type": "ADDED", "object": obj("c", "45")}, {"type": "ADDED", "object": obj("d", "39")}]
    client = CatchUpProbe("40", {PODS: later})
    assert owed(client, "30") == "37"  # read up to the first change after now, not past it
    assert client.watched == [("30", False, informer_module.CATCH_UP_IDLE)]


def test_no_change_of_the_resource_since_the_informers_version_owes_nothing():
    # Other resources moved the server's version on (a Lease renewed): nothing to wait for.
    quiet = urllib3.exceptions.ReadTimeoutError(None, PODS, "read timed out")
    assert owed(CatchUpProbe("40", then=quiet), "30") is None


def test_a_version_older_than_the_servers_window_owes_the_servers_now():
    assert owed(CatchUpProbe("40", then=WatchExpired("too old resource version")), "3") == "40"


def test_versions_that_are_not_integers_tell_nothing():
    assert owed(CatchUpProbe("abc"), "30") is None
    assert owed(CatchUpProbe("40"), "") is None


def test_holds_compares_versions_as_integers():
    inf = Informer(None, "/api/v1/pods", name="pods", on_add=print, on_update=print, on_delete=print)
    assert not inf.holds("9")
    inf.resource_version = "10"
    assert inf.holds("9") and inf.holds("10") and not inf.holds("100")


def test_a_relisting_keeps_the_stored_copy_of_what_did_not_change_and_reports_the_rest():
    seen = []
    inf = Informer(FakeClient(), "/api/v1/nodes", name="nodes",
                   on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                   on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
                   on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    inf.apply_list_page([obj("a", "1"), obj("b", "1"), obj("c", "1")], True, "10")
    held_a = inf.store["a"]
    seen.clear()
    # A relist in two pages: a unchanged (its new copy is not kept), b changed, c gone, d new.
    inf.apply_list_page([obj("a", "1"), obj("b", "2")], True, None)
    assert inf._listing == [obj("b", "2")] and inf._unchanged == {"a"}
    inf.apply_list_page([obj("d", "3")], False, "20")
    assert seen == [("delete", "c"), ("update", "b"), ("add", "d")]
    assert inf.store["a"] is held_a and sorted(inf.store) == ["a", "b", "d"] and inf.resource_version == "20"
    # The same name and version under another uid is another object: deleted and added.
    recreated = {"metadata": {"name": "a", "resourceVersion": "1", "uid": "other"}}
    seen.clear()
    inf.apply_list_page([recreated, obj("b", "2"), obj("d", "3")], True, "30")
    assert seen == [("delete", "a"), ("add", "a")]
