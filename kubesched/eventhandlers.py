"""What the informers' events do to the scheduler's cache and queue (upstream eventhandlers.go).

A bound pod goes to the cache; a pending pod this scheduler serves goes to the queue; a
change a scheduling decision reads (a node's taints, labels, allocatable, conditions; a
bound pod that leaves or shrinks) moves the unschedulable pods that care back to the queue.
Every other resource some plugin registered events for reaches the queue through one
dispatcher (add_all_event_handlers), whose ClusterEvents the plugins' QueueingHints judge.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Tuple

from kubesched import klog
from kubesched.backend.cache import SchedulerCache
from kubesched.backend.informers import RESOURCES, InformerRegistry, Resource
from kubesched.backend.pod_groups import PodGroups
from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.trim import resize_state
from kubesched.dra.manager import pods_affected_by_claim
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource, Status
from kubesched.framework.types import PodInfo, assigned, is_terminal

if TYPE_CHECKING:
    from kubesched.client import ApiClient
    from kubesched.framework.runtime import Framework

# Which pods an event can concern at all, before any plugin's hint is asked: each of the many
# claims the resourceclaim controller makes wakes only its own pod (dra/manager.py).
PRE_CHECKS = {EventResource.RESOURCE_CLAIM: pods_affected_by_claim}
# An informer's add, update and delete handlers (None: not wanted).
Handlers = Tuple[Optional[Callable[[dict], None]], Optional[Callable[[dict, dict], None]],
                 Optional[Callable[[dict], None]]]


def node_scheduling_properties_change(old: dict, new: dict) -> ActionType:
    """Which node properties a scheduling decision reads changed (nodeSchedulingPropertiesChange)."""
    action = ActionType(0)
    os_, ns = old.get("spec") or {}, new.get("spec") or {}
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    ost, nst = old.get("status") or {}, new.get("status") or {}
    if bool(os_.get("unschedulable")) != bool(ns.get("unschedulable")) or os_.get("taints") != ns.get("taints"):
        action |= ActionType.UPDATE_NODE_TAINT
    if ost.get("allocatable") != nst.get("allocatable"):
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if om.get("labels") != nm.get("labels"):
        action |= ActionType.UPDATE_NODE_LABEL
    if [(c.get("type"), c.get("status")) for c in ost.get("conditions") or ()] != \
            [(c.get("type"), c.get("status")) for c in nst.get("conditions") or ()]:
        action |= ActionType.UPDATE_NODE_CONDITION
    if om.get("annotations") != nm.get("annotations"):
        action |= ActionType.UPDATE_NODE_ANNOTATION
    if ost.get("declaredFeatures") != nst.get("declaredFeatures"):  # kept sorted by the kubelet
        action |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return action


class EventHandlers:
    """The Scheduler's informer side; scheduler.py assembles the attributes used here."""

    cache: SchedulerCache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    informers: InformerRegistry
    pod_groups: PodGroups | None = None  # with the GenericWorkload gate on

    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod: PodInfo) -> Status | None:
        fwk = self.frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue_plugins(pod) if fwk is not None else None

    def on_node_add(self, raw: dict) -> None:
        self.cache.add_node(raw)
        self.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd"),
                                                 new=raw)

    def on_node_update(self, old: dict, new: dict) -> None:
        self.cache.update_node(new)
        action = node_scheduling_properties_change(old, new)
        if action:
            self.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.NODE, action, "NodeUpdate"),
                                                     old=old, new=new)

    def on_node_delete(self, raw: dict) -> None:
        # A node leaving can help too: spreading constraints lose a domain (upstream NodeDelete).
        self.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.NODE, ActionType.DELETE, "NodeDelete"),
                                                 old=raw)
        self.cache.remove_node((raw.get("metadata") or {}).get("name", ""))

    def on_pod_add(self, raw: dict) -> None:
        if self.pod_groups is not None:
            self.pod_groups.add_pod(raw)  # before the queue: PreEnqueue counts the group's pods
        if assigned(raw):
            if is_terminal(raw):
                return
            pod = PodInfo(raw)
            self.cache.add_pod(pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), new=raw)
            return
        pod = PodInfo(raw)
        if self.responsible_for(pod) and not is_terminal(raw):
            self.queue.add(pod)
        if pod.pod_group and self.pod_groups is not None:
            # A new member may complete its gang (upstream sends UnscheduledPodAdd for every
            # pod with the gate on; only GangScheduling's hint reads it, and it skips pods of
            # no group, so those need no scan of the unschedulable pods).
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD, "UnscheduledPodAdd"), new=raw)

    def on_pod_update(self, old_raw: dict, new_raw: dict) -> None:
        if self.pod_groups is not None:
            self.pod_groups.update_pod(new_raw)
        if assigned(new_raw):
            self._on_assigned_pod_update(old_raw, new_raw)
            return
        if ((new_raw.get("spec") or {}).get("schedulerName") or "default-scheduler") not in self.frameworks:
            return
        if self.cache.is_assumed((new_raw.get("metadata") or {}).get("uid", "")):
            return  # binding (or waiting on Permit): the binding cycle decides its fate
        new_pod = PodInfo(new_raw)
        if is_terminal(new_raw):
            self.queue.delete(new_pod)
            return
        old_pod = PodInfo(old_raw)
        self.queue.update(old_pod, new_pod)
        if old_pod.nominated_node_name and old_pod.nominated_node_name != new_pod.nominated_node_name:
            # Lower or equal priority pods counted it as if it ran on its nominated node.
            self._nominated_pod_left(old_pod, old_raw)

    def _on_assigned_pod_update(self, old_raw: dict, new_raw: dict) -> None:
        # Hot path: every bind comes back here, so the old object is parsed only when needed.
        was_assigned = assigned(old_raw)
        if was_assigned and not is_terminal(new_raw) and old_raw.get("spec") == new_raw.get("spec") and \
                (old_raw.get("metadata") or {}).get("labels") == (new_raw.get("metadata") or {}).get("labels") \
                and resize_state(old_raw) == resize_state(new_raw):
            return  # a status-only change that leaves the pod's usage as it was: nothing the scheduler reads
        new_pod = PodInfo(new_raw)
        if not was_assigned:
            # Bound: leaves the queue, enters (or confirms in) the cache.
            self.queue.delete(new_pod)
        if is_terminal(new_raw):
            self.cache.remove_pod(new_pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old=new_raw)
            return
        self.cache.update_pod(new_pod)
        if not was_assigned:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), new=new_raw)
            return
        action = ActionType(0)
        if (old_raw.get("metadata") or {}).get("labels") != (new_raw.get("metadata") or {}).get("labels"):
            action |= ActionType.UPDATE_POD_LABEL
        if PodInfo(old_raw).requests != new_pod.requests:
            action |= ActionType.UPDATE_POD_SCALE_DOWN
        if action:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, action, "AssignedPodUpdate"), old=old_raw, new=new_raw)

    def on_pod_delete(self, raw: dict) -> None:
        if self.pod_groups is not None:
            self.pod_groups.remove_pod(raw)
        pod = PodInfo(raw)
        if assigned(raw):
            self.queue.delete(pod)
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old=raw)
            return
        if self.responsible_for(pod):
            self.queue.delete(pod)
            # A waiting pod rejected here was assumed: its room is free again. So is the room of
            # one whose binding the watch never showed (a relist found it deleted, and its last
            # known state is the unscheduled one): upstream's cache handler takes such a
            # DeletedFinalStateUnknown too and removes the assumed pod.
            freed = self.frameworks[pod.scheduler_name].reject_waiting_pod(pod.uid)
            if not freed and self.cache.is_assumed(pod.uid):
                self.cache.remove_pod(pod)
                freed = True
            if freed:
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old=raw)
            if pod.nominated_node_name:
                self._nominated_pod_left(pod, raw)

    def _nominated_pod_left(self, pod: PodInfo, raw: dict) -> None:
        """A nominated pod was deleted or lost its nomination: the room it held on its node is
        free for the lower or equal priority pods that saw it there (getLEPriorityPreCheck)."""
        priority = pod.priority
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
            pre_check=lambda other: other.priority <= priority, old=raw)

    def current_pod(self, pod: PodInfo) -> dict | None:
        """The pod as the informer last saw it (None once deleted); the pod itself when the
        pods are not listed (a replay that calls the handlers directly)."""
        pods = self.informers.informer("pods")
        return pods.store.get(pod.key) if pods.synced.is_set() else pod.raw

    # -- the informers (upstream New's informer requests and addAllEventHandlers) ---------------

    def plugin_informers(self, plugin_events: dict[str, list[ClusterEvent]]) -> set[str]:
        """The resources the enabled plugins read (their INFORMERS) or registered events for."""
        resources = {resource for fwk in self.frameworks.values() for plugin in fwk.plugins.values()
                     for resource in getattr(plugin, "INFORMERS", ())}
        watched_as = {spec.event: name for name, spec in RESOURCES.items()
                      if spec.event is not None and not spec.as_update}
        for events in plugin_events.values():
            for event in events:
                # Pod and node events come from the pod and node handlers; every other
                # EventResource has its informer in RESOURCES (a unit test holds them together).
                if event.resource not in (EventResource.NODE, EventResource.POD, EventResource.ASSIGNED_POD,
                                          EventResource.UNSCHEDULED_POD, EventResource.WILDCARD):
                    resources.add(watched_as[event.resource])
        return resources

    def add_all_event_handlers(self, plugin_events: dict[str, list[ClusterEvent]]) -> None:
        """Pods and nodes to the cache and the queue; every other requested resource that a
        plugin registered events for to the queue, as those events (upstream addAllEventHandlers
        and buildEvtResHandler)."""
        self.informers.add_event_handler("pods", self.on_pod_add, self.on_pod_update, self.on_pod_delete)
        self.informers.add_event_handler("nodes", self.on_node_add, self.on_node_update, self.on_node_delete)
        registered: dict[EventResource, ActionType] = {}
        for events in plugin_events.values():
            for event in events:
                registered[event.resource] = registered.get(event.resource, ActionType(0)) | event.action
        anything = registered.get(EventResource.WILDCARD, ActionType(0))
        for name in self.informers.requested:
            spec = RESOURCES[name]
            if spec.event is None or spec.event in (EventResource.NODE, EventResource.POD):
                continue
            actions = registered.get(spec.event, ActionType(0)) | anything
            if actions:
                self.informers.add_event_handler(name, *self._requeue_on(spec, actions))

    def _requeue_on(self, spec: Resource, actions: ActionType) -> Handlers:
        """Handlers that requeue the pods a change of the resource may help: those whose
        rejecting plugins registered the event and whose QueueingHints agree."""
        kind = spec.event
        assert kind is not None
        short = kind.value.rpartition("/")[2]
        if spec.as_update:
            if not actions & ActionType.UPDATE:
                return None, None, None
            changed = ClusterEvent(kind, ActionType.UPDATE, f"{short}Update")

            def on_change(*_objects: dict) -> None:
                self.queue.move_all_to_active_or_backoff(changed)
            return on_change, on_change, on_change
        pre_check = PRE_CHECKS.get(kind)
        added = ClusterEvent(kind, ActionType.ADD, f"{short}Add")
        updated = ClusterEvent(kind, ActionType.UPDATE, f"{short}Update")
        deleted = ClusterEvent(kind, ActionType.DELETE, f"{short}Delete")

        def on_add(obj: dict) -> None:
            self.queue.move_all_to_active_or_backoff(added, pre_check=pre_check(None, obj) if pre_check else None,
                                                     new=obj)

        def on_update(old: dict, new: dict) -> None:
            self.queue.move_all_to_active_or_backoff(updated, pre_check=pre_check(old, new) if pre_check else None,
                                                     old=old, new=new)

        def on_delete(obj: dict) -> None:
            self.queue.move_all_to_active_or_backoff(deleted, pre_check=pre_check(obj, None) if pre_check else None,
                                                     old=obj)
        return (on_add if actions & ActionType.ADD else None, on_update if actions & ActionType.UPDATE else None,
                on_delete if actions & ActionType.DELETE else None)

    def start_informers(self, stop: threading.Event) -> None:
        self.informers.start(stop)

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        return self.informers.wait_for_cache_sync(timeout)

    def caches_synced(self) -> bool:
        return self.informers.synced()

    def catch_up(self, client: ApiClient, stop: threading.Event, timeout: float) -> None:
        """Before a new leader's first cycle: wait until the caches hold what the API server
        had when the Lease was taken, at most timeout. kube-scheduler schedules at once from
        what its standby informers hold; the soak saw a takeover so overcommit a node whose
        last bindings the new leader's watch had not delivered yet."""
        start = time.monotonic()
        behind = self.informers.catch_up(client, stop, timeout)
        if stop.is_set():
            return  # shutting down: no cycle follows
        if behind:
            klog.warning("Caches still behind the API server; scheduling from them", resources=",".join(behind),
                         waited=f"{time.monotonic() - start:.3f}s")
        else:
            klog.info("Caches caught up with the API server", waited=f"{time.monotonic() - start:.3f}s")
