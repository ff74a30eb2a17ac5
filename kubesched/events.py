"""Events as kube-scheduler records them: events.k8s.io/v1, reportingController = the profile's
schedulerName, written off the scheduling path by a background worker.

Repeats are folded into series as client-go's tools/events broadcaster does it: events are
keyed by type, action, reason, reporting controller and instance and the regarding object
(with its resourceVersion; the note is not part of the key, so a series keeps its first
note). The first repeat patches ``series`` {count: 2}; later repeats only count in memory.
Every 30 minutes ongoing series are written again; every 6 minutes a series not observed for
6 minutes is written one last time and forgotten, and so is a single event older than 6
minutes, so the next repeat starts a new event.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from datetime import datetime, timezone
from typing import Callable

from kubesched import klog
from kubesched.client import ApiClient, ApiError

# client-go tools/events: finishTime and refreshTime.
FINISH_TIME = 6 * 60.0
REFRESH_TIME = 30 * 60.0
_MAX_PENDING = 10_000


def micro_time(ts: float | None = None) -> str:
    """metav1.MicroTime wire format: RFC 3339 with microseconds."""
    dt = datetime.fromtimestamp(time.time() if ts is None else ts, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Cached:
    """An event as first written (its time and note), and its series (count, last observed)
    once repeated. A leader keeps 6 to 12 minutes of events, most of them never repeated, so
    the cache is keyed by a digest of each event's key (_digest), and an entry keeps the key
    itself, which names the event (_name, _namespace), only from its first repeat, when a
    series has to be written."""

    __slots__ = ("event_time", "note", "count", "last_observed", "key")

    def __init__(self, event_time: float, note: str):
        self.event_time = event_time
        self.note = note
        self.count = 0  # 0: no series yet
        self.last_observed = 0.0
        self.key: tuple | None = None  # set with count

    def series_patch(self) -> dict:
        return {"series": {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}}


class EventBroadcaster:
    """One worker thread sending events for every profile's recorder."""

    def __init__(self, client: ApiClient | None, instance: str, clock: Callable[[], float] = time.time):
        self.client = client
        self.instance = instance
        self.clock = clock
        self.pending: queue.Queue = queue.Queue(maxsize=_MAX_PENDING)
        # client-go's eventCache, by the digest of each event's isomorphic key: a busy scheduler
        # keeps 6 to 12 minutes of events (_event builds a series' event again from its entry).
        self.cache: dict[bytes, _Cached] = {}
        self.next_finish: float | None = None
        self.next_refresh: float | None = None
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
            self.tick()
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

    # -- the series timers (wait.Until: run at start, then a period after each run) --------

    def tick(self) -> None:
        now = self.clock()
        if self.next_refresh is None or now >= self.next_refresh:
            self._guarded(self.refresh_series)
            self.next_refresh = self.clock() + REFRESH_TIME
        if self.next_finish is None or now >= self.next_finish:
            self._guarded(self.finish_series)
            self.next_finish = self.clock() + FINISH_TIME

    @staticmethod
    def _guarded(timer: Callable[[], None]) -> None:
        try:
            timer()
        except Exception as err:  # noqa: BLE001 - the timers must keep running
            klog.error("Unexpected error writing event series", err=repr(err))

    def refresh_series(self) -> None:
        """refreshExistingEventSeries: write every ongoing series again (keeps its TTL)."""
        for cached in list(self.cache.values()):
            if cached.count:
                self._write_series(cached)

    def finish_series(self) -> None:
        """finishSeries: a series unseen for 6 minutes is written a last time and forgotten; a
        single event older than 6 minutes is forgotten."""
        cutoff = self.clock() - FINISH_TIME
        for digest, cached in list(self.cache.items()):
            if cached.count:
                if cached.last_observed < cutoff and self._write_series(cached):
                    self.cache.pop(digest, None)
            elif cached.event_time < cutoff:
                self.cache.pop(digest, None)

    def _write_series(self, cached: _Cached) -> bool:
        """Patch the series onto the event, or create it again when it is gone (recordEvent).
        Returns whether the write is done (no retry wanted)."""
        if self.client is None:
            return True
        key = cached.key
        try:
            self.client.patch_event(_namespace(key), _name(key, cached), cached.series_patch())
        except ApiError as err:
            if err.status != 404:
                klog.warning("Server rejected event series (will not retry)", event=_name(key, cached),
                             err=str(err))
                return True
            event = _event(key, cached)
            event["series"] = {"count": cached.count, "lastObservedTime": micro_time(cached.last_observed)}
            try:
                self.client.create_event(_namespace(key), event)
            except ApiError as create_err:
                # AlreadyExists on a series is retried by client-go; here at the next timer run.
                return create_err.status != 409
        except OSError:
            return False
        self.sent += 1
        return True

    # -- one event ------------------------------------------------------------------------

    def _send(self, controller: str, regarding: tuple, type_: str, reason: str, action: str, note: str,
              ts: float) -> None:
        """One event about regarding (regarding_of's tuple)."""
        if self.client is None:
            return
        reporting_instance = f"{controller}-{self.instance}"
        key = (type_, action, reason, controller, reporting_instance, regarding)
        digest = _digest(key)
        cached = self.cache.get(digest)
        if cached is not None:
            if cached.count:
                cached.count += 1
                cached.last_observed = self.clock()
                return  # counted in memory; the timers write it
            cached.count = 2
            cached.last_observed = self.clock()
            cached.key = key
            self._write_series(cached)
            return
        cached = self.cache[digest] = _Cached(ts, note)
        self.client.create_event(_namespace(key), _event(key, cached))
        self.sent += 1


