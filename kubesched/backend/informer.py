"""List-then-watch of one resource, kept alive forever (client-go's Reflector + Informer).

A watch that expires (410 Gone) is replaced by a fresh list, whose difference from what we
held becomes add/update/delete callbacks; a lost connection is retried with exponential
backoff from the last resourceVersion seen. Callbacks run on this thread, in order.
"""

from __future__ import annotations

import random
import threading
import traceback
from typing import Any, Callable

import urllib3

from kubesched import klog
from kubesched.backend.trim import Transform, trim_metadata
from kubesched.client import ApiClient, ApiError, WatchExpired

INITIAL_RETRY = 0.8
MAX_RETRY = 30.0
WATCH_TIMEOUT = 300  # seconds the server keeps one watch open (client-go picks 5-10 minutes)


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
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, stop: threading.Event | None = None) -> "Informer":
        if stop is not None:
            self.stop = stop
        self.thread = threading.Thread(target=self.run, name=f"informer-{self.name}", daemon=True)
        self.thread.start()
        return self

    def get(self, key: str) -> dict | None:
        return self.store.get(key)

    def list(self) -> list[dict]:
        return list(self.store.values())

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        retry = INITIAL_RETRY
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                    retry = INITIAL_RETRY
                self.watch_once()
                retry = INITIAL_RETRY
            except WatchExpired as err:
                klog.info("Watch expired, relisting", resource=self.name, reason=str(err)[:200])
                need_list = True
            except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                klog.warning("Watch failed, retrying", resource=self.name, retryIn=f"{retry:.1f}s", err=str(err)[:300])
                if isinstance(err, ApiError) and err.status in (401, 403):
                    need_list = True
                if self.stop.wait(retry * (1 + random.random() * 0.2)):
                    return
                retry = min(retry * 2, MAX_RETRY)
            except Exception:  # a handler bug must not kill the informer for good
                klog.error("Unexpected error in informer; relisting", resource=self.name,
                           err=traceback.format_exc(limit=5))
                need_list = True
                if self.stop.wait(retry):
                    return
                retry = min(retry * 2, MAX_RETRY)

    def relist(self) -> None:
        listing = self.client.list(self.path, page_size=self.page_size)
        items = listing.get("items") or []
        kind = listing.get("kind", "").removesuffix("List")
        api_version = listing.get("apiVersion", "")
        fresh: dict[str, dict] = {}
        for item in items:
            # List items carry no kind/apiVersion; event objects need them for involvedObject.
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            fresh[object_key(item)] = self.transform(item)
        old_store = self.store
        for key, old in list(old_store.items()):
            if key not in fresh:
                del self.store[key]
                self.on_delete(old)
        for key, obj in fresh.items():
            self._store(key, obj, old_store.get(key))
        self.resource_version = (listing.get("metadata") or {}).get("resourceVersion", "")
        self.relists += 1
        self.synced.set()

    def watch_once(self) -> None:
        for event in self.client.watch(self.path, self.resource_version, timeout_seconds=self.watch_timeout):
            if self.stop.is_set():
                return
            etype = event.get("type")
            obj: dict[str, Any] = event.get("object") or {}
            rv = _rv(obj)
            if etype == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            key = object_key(obj)
            obj = self.transform(obj)
            if etype == "ADDED" or etype == "MODIFIED":
                self._store(key, obj, self.store.get(key))
            elif etype == "DELETED":
                self.store.pop(key, None)
                self.on_delete(obj)
            if rv:
                self.resource_version = rv

    def _store(self, key: str, obj: dict, old: dict | None) -> None:
        """Keep obj and report it as an add, or an update of old (unless unchanged)."""
        self.store[key] = obj
        if old is not None and _uid(old) != _uid(obj):
            # Deleted and re-created under the same name while we were not watching.
            self.on_delete(old)
            old = None
        if old is None:
            self.on_add(obj)
        elif _rv(old) != _rv(obj):
            self.on_update(old, obj)


def _uid(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid", "")


def _rv(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")
