"""The scheduling queue (upstream pkg/scheduler/backend/queue/scheduling_queue.go).

Three places a pending pod can wait:
- activeQ: a heap ordered by the profile's QueueSort ``less`` (PrioritySort: priority, then
  the time it was queued); ``pop`` takes from here.
- backoffQ: pods that failed recently, ordered by when their backoff ends. A pod's backoff
  is podInitialBackoffSeconds * 2^(failures-1), capped at podMaxBackoffSeconds. When activeQ
  is empty, pop takes the next backoffQ pod early (upstream's SchedulerPopFromBackoffQ).
- unschedulable pods: pods no node fitted. They move back to activeQ/backoffQ when a cluster
  event one of their rejecting plugins registered for happens (a node added, a taint removed,
  a pod deleted...) and that plugin's QueueingHint, shown the objects before and after, does
  not rule it out; or after podMaxInUnschedulablePodsDuration (5 minutes) regardless. A pod
  rejected while such an event arrived during its attempt goes to backoffQ instead; events
  its rejecting plugins do not care about leave it with the unschedulable pods (upstream's
  in-flight events and determineSchedulingHintForInFlightPod).
Pods a PreEnqueue plugin rejects (SchedulingGates) wait as "gated" until an update lets them in.
A PodGroup's pod that arrives while its group is being scheduled waits as "pending" until the
group's attempt ends, and then returns with the group (upstream's pendingPodGroupPods).
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections import deque
from typing import Any, Callable

from kubesched import klog, metrics
from kubesched.backend.pod_groups import group_key
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.types import PodInfo

# Upstream's DefaultPodMaxInUnschedulablePodsDuration and flush periods.
POD_MAX_IN_UNSCHEDULABLE_SECONDS = 300.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0
BACKOFF_FLUSH_PERIOD = 1.0

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
PENDING = "pending"

# The in-flight events are dropped when the oldest attempt still open no longer needs them; when
# one attempt lasts past this many events (a bind that waits for the API server), the list is
# trimmed to it, and never holds more than four times this many.
IN_FLIGHT_EVENTS_TRIM = 4096
# A heap is rebuilt from its live items when it holds more than this many stale ones beside them
# (a removed or re-placed pod's item stays until popped; a standby never pops).
STALE_HEAP_ITEMS = 1024

# Event labels as upstream names them in scheduler_queue_incoming_pods_total.
EVENT_POD_ADD = "PodAdd"
EVENT_UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
EVENT_BACKOFF_COMPLETE = "BackoffComplete"
EVENT_SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
EVENT_FORCE_ACTIVATE = "ForceActivate"


class QueuedPod:
    """Queue bookkeeping beside the PodInfo (upstream QueuedPodInfo). The PodInfo's own
    timestamp/attempts/unschedulable_plugins fields are kept current, since QueueSort reads them."""

    __slots__ = ("pod", "unschedulable_count", "consecutive_errors", "backoff_expiration",
                 "gated_by", "where", "events_from", "updated_in_flight", "unschedulable_since", "seq",
                 "group_size")

    def __init__(self, pod: PodInfo):
        self.pod = pod
        self.unschedulable_count = 0
        self.consecutive_errors = 0
        self.backoff_expiration = 0.0
        self.gated_by = ""
        self.where = ""
        # The first in-flight event of its current attempt, and whether the pod itself
        # changed during it (either may make a rejection stale).
        self.events_from = 0
        self.updated_in_flight = False
        self.unschedulable_since = 0.0
        self.seq = 0
        # The size of the PodGroup it was last attempted with (0: attempted alone); a group's
        # backoff is longer and never cut short (upstream's entity error backoff queue).
        self.group_size = 0


class _ActiveItem:
    __slots__ = ("entry", "less", "seq")

    def __init__(self, entry: QueuedPod, less: Callable[[PodInfo, PodInfo], bool], seq: int):
        self.entry = entry
        self.less = less
        self.seq = seq

    def __lt__(self, other: "_ActiveItem") -> bool:
        return self.less(self.entry.pod, other.entry.pod)


class Nominator:
    """Pods nominated to nodes by preemption, so filters account for the room they will take."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_node: dict[str, dict[str, PodInfo]] = {}
        self.node_of: dict[str, str] = {}

    def add_nominated_pod(self, pod: PodInfo, node_name: str = "") -> None:
        node_name = node_name or pod.nominated_node_name
        with self.lock:
            self._delete(pod.uid)
            if node_name:
                self.by_node.setdefault(node_name, {})[pod.uid] = pod
                self.node_of[pod.uid] = node_name

    def delete_nominated_pod_if_exists(self, pod: PodInfo) -> None:
        with self.lock:
            self._delete(pod.uid)

    def _delete(self, uid: str) -> None:
        node = self.node_of.pop(uid, None)
        if node is not None:
            pods = self.by_node.get(node)
            if pods is not None:
                pods.pop(uid, None)
                if not pods:
                    del self.by_node[node]

    def update_nominated_pod(self, old: PodInfo, new: PodInfo) -> None:
        """Keep a nomination we made when an update arrives before the status patch."""
        with self.lock:
            node = new.nominated_node_name or (self.node_of.get(old.uid, "") if not old.nominated_node_name else "")
            self._delete(old.uid)
            if node:
                self.by_node.setdefault(node, {})[new.uid] = new
                self.node_of[new.uid] = node

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        if not self.by_node:  # hot path: usually nobody is nominated
            return []
        with self.lock:
            return list(self.by_node.get(node_name, {}).values())

    def has_nominated_pods(self) -> bool:
        return bool(self.by_node)