_REGARDING = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion")


def _digest(key: tuple) -> bytes:
    """The cache's key for an event: 128 bits of BLAKE2b over the key's fields (unambiguous as
    their repr). 16 bytes instead of the tuple and the strings it would keep alive (the name,
    UID and resourceVersion of pods long deleted); two keys that differ collide with a chance
    of 2**-128."""
    return hashlib.blake2b(repr(key).encode(), digest_size=16).digest()


def regarding_of(obj: dict) -> tuple:
    """The object an event is about, as an ObjectReference's fields in _REGARDING's order.
    Taken when the event is recorded, as client-go's recorder takes its reference: an event
    waiting to be sent holds these few strings, not the object (a pod waiting behind a burst
    of events would keep every version of itself alive until its event is sent)."""
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion", "v1"), obj.get("kind", "Pod"), meta.get("namespace") or "default",
            meta.get("name"), meta.get("uid"), meta.get("resourceVersion"))


def _namespace(key: tuple) -> str:
    """The namespace of key's event: its regarding object's."""
    return key[-1][2]


def _name(key: tuple, cached: _Cached) -> str:
    """The name of key's event: its regarding object's name and the event time in nanoseconds,
    hexadecimal (client-go's fmt.Sprintf("%v.%x", refRegarding.Name, t.UnixNano()))."""
    return f"{key[-1][3] or 'unknown'}.{int(cached.event_time * 1e9):x}"


def _event(key: tuple, cached: _Cached) -> dict:
    """The events.k8s.io/v1 Event first created for key."""
    type_, action, reason, controller, reporting_instance, regarding = key
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": _name(key, cached), "namespace": _namespace(key)},
        "eventTime": micro_time(cached.event_time),
        "reportingController": controller,
        "reportingInstance": reporting_instance,
        "action": action, "reason": reason, "type": type_, "note": cached.note,
        "regarding": dict(zip(_REGARDING, regarding)),
    }


class EventRecorder:
    """handle.event_recorder: ``eventf(obj_raw, type, reason, action, message)``."""

    def __init__(self, broadcaster: EventBroadcaster, controller: str):
        self.broadcaster = broadcaster
        self.controller = controller

    def eventf(self, obj_raw: dict, type_: str, reason: str, action: str, message: str) -> None:
        self.broadcaster.submit((self.controller, regarding_of(obj_raw), type_, reason, action, message, time.time()))
