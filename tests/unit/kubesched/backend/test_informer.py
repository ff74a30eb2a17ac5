"""List+watch: events in order, 410 Gone relists with a diff, paged listings, lost connections retried."""

import threading

from kubesched_fakes import FakeClient

from kubesched.backend import informer as informer_module
from kubesched.backend.informer import Informer
from kubesched.client import WatchExpired


def obj(name, rv):
    return {"metadata": {"name": name, "resourceVersion": rv}}


def run(lists, watches):
    stop = threading.Event()
    client = FakeClient(listings=lists, watches=watches, stop=stop)
    seen = []
    inf = Informer(client, "/api/v1/nodes", name="nodes",
                   on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                   on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
                   on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    inf.stop = stop
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
