"""List-then-watch of one resource, kept alive forever (client-go's Reflector + Informer).

A watch that expires (410 Gone) is replaced by a fresh list, whose difference from what we
held becomes add/update/delete callbacks; a lost connection is retried with exponential
backoff from the last resourceVersion seen (cut short by ``Informer.retry_now`` when a new
leader finds the server answering while the informer still waits to try again). Callbacks
run on this thread, in order; with a client of kubesched/apiproc.py the list and watch run in
the watch process instead, and the callbacks on the thread that applies its records, in the
same order.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from typing import Any, Callable

import urllib3

from kubesched import klog
from kubesched.backend.trim import Transform, intern_strings, trim_metadata
from kubesched.client import ApiClient, ApiError, WatchExpired

INITIAL_RETRY = 0.8
MAX_RETRY = 30.0
WAKE_CHECK = 0.25  # how often a wait between attempts looks at stop while it waits on wake
WATCH_TIMEOUT = 300  # seconds the server keeps one watch open (client-go picks 5-10 minutes)
# A watch from a past resourceVersion is sent what the server holds since at once: a silence
# this long after that means nothing more is owed (owed_version).
CATCH_UP_IDLE = 0.1


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else meta.get("name", "")


class Informer:
    """Keeps ``store`` (key -> raw object) equal to the server's collection at ``path``."""

    def __init__(self, client: ApiClient, path: str, *, name: str,
                 on_add: Callable[[dict], None], on_update: Callable[[dict, dict], None],
                 on_delete: Callable[[dict], None], page_size: int = 0,
                 watch_timeout: int = WATCH_TIMEOUT, transform: Transform = trim_metadata):
        self.client = client
        self.path = path
        self.name = name
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        # Applied to every object before it is stored or handed to a callback (backend/trim.py).
        self.transform = transform
        self.store: dict[str, dict] = {}
        self.resource_version = ""
        self.synced = threading.Event()
        self.relists = 0
        self._listing: list[dict] = []
        self._unchanged: set[str] = set()
        self.stop = threading.Event()
        self.wake = threading.Event()  # ends a wait before the next attempt (retry_now)
        self.thread: threading.Thread | None = None

    def start(self, stop: threading.Event | None = None) -> "Informer":
        if stop is not None:
            self.stop = stop
        hub = getattr(self.client, "watch_hub", None)
        if hub is not None:
            hub.watch(self)  # the list and watch run in the watch process (apiproc.py)
            return self
        self.thread = threading.Thread(target=self.run, name=f"informer-{self.name}", daemon=True)
        self.thread.start()
        return self

    def retry_now(self) -> None:
        """If the reflector waits to try a failed list or watch again, try at once."""
        hub = getattr(self.client, "watch_hub", None)
        if hub is not None:
            hub.retry_now(self)
        else:
            self.wake.set()

    def get(self, key: str) -> dict | None:
        return self.store.get(key)

    def list(self) -> list[dict]:
        return list(self.store.values())

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """List and watch on this thread, applying what arrives (the in-process reflector)."""
        reflect(self.client, self.path, self.name, self.stop, self.apply_list_page, self.apply_event,
                page_size=self.page_size, watch_timeout=self.watch_timeout, transform=self.transform,
                wake=self.wake)

    # -- what the reflector found, applied to the store and reported --------------------

    def apply_list_page(self, items: list[dict], first: bool, resource_version: str | None) -> None:
        """One page of a listing: pages are gathered until the last (resource_version set).

        An item the store holds at the same resourceVersion (and uid) is only noted: after a reconnect
        most of a listing is unchanged, and keeping a second copy of each until the last page
        came made a relist's memory peak the store twice over (the soak's standbys kept that
        high-water mark)."""
        if first:
            # A listing broken off midway is dropped with its pages.
            self._listing, self._unchanged = [], set()
        for item in items:
            key = object_key(item)
            held = self.store.get(key)
            if held is not None and _rv(item) and _rv(held) == _rv(item) and _uid(held) == _uid(item):
                self._unchanged.add(key)
            else:
                self._listing.append(item)
        if resource_version is not None:
            listing, unchanged, self._listing, self._unchanged = self._listing, self._unchanged, [], set()
            self.apply_list(listing, resource_version, unchanged)

    def apply_list(self, items: list[dict], resource_version: str, unchanged: frozenset | set = frozenset()) -> None:
        """A fresh listing (transformed): its difference from the store becomes callbacks.
        unchanged: keys the listing also holds, at the version the store has."""
        fresh = {object_key(item): item for item in items}
        old_store = self.store
        for key, old in list(old_store.items()):
            if key not in fresh and key not in unchanged:
                del self.store[key]
                self.on_delete(old)
        for key, obj in fresh.items():
            self._store(key, obj, old_store.get(key))
        self.resource_version = resource_version
        self.relists += 1
        self.synced.set()

    def apply_event(self, etype: str, obj: dict, resource_version: str) -> None:
        """One watch event (transformed; BOOKMARKs only move the resourceVersion)."""
        if etype == "ADDED" or etype == "MODIFIED":
            key = object_key(obj)
            self._store(key, obj, self.store.get(key))
        elif etype == "DELETED":
            self.store.pop(object_key(obj), None)
            self.on_delete(obj)
        if resource_version:
            self.resource_version = resource_version

    def holds(self, resource_version: str) -> bool:
        """Whether every change up to resource_version (an integer, as etcd makes them) has
        been applied to the store and its handlers."""
        seen = self.resource_version
        return seen.isdigit() and int(seen) >= int(resource_version)

    def _store(self, key: str, obj: dict, old: dict | None) -> None:
        """Keep obj and report it as an add, or an update of old (unless unchanged)."""
        self.store[key] = intern_strings(obj)
        if old is not None and _uid(old) != _uid(obj):
            # Deleted and re-created under the same name while we were not watching.
            self.on_delete(old)
            old = None
        if old is None:
            self.on_add(obj)
        elif _rv(old) != _rv(obj):
            self.on_update(old, obj)