class SchedulingQueue:
    """One queue for all profiles (they share the QueueSort plugin, as upstream requires)."""

    def __init__(self, less: Callable[[PodInfo, PodInfo], bool], *,
                 pre_enqueue: Callable[[PodInfo], Any] | None = None,
                 plugin_events: dict[str, list[ClusterEvent]] | None = None,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = POD_MAX_IN_UNSCHEDULABLE_SECONDS,
                 nominator: Nominator | None = None, clock: Callable[[], float] = time.monotonic):
        self.less = less
        self.pre_enqueue = pre_enqueue or (lambda pod: None)
        self.plugin_events = plugin_events or {}
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.nominator = nominator or Nominator()
        self.clock = clock
        self.cond = threading.Condition()
        self.entries: dict[str, QueuedPod] = {}  # uid -> entry, for pods in any of the three places
        # The unschedulable (and gated) entries alone: cluster events scan only these, not the
        # thousands of pods that may be waiting in activeQ.
        self.unschedulable: dict[str, QueuedPod] = {}
        self.active_heap: list[_ActiveItem] = []
        self.backoff_heap: list[tuple[float, int, QueuedPod]] = []
        self.in_flight: dict[str, QueuedPod] = {}
        # Pods whose binding is under way keep their history, so a failed bind backs off by
        # its count of consecutive errors; dropped once the pod is bound or deleted.
        self.binding: dict[str, QueuedPod] = {}
        self.scheduling_cycle = 0
        # Cluster events seen while any pod was in flight or binding, as (number, event, old, new):
        # a rejected pod is judged by those of its own attempt (upstream's inFlightEvents).
        self.in_flight_events: deque[tuple[int, ClusterEvent, dict | None, dict | None]] = deque()
        self._events_seen = 0
        # Every attempt begun, as (its first event number, its entry), in the order they began
        # (so in order of number): the oldest still open is found at the front once the ended
        # ones there are dropped, without looking at every open attempt.
        self._attempts: deque[tuple[int, QueuedPod]] = deque()
        self.closed = False
        self._seq = itertools.count()
        # The PodGroup being scheduled ("namespace/name", '' for none), the pods of it that
        # arrived since, and a member it returned with (whose queueing the arrivals share).
        self.pod_group_in_flight = ""
        self.pending_pod_group_pods: dict[str, QueuedPod] = {}
        self._returned_member: QueuedPod | None = None
        self.counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, PENDING: 0}
        # Metric series resolved once: labels() on every queue operation would cost more
        # than the operation itself.
        self._pending_gauges = {name: metrics.pending_pods.labels(name) for name in self.counts}
        self._incoming: dict[tuple[str, str], Any] = {}

    # -- bookkeeping ----------------------------------------------------------------------

    def _place(self, entry: QueuedPod, where: str, event: str) -> None:
        """Put entry into a place (removing it from its current one)."""
        self._unplace(entry)
        entry.where = where
        entry.seq = next(self._seq)
        self.entries[entry.pod.uid] = entry
        if where == ACTIVE:
            heapq.heappush(self.active_heap, _ActiveItem(entry, self.less, entry.seq))
            if len(self.active_heap) > 2 * self.counts[ACTIVE] + STALE_HEAP_ITEMS:
                self.active_heap = [i for i in self.active_heap if i.entry.where == ACTIVE and i.entry.seq == i.seq]
                heapq.heapify(self.active_heap)
            self.cond.notify()
        elif where == BACKOFF:
            heapq.heappush(self.backoff_heap, (self.backoff_time(entry), entry.seq, entry))
            if len(self.backoff_heap) > 2 * self.counts[BACKOFF] + STALE_HEAP_ITEMS:
                self.backoff_heap = [i for i in self.backoff_heap if i[2].where == BACKOFF and i[2].seq == i[1]]
                heapq.heapify(self.backoff_heap)
            self.cond.notify()
        elif where == UNSCHEDULABLE:
            entry.unschedulable_since = self.clock()
            self.unschedulable[entry.pod.uid] = entry
            self._count_rejectors(entry, 1)
        elif where == PENDING:
            self.pending_pod_group_pods[entry.pod.uid] = entry
        self.counts[GATED if where == UNSCHEDULABLE and entry.gated_by else where] += 1
        self._publish()
        if where == PENDING:  # upstream counts a pod in scheduler_queue_incoming_pods_total when its group returns
            return
        key = (GATED if where == UNSCHEDULABLE and entry.gated_by else where, event)
        counter = self._incoming.get(key)
        if counter is None:
            counter = self._incoming[key] = metrics.queue_incoming_pods.labels(*key)
        counter.inc()

    def _unplace(self, entry: QueuedPod) -> None:
        # Heap items are invalidated lazily: a popped item whose seq no longer matches is stale.
        if entry.where:
            self.counts[GATED if entry.where == UNSCHEDULABLE and entry.gated_by else entry.where] -= 1
            self.entries.pop(entry.pod.uid, None)
            if self.unschedulable.pop(entry.pod.uid, None) is not None:
                self._count_rejectors(entry, -1)
            elif entry.where == PENDING:
                del self.pending_pod_group_pods[entry.pod.uid]
            entry.where = ""
            entry.seq = -1

    @staticmethod
    def _count_rejectors(entry: QueuedPod, delta: int) -> None:
        """scheduler_unschedulable_pods: each waiting pod counts once per plugin that rejected it."""
        if entry.gated_by:
            return
        for plugin in entry.pod.unschedulable_plugins | entry.pod.pending_plugins:
            metrics.unschedulable_pods.labels(plugin, entry.pod.scheduler_name).inc(delta)

    def _publish(self) -> None:
        for name, value in self.counts.items():
            self._pending_gauges[name].set(value)

    def backoff_time(self, entry: QueuedPod) -> float:
        if not entry.backoff_expiration:
            count = entry.consecutive_errors or entry.unschedulable_count
            entry.backoff_expiration = entry.pod.timestamp + self.backoff_duration(count, entry.group_size)
        return entry.backoff_expiration

    def backoff_duration(self, count: int, group_size: int = 0) -> float:
        """podInitialBackoffSeconds doubled per failure beyond the first, capped at the max
        (for a PodGroup the max times the square root of its size, calculateBackoffDuration)."""
        if count <= 0:
            return 0.0
        cap = self.max_backoff * math.sqrt(group_size) if group_size > 1 else self.max_backoff
        return min(self.initial_backoff * 2 ** (count - 1), cap)

    def _is_backing_off(self, entry: QueuedPod) -> bool:
        return self.backoff_time(entry) > self.clock()

    # -- adding and removing --------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A new pending pod (upstream Add)."""
        with self.cond:
            if pod.uid in self.entries or pod.uid in self.in_flight:
                self._update_locked(pod)
                return
            self.add_locked(pod)

    def _enqueue_new(self, entry: QueuedPod, event: str) -> None:
        if self.pod_group_in_flight and entry.pod.pod_group and \
                group_key(entry.pod.namespace, entry.pod.pod_group) == self.pod_group_in_flight:
            self._place(entry, PENDING, event)
            return
        status = self.pre_enqueue(entry.pod)
        if status is not None and not status.is_success():
            entry.gated_by = status.plugin or "PreEnqueue"
            self._place(entry, UNSCHEDULABLE, event)
            return
        entry.gated_by = ""
        self._place(entry, ACTIVE, event)

    def update(self, old: PodInfo, new: PodInfo) -> None:
        """A pending pod changed (upstream Update)."""
        with self.cond:
            self._update_locked(new, old)

    def _update_locked(self, new: PodInfo, old: PodInfo | None = None) -> None:
        self.nominator.update_nominated_pod(old or new, new)
        entry = self.entries.get(new.uid)
        if entry is None:
            flying = self.in_flight.get(new.uid)
            if flying is not None:
                # Scheduling it right now; an update may make a rejection stale.
                _carry(flying.pod, new)
                flying.updated_in_flight = True
                return
            self.add_locked(new)
            return
        _carry(entry.pod, new)
        entry.pod = new
        if entry.where == UNSCHEDULABLE:
            if entry.gated_by:
                self._unplace(entry)
                self._enqueue_new(entry, "PodUpdate")
            elif old is None or _spec_changed(old, new):
                self._requeue(entry, "PodUpdate")
            return
        # Re-insert so the heap orders the new version.
        self._place(entry, entry.where, "PodUpdate")

    def add_locked(self, pod: PodInfo) -> None:
        entry = QueuedPod(pod)
        pod.timestamp = self.clock()
        if pod.nominated_node_name:
            # Nominated by an earlier preemption (maybe by another instance): keep its room.
            self.nominator.add_nominated_pod(pod)
        self._enqueue_new(entry, EVENT_POD_ADD)

    def delete(self, pod: PodInfo) -> None:
        """The pod is gone from the queue's concern: deleted, or bound. One being scheduled
        right now is forgotten too: its attempt ends without a pod to return (upstream's Done
        then finds nothing), and no later event would name its uid again."""
        with self.cond:
            binding = self.binding.pop(pod.uid, None)  # a uid may be in both: a deleting pod skipped
            flying = self.in_flight.pop(pod.uid, None)   # (done), then popped again after an update
            ended = [e.events_from for e in (binding, flying) if e is not None]
            if ended:
                self._forget_events_before_open_attempts(min(ended))
            self.nominator.delete_nominated_pod_if_exists(pod)
            entry = self.entries.get(pod.uid)
            if entry is not None:
                self._unplace(entry)
                self._publish()

    # -- the scheduling loop's side -------------------------------------------------------

    def pop(self, timeout: float | None = None) -> PodInfo | None:
        """Block until a pod is ready; None when closed or on timeout."""
        deadline = None if timeout is None else self.clock() + timeout
        with self.cond:
            while True:
                if self.closed:
                    return None
                entry = self._pop_active() or self._pop_backoff_early()
                if entry is not None:
                    break
                wait = None if deadline is None else deadline - self.clock()
                if wait is not None and wait <= 0:
                    return None
                self.cond.wait(timeout=min(wait, 1.0) if wait is not None else 1.0)
            self.scheduling_cycle += 1
            return self._take(entry)

    def _take(self, entry: QueuedPod) -> PodInfo:
        """Out of its place and in flight, in the current scheduling cycle."""
        self._unplace(entry)
        self._publish()
        entry.events_from = self._events_seen
        self._attempts.append((entry.events_from, entry))
        entry.updated_in_flight = False
        entry.backoff_expiration = 0.0
        pod = entry.pod
        pod.attempts += 1
        if not pod.initial_attempt_ts:
            pod.initial_attempt_ts = time.time()
        self.in_flight[pod.uid] = entry
        if self._attempts_overgrown():
            self._oldest_open_attempt()  # keeps the record of attempts bounded whatever ends them
        return pod

    def pop_pod_group_members(self, key: str, uids: list[str]) -> list[PodInfo]:
        """The pods among uids that wait in the queue (not gated), taken out with the member
        just popped, in the same cycle: a PodGroup is scheduled as one (upstream queues it as
        one QueuedPodGroupInfo), whichever of its pods an event moved first. Until
        pod_group_attempted, the group (key) is in flight: its pods that arrive wait as pending."""
        with self.cond:
            self.pod_group_in_flight = key
            self._returned_member = None
            taken = []
            for uid in uids:
                entry = self.entries.get(uid)
                if entry is not None and not (entry.where == UNSCHEDULABLE and entry.gated_by):
                    taken.append(self._take(entry))
            return taken

    def _pop_active(self) -> QueuedPod | None:
        while self.active_heap:
            item = heapq.heappop(self.active_heap)
            if item.entry.where == ACTIVE and item.entry.seq == item.seq:
                return item.entry
        return None

    def _pop_backoff_early(self) -> QueuedPod | None:
        # Only pods rejected by plugins; pods that hit errors keep their full backoff.
        stash = []
        found = None
        while self.backoff_heap:
            expiry, seq, entry = heapq.heappop(self.backoff_heap)
            if entry.where != BACKOFF or entry.seq != seq:
                continue
            if entry.consecutive_errors == 0 and not entry.group_size:
                found = entry
                break
            stash.append((expiry, seq, entry))
        for item in stash:
            heapq.heappush(self.backoff_heap, item)
        return found

    def done(self, uid: str) -> None:
        """The scheduling attempt is over (the pod is binding, or was skipped)."""
        with self.cond:
            entry = self.in_flight.pop(uid, None)
            if entry is not None:
                self.binding[uid] = entry

    def _returned(self, pod: PodInfo) -> QueuedPod | None:
        """The entry of a pod whose attempt ended (its in-flight one, carried over), or None when
        the pod is queued already or its attempt is no longer open: it was deleted or bound
        meanwhile (delete), and must not come back. Called with the lock held."""
        flying = self.in_flight.pop(pod.uid, None) or self.binding.pop(pod.uid, None)
        if flying is None or pod.uid in self.entries:
            return None
        _carry(flying.pod, pod)
        flying.pod = pod
        return flying

    def add_unschedulable_if_not_present(self, pod: PodInfo) -> None:
        """Return a pod whose attempt failed: to backoffQ when it might fit now (an error, a
        change of the pod itself, or an event one of its rejecting plugins says may help that
        arrived during its attempt), else to the unschedulable pods."""
        with self.cond:
            entry = self._returned(pod)
            if entry is None:
                return
            pod.timestamp = self.clock()
            entry.backoff_expiration = 0.0
            rejected = bool(pod.unschedulable_plugins or pod.pending_plugins)
            if rejected:
                entry.unschedulable_count += 1
                entry.consecutive_errors = 0
            else:
                entry.consecutive_errors += 1
            if not rejected or entry.updated_in_flight or self._helped_in_flight(entry):
                self._place(entry, BACKOFF, EVENT_SCHEDULE_ATTEMPT_FAILURE)
            else:
                self._place(entry, UNSCHEDULABLE, EVENT_SCHEDULE_ATTEMPT_FAILURE)
            self._forget_events_before_open_attempts(entry.events_from)

    def _helped_in_flight(self, entry: QueuedPod) -> bool:
        """Whether an event of entry's attempt may help it: one of its rejecting plugins
        registered the event and its QueueingHint does not say skip (upstream
        determineSchedulingHintForInFlightPod; the pre-check of a move does not apply)."""
        pod = entry.pod
        plugins = pod.unschedulable_plugins | pod.pending_plugins
        for number, event, old, new in reversed(self.in_flight_events):
            if number < entry.events_from:
                break
            if any(self._plugin_cares(plugin, event, pod, old, new) for plugin in plugins):
                return True
        return False

    def _forget_events_before_open_attempts(self, ended_from: int) -> None:
        """An attempt that began at event number ended_from is over: drop the in-flight events
        no open attempt needs (upstream's Done). All of them when none is open; else, when the
        attempt that ended may have been the oldest, those before the oldest still open. Each
        event keeps the objects it was about (the old version of a pod, otherwise garbage):
        kept until the list reached IN_FLIGHT_EVENTS_TRIM, a scheduler that always has a pod
        binding held thousands of them (the soak's leader: 3,954 events, 19 MB)."""
        events = self.in_flight_events
        if not self.in_flight and not self.binding:
            events.clear()
            self._attempts.clear()
        elif events and ended_from <= events[0][0]:
            self._drop_events_before(self._oldest_open_attempt())

    def _oldest_open_attempt(self) -> int:
        """The event number the oldest attempt still open (scheduling or binding) began at.
        Attempts end in about the order they began, so the ended ones are dropped from the
        front of the record as they are found there (amortized constant time per attempt); an
        attempt that stays open long (a slow bind) while thousands begin and end behind it has
        the record rebuilt from the open ones once it holds twice as many as are open."""
        attempts = self._attempts
        while attempts and not self._open(*attempts[0]):
            attempts.popleft()
        if not attempts or self._attempts_overgrown():
            attempts = self._attempts = deque(sorted(
                ((entry.events_from, entry) for table in (self.in_flight, self.binding) for entry in table.values()),
                key=lambda attempt: attempt[0]))
        return attempts[0][0]

    def _attempts_overgrown(self) -> bool:
        """Whether the record of attempts holds more than twice as many as are open (and 64)."""
        return len(self._attempts) > 2 * (len(self.in_flight) + len(self.binding)) + 64

    def _open(self, number: int, entry: QueuedPod) -> bool:
        """Whether the attempt entry began at event number is still open."""
        uid = entry.pod.uid
        return entry.events_from == number and (self.in_flight.get(uid) is entry or self.binding.get(uid) is entry)

    def _drop_events_before(self, number: int) -> None:
        events = self.in_flight_events
        while events and events[0][0] < number:
            events.popleft()

    def _record_in_flight_event(self, event: ClusterEvent, old: dict | None, new: dict | None) -> None:
        events = self.in_flight_events
        events.append((self._events_seen, event, old, new))
        self._events_seen += 1
        if len(events) > IN_FLIGHT_EVENTS_TRIM:
            # However long a bind takes, the list stays bounded: an attempt that old has only
            # its latest events judged (a pod left unschedulable by that is retried within the
            # 5-minute flush).
            self._drop_events_before(max(self._oldest_open_attempt(), self._events_seen - 4 * IN_FLIGHT_EVENTS_TRIM))

    def add_attempted_pod_group_member(self, pod: PodInfo, rejected: bool, group_size: int,
                                       without_backoff: bool = False) -> None:
        """Return a pod whose PodGroup was attempted (upstream AddAttemptedPodGroupIfNeeded):
        never to the unschedulable pods to wait for an event, as a group carries no rejecting
        plugin, but through PreEnqueue to backoff (the group's, counted per attempt) or, after
        a group that was placed, straight to the active queue."""
        with self.cond:
            entry = self._returned(pod)
            if entry is None:
                return
            entry.group_size = group_size
            entry.backoff_expiration = 0.0
            if pod.pod_group and group_key(pod.namespace, pod.pod_group) == self.pod_group_in_flight:
                self._returned_member = entry
            if without_backoff:
                entry.unschedulable_count = entry.consecutive_errors = 0
            else:
                pod.timestamp = self.clock()
                if rejected:
                    entry.unschedulable_count += 1
                    entry.consecutive_errors = 0
                else:
                    entry.consecutive_errors += 1
            self._requeue(entry, EVENT_SCHEDULE_ATTEMPT_FAILURE)
            self._forget_events_before_open_attempts(entry.events_from)

    def pod_group_attempted(self) -> None:
        """The in-flight PodGroup's attempt is over and its members are back (upstream
        AddAttemptedPodGroupIfNeeded): the pods of it that arrived meanwhile join it, queued as a
        member that returned is (its failures, its time, straight to the active queue after a group
        that was placed, else its backoff), or, when none returned, as the group's new pods."""
        with self.cond:
            member = self._returned_member
            self.pod_group_in_flight = ""
            self._returned_member = None
            for entry in list(self.pending_pod_group_pods.values()):
                self._unplace(entry)
                entry.backoff_expiration = 0.0
                if member is None:
                    entry.pod.timestamp = self.clock()
                    self._enqueue_new(entry, EVENT_SCHEDULE_ATTEMPT_FAILURE)
                    continue
                entry.unschedulable_count = member.unschedulable_count
                entry.consecutive_errors = member.consecutive_errors
                entry.group_size = member.group_size
                entry.pod.timestamp = member.pod.timestamp
                self._requeue(entry, EVENT_SCHEDULE_ATTEMPT_FAILURE)

    # -- cluster events -------------------------------------------------------------------

    def move_all_to_active_or_backoff(self, event: ClusterEvent,
                                      pre_check: Callable[[PodInfo], bool] | None = None,
                                      old: dict | None = None, new: dict | None = None) -> None:
        """Requeue every unschedulable pod that one of its rejecting plugins says this event
        may help (upstream isPodWorthRequeuing): the plugin registered the event and its
        hint, given the objects before (old) and after (new) the change, does not say skip."""
        with self.cond:
            if self.in_flight or self.binding:
                self._record_in_flight_event(event, old, new)
            label = _event_label(event)
            for entry in list(self.unschedulable.values()):
                if pre_check is not None and not pre_check(entry.pod):
                    continue
                if entry.gated_by:
                    # The plugins that rejected its last attempt count too (upstream adds the
                    # gating plugin to them): DefaultPreemption's gate waits on the victims'
                    # deletions, which only NodeResourcesFit and the like register.
                    gated = {entry.gated_by} | entry.pod.unschedulable_plugins | entry.pod.pending_plugins
                    if any(self._plugin_cares(p, event, entry.pod, old, new) for p in gated):
                        self._unplace(entry)
                        self._enqueue_new(entry, label)
                    continue
                plugins = entry.pod.unschedulable_plugins | entry.pod.pending_plugins
                if not plugins or any(self._plugin_cares(p, event, entry.pod, old, new) for p in plugins):
                    self._requeue(entry, label)

    def activate(self, pods: list[PodInfo]) -> None:
        """Move these pods to the active queue now, past their backoff (upstream Activate),
        through PreEnqueue. A pod being scheduled goes to backoff when its attempt fails,
        instead of waiting for an event among the unschedulable pods."""
        with self.cond:
            for pod in pods:
                flying = self.in_flight.get(pod.uid) or self.binding.get(pod.uid)
                if flying is not None:
                    flying.updated_in_flight = True
                    continue
                entry = self.entries.get(pod.uid)
                if entry is None or entry.where not in (UNSCHEDULABLE, BACKOFF):
                    continue
                self._unplace(entry)
                self._enqueue_new(entry, EVENT_FORCE_ACTIVATE)

    def _plugin_cares(self, plugin: str, event: ClusterEvent, pod: PodInfo, old: dict | None,
                      new: dict | None) -> bool:
        registered = self.plugin_events.get(plugin)
        if registered is None:
            # A plugin that registers nothing could be unblocked by anything.
            return True
        for r in registered:
            if not r.matches(event):
                continue
            if r.hint is None or (old is None and new is None):
                return True
            try:
                if r.hint(pod, old, new):
                    return True
            except Exception as err:  # noqa: BLE001 - a broken hint must not lose the pod: requeue, as upstream
                klog.error("QueueingHint failed; requeueing the pod", plugin=plugin, pod=pod.key, err=repr(err))
                return True
        return False

    def _requeue(self, entry: QueuedPod, event: str) -> None:
        # Upstream runs PreEnqueue again on the way to activeQ or backoffQ: a pod whose
        # ResourceClaim was deleted meanwhile waits gated instead of failing a cycle.
        status = self.pre_enqueue(entry.pod)
        if status is not None and not status.is_success():
            self._unplace(entry)
            entry.gated_by = status.plugin or "PreEnqueue"
            self._place(entry, UNSCHEDULABLE, event)
            return
        self._place(entry, BACKOFF if self._is_backing_off(entry) else ACTIVE, event)

    def flush_backoff_completed(self) -> None:
        with self.cond:
            now = self.clock()
            while self.backoff_heap:
                expiry, seq, entry = self.backoff_heap[0]
                if entry.where != BACKOFF or entry.seq != seq:
                    heapq.heappop(self.backoff_heap)
                    continue
                if expiry > now:
                    break
                heapq.heappop(self.backoff_heap)
                self._place(entry, ACTIVE, EVENT_BACKOFF_COMPLETE)

    def flush_unschedulable_leftover(self) -> None:
        """Pods left unschedulable longer than max_in_unschedulable go on (upstream
        flushUnschedulableEntitiesLeftover); gated ones too, through PreEnqueue again, so a pod
        whose gate opened without an event that says so does not wait for ever."""
        with self.cond:
            since = self.clock() - self.max_in_unschedulable
            for entry in [e for e in self.unschedulable.values() if e.unschedulable_since < since]:
                if entry.gated_by:
                    self._unplace(entry)
                    self._enqueue_new(entry, EVENT_UNSCHEDULABLE_TIMEOUT)
                else:
                    self._requeue(entry, EVENT_UNSCHEDULABLE_TIMEOUT)

    def run_flushers(self, stop: threading.Event) -> threading.Thread:
        def loop() -> None:
            last_unschedulable_flush = self.clock()
            while not stop.wait(BACKOFF_FLUSH_PERIOD):
                self.flush_backoff_completed()
                if self.clock() - last_unschedulable_flush >= UNSCHEDULABLE_FLUSH_PERIOD:
                    self.flush_unschedulable_leftover()
                    last_unschedulable_flush = self.clock()

        thread = threading.Thread(target=loop, name="queue-flush", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    # -- introspection --------------------------------------------------------------------

    def pending(self) -> dict[str, list[PodInfo]]:
        with self.cond:
            out: dict[str, list[PodInfo]] = {ACTIVE: [], BACKOFF: [], UNSCHEDULABLE: [], GATED: [], PENDING: []}
            for e in self.entries.values():
                out[GATED if e.where == UNSCHEDULABLE and e.gated_by else e.where].append(e.pod)
            return out

    def where(self, uid: str) -> str:
        with self.cond:
            entry = self.entries.get(uid)
            if entry is not None:
                return GATED if entry.where == UNSCHEDULABLE and entry.gated_by else entry.where
            return "in-flight" if uid in self.in_flight else ""


def _carry(old: PodInfo, new: PodInfo) -> None:
    """Keep the queue history when a pod's object is replaced by a newer version."""
    if old is new:
        return
    new.timestamp = old.timestamp
    new.attempts = old.attempts
    new.initial_attempt_ts = old.initial_attempt_ts
    new.unschedulable_plugins = old.unschedulable_plugins
    new.pending_plugins = old.pending_plugins


def _spec_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether an update could change the scheduling outcome (upstream ignores updates that
    only touch status, resourceVersion, generation or managedFields)."""
    a, b = old.raw, new.raw
    if a.get("spec") != b.get("spec"):
        return True
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    return ma.get("labels") != mb.get("labels") or ma.get("annotations") != mb.get("annotations")


_RESOURCE_LABELS = {EventResource.NODE: "Node", EventResource.ASSIGNED_POD: "AssignedPod",
                    EventResource.POD: "Pod", EventResource.UNSCHEDULED_POD: "UnschedulablePod"}


def _event_label(event: ClusterEvent) -> str:
    if event.label:
        return event.label
    action = "Add" if event.action & ActionType.ADD else "Delete" if event.action & ActionType.DELETE else "Update"
    return f"{_RESOURCE_LABELS.get(event.resource, str(event.resource.value))}{action}"
