"""Events as kube-scheduler records them: events.k8s.io/v1, reportingController = the profile's
schedulerName, written off the scheduling path by a background worker.

Repeats of the same event for the same object within the series window update one Event's
``series`` (as client-go's events broadcaster does) instead of creating new objects.
"""

from __future__ import annotations

import queue
import threading
import time
from datetime import datetime, timezone
from typing import Any

from kubesched import klog
from kubesched.client import ApiClient, ApiError

SERIES_WINDOW = 6 * 60.0
_MAX_PENDING = 10_000


def micro_time(ts: float | None = None) -> str:
    """metav1.MicroTime wire format: RFC 3339 with microseconds."""
    dt = datetime.fromtimestamp(time.time() if ts is None else ts, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventBroadcaster:
    """One worker thread sending events for every profile's recorder."""

    def __init__(self, client: ApiClient | None, instance: str):
        self.client = client
        self.instance = instance
        self.pending: queue.Queue = queue.Queue(maxsize=_MAX_PENDING)
        self.series: dict[tuple, list[Any]] = {}  # key -> [event name, namespace, count, first seen]
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.sent = 0

    def recorder(self, controller: str) -> "EventRecorder":
        return EventRecorder(self, controller)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="events", daemon=True)
        self.thread.start()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Send what is queued (bounded by timeout), then stop."""
        deadline = time.monotonic() + timeout
        while not self.pending.empty() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.stop.set()

    def submit(self, item: tuple) -> None:
        try:
            self.pending.put_nowait(item)
        except queue.Full:
            klog.warning("Dropping event, too many pending", reason=item[3])

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                item = self.pending.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._send(*item)
            except (ApiError, OSError) as err:
                klog.warning("Server rejected event (will not retry)", reason=item[3], err=str(err))
            except Exception as err:  # noqa: BLE001 - the event path must never stop
                klog.error("Unexpected error sending event", err=repr(err))

    def _send(self, controller: str, obj: dict, type_: str, reason: str, action: str, note: str,
              ts: float) -> None:
        if self.client is None:
            return
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (controller, meta.get("uid"), type_, reason, action, note)
        known = self.series.get(key)
        if known is not None and ts - known[3] < SERIES_WINDOW:
            known[2] += 1
            try:
                self.client.patch_event(known[1], known[0], {"series": {"count": known[2],
                                                                        "lastObservedTime": micro_time(ts)}})
                self.sent += 1
                return
            except ApiError as err:
                if err.status != 404:
                    raise
        name = f"{meta.get('name', 'unknown')}.{int(ts * 1e9):x}"
        event = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(ts),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.instance}",
            "action": action, "reason": reason, "type": type_, "note": note,
            "regarding": {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"),
                          "namespace": namespace, "name": meta.get("name"), "uid": meta.get("uid"),
                          "resourceVersion": meta.get("resourceVersion")},
        }
        self.client.create_event(namespace, event)
        self.sent += 1
        self.series[key] = [name, namespace, 1, ts]
        if len(self.series) > 50_000:
            cutoff = ts - SERIES_WINDOW
            self.series = {k: v for k, v in self.series.items() if v[3] >= cutoff}


class EventRecorder:
    """handle.event_recorder: ``eventf(obj_raw, type, reason, action, message)``."""

    def __init__(self, broadcaster: EventBroadcaster, controller: str):
        self.broadcaster = broadcaster
        self.controller = controller

    def eventf(self, obj_raw: dict, type_: str, reason: str, action: str, message: str) -> None:
        self.broadcaster.submit((self.controller, obj_raw, type_, reason, action, message, time.time()))