ListSink = Callable[[list, bool, "str | None"], None]
EventSink = Callable[[str, dict, str], None]


def reflect(client: ApiClient, path: str, name: str, stop: threading.Event, on_list: ListSink,
            on_event: EventSink, *, page_size: int = 0, watch_timeout: int = WATCH_TIMEOUT,
            transform: Transform = trim_metadata, wake: threading.Event | None = None) -> None:
    """client-go's Reflector: list, then watch from the listing's resourceVersion until stop.

    on_list(items, first, resourceVersion) gets every page of every listing (resourceVersion
    None until the last page: a listing is never held whole here, so the watch process's memory
    stays at one page), on_event(type, object, resourceVersion) every watch event, both
    transformed and in the server's order. A sink that raises makes
    the next round a relist, so a handler bug cannot leave the store behind for good. Setting
    wake ends a wait between attempts, and the backoff starts over.
    """
    retry = INITIAL_RETRY
    need_list = True
    resource_version = ""
    while not stop.is_set():
        try:
            if need_list:
                resource_version = list_into(client, path, page_size, transform, on_list)
                need_list = False
                retry = INITIAL_RETRY
            for event in client.watch(path, resource_version, timeout_seconds=watch_timeout):
                if stop.is_set():
                    return
                etype = event.get("type")
                obj: dict[str, Any] = event.get("object") or {}
                rv = _rv(obj)
                if etype != "BOOKMARK":
                    obj = transform(obj)
                on_event(etype, obj, rv)
                if rv:
                    resource_version = rv
            retry = INITIAL_RETRY
        except WatchExpired as err:
            klog.info("Watch expired, relisting", resource=name, reason=str(err)[:200])
            need_list = True
        except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            klog.warning("Watch failed, retrying", resource=name, retryIn=f"{retry:.1f}s", err=str(err)[:300])
            if isinstance(err, ApiError) and err.status in (401, 403):
                need_list = True
            retry = _back_off(stop, wake, retry, retry * (1 + random.random() * 0.2))
        except Exception:  # a handler bug must not kill the informer for good
            klog.error("Unexpected error in informer; relisting", resource=name, err=traceback.format_exc(limit=5))
            need_list = True
            retry = _back_off(stop, wake, retry, retry)


def _back_off(stop: threading.Event, wake: threading.Event | None, retry: float, seconds: float) -> float:
    """Wait seconds (or until stop or wake) before the next attempt; the next retry's delay:
    doubled, or the first again when woken."""
    if wake is None:
        stop.wait(seconds)
        return min(retry * 2, MAX_RETRY)
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return min(retry * 2, MAX_RETRY)
        if wake.wait(min(left, WAKE_CHECK)):
            wake.clear()
            return INITIAL_RETRY
    return retry


def owed_version(client: ApiClient, path: str, seen: str, deadline: float) -> str | None:
    """The resourceVersion an informer that has applied `seen` must reach to hold every change
    the server has made to path by now; None when it holds them all already.

    A listing of one item is a quorum read: its resourceVersion is the server's now. The
    changes since `seen` that concern path are what a watch from `seen` replays, in order; the
    last one at or before now is the answer. Versions are compared as the integers etcd makes;
    a server whose versions are not integers gives None (nothing can be told from them).
    """
    listing = client.request("GET", path, params={"limit": "1"})
    now = (listing.get("metadata") or {}).get("resourceVersion", "")
    if not (now.isdigit() and seen.isdigit()) or int(seen) >= int(now):
        return None
    latest = int(now)
    owed = None
    try:
        for event in client.watch(path, seen, timeout_seconds=max(1, int(deadline - time.monotonic())),
                                  bookmarks=False, idle_timeout=CATCH_UP_IDLE):
            rv = _rv(event.get("object") or {})
            if not rv.isdigit() or int(rv) > latest:
                break
            owed = rv
            if time.monotonic() >= deadline:
                break
    except urllib3.exceptions.ReadTimeoutError:
        pass  # quiet: the server has sent all it held since `seen`
    except WatchExpired:
        return now  # `seen` is older than the server's watch window: only now itself will do
    return owed


def list_into(client: ApiClient, path: str, page_size: int, transform: Transform, on_list: ListSink) -> str:
    """List every page of path into on_list (transformed); the listing's resourceVersion.

    A page without a continue token is the last: the next page is asked for only once this one
    was handed on (on_list may wait for that, apiproc.py), so a listing holds one untrimmed page
    at a time."""
    first = True
    for page in client.list_pages(path, page_size=page_size):
        last = not (page.get("metadata") or {}).get("continue")
        kind = page.get("kind", "").removesuffix("List")
        api_version = page.get("apiVersion", "")
        items = []
        for item in page.get("items") or []:
            # List items carry no kind/apiVersion; event objects need them for involvedObject.
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            items.append(transform(item))
        resource_version = (page.get("metadata") or {}).get("resourceVersion", "")
        on_list(items, first, resource_version if last else None)
        first = False
    return resource_version


def _uid(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid", "")


def _rv(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")
