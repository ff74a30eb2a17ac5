"""What the informers' events do to the scheduler's cache and queue (upstream eventhandlers.go).

A bound pod goes to the cache; a pending pod this scheduler serves goes to the queue; a
change a scheduling decision reads (a node's taints, labels, allocatable, conditions; a
bound pod that leaves or shrinks) moves the unschedulable pods that care back to the queue.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from kubesched.backend.cache import SchedulerCache
from kubesched.backend.informer import Informer
from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.trim import resize_state, trim_metadata, trim_node, trim_pod
from kubesched.backend.volumes import VolumeObjects
from kubesched.client import ApiClient
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource, Status
from kubesched.framework.types import PodInfo

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework

# Objects plugins read beside nodes and pods (namespace selectors of InterPodAffinity, the
# default spreading constraints of PodTopologySpread), each kept by its own informer.
OBJECT_PATHS = {
    "namespaces": "/api/v1/namespaces",
    "services": "/api/v1/services",
    "replicationcontrollers": "/api/v1/replicationcontrollers",
    "replicasets": "/apis/apps/v1/replicasets",
    "statefulsets": "/apis/apps/v1/statefulsets",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
}
TERMINAL_PHASES = ("Succeeded", "Failed")
# Storage objects (backend/volumes.py) as the cluster events the volume plugins register.
STORAGE_EVENT_RESOURCES = {
    "persistentvolumes": EventResource.PERSISTENT_VOLUME,
    "persistentvolumeclaims": EventResource.PERSISTENT_VOLUME_CLAIM,
    "storageclasses": EventResource.STORAGE_CLASS,
    "csinodes": EventResource.CSI_NODE,
    "csidrivers": EventResource.CSI_DRIVER,
    "csistoragecapacities": EventResource.CSI_STORAGE_CAPACITY,
    "volumeattachments": EventResource.VOLUME_ATTACHMENT,
}


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


def is_terminal(raw: dict) -> bool:
    return (raw.get("status") or {}).get("phase") in TERMINAL_PHASES


def assigned(raw: dict) -> bool:
    return bool((raw.get("spec") or {}).get("nodeName"))


class EventHandlers:
    """The Scheduler's informer side; scheduler.py assembles the attributes used here."""

    client: ApiClient | None
    cache: SchedulerCache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    object_informers: dict[str, Informer]
    node_informer: Informer | None
    pod_informer: Informer | None
    volumes: VolumeObjects
    volume_resources: set[str]
    extenders: list

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

    def on_storage_event(self, resource: str, old: dict | None, new: dict | None) -> None:
        """A PersistentVolume, claim, StorageClass or CSI object changed: requeue the pods
        whose rejecting plugins registered the event (and whose QueueingHint agrees)."""
        action = ActionType.ADD if old is None else ActionType.DELETE if new is None else ActionType.UPDATE
        event_resource = STORAGE_EVENT_RESOURCES[resource]
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(event_resource, action, f"{event_resource.value.rpartition('/')[2]}{action.name.title()}"),
            old=old, new=new)

    def on_pod_add(self, raw: dict) -> None:
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

    def on_pod_update(self, old_raw: dict, new_raw: dict) -> None:
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
        pod = PodInfo(raw)
        if assigned(raw):
            self.queue.delete(pod)
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old=raw)
            return
        if self.responsible_for(pod):
            self.queue.delete(pod)
            # A waiting pod rejected here was assumed: its room is free again.
            if self.frameworks[pod.scheduler_name].reject_waiting_pod(pod.uid):
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

    def _pdbs(self) -> list[dict]:
        return self.list_objects("poddisruptionbudgets")

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict]:
        informer = self.object_informers.get(resource)
        if informer is not None and informer.synced.is_set():
            items = informer.list()
        elif self.client is not None:
            # Not watching (explain, tests): read the API directly.
            items = self.client.list(OBJECT_PATHS[resource]).get("items") or []
        else:
            return []
        if namespace is None:
            return items
        return [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]

    def current_pod(self, pod: PodInfo) -> dict | None:
        """The pod as the informer last saw it (None once deleted); the pod itself when not watching."""
        return self.pod_informer.get(pod.key) if self.pod_informer is not None else pod.raw

    def start_informers(self, stop: threading.Event) -> None:
        if self.client is None:
            raise RuntimeError("start_informers needs an API client")
        # Extenders are sent whole pods and nodes, as kube-scheduler sends them.
        pod_transform, node_transform = (trim_metadata, trim_metadata) if self.extenders else (trim_pod, trim_node)
        self.node_informer = Informer(self.client, "/api/v1/nodes", name="nodes", on_add=self.on_node_add,
                                      on_update=self.on_node_update, on_delete=self.on_node_delete,
                                      page_size=500, transform=node_transform).start(stop)
        self.pod_informer = Informer(self.client, "/api/v1/pods", name="pods", on_add=self.on_pod_add,
                                     on_update=self.on_pod_update, on_delete=self.on_pod_delete,
                                     page_size=500, transform=pod_transform).start(stop)
        for resource, path in OBJECT_PATHS.items():
            self.object_informers[resource] = Informer(
                self.client, path, name=resource, on_add=_ignore, on_update=_ignore_update,
                on_delete=_ignore, page_size=500).start(stop)
        self.volumes.start(self.client, self.volume_resources, stop)
        # Plugins that watch more (DynamicResources: claims, slices, classes) start their own
        # informers, so they run only when a profile enables such a plugin.
        for fwk in self.frameworks.values():
            for plugin in fwk.plugins.values():
                if hasattr(plugin, "start_informers"):
                    self.object_informers.update(plugin.start_informers(self.client, stop, self.on_plugin_object_event))

    def on_plugin_object_event(self, resource: str, action: str, old: dict | None, new: dict | None,
                               pre_check: Callable[[PodInfo], bool] | None = None) -> None:
        """A plugin's informer saw a change (a ResourceClaim update...): requeue the pods it may help
        (pre_check, upstream's PreQueueingHint, narrows them to the pods the object concerns)."""
        kind = {"resourceclaims": EventResource.RESOURCE_CLAIM, "resourceslices": EventResource.RESOURCE_SLICE,
                "deviceclasses": EventResource.DEVICE_CLASS}.get(resource, EventResource.WILDCARD)
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(kind, {"Add": ActionType.ADD, "Delete": ActionType.DELETE}.get(action, ActionType.UPDATE),
                         f"{kind.value}{action}"), pre_check=pre_check, old=old, new=new)

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in (self.node_informer, self.pod_informer, *self.object_informers.values()):
            if informer is None:
                return False
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(remaining):
                return False
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.volumes.wait_synced(remaining)

    def caches_synced(self) -> bool:
        informers = (self.node_informer, self.pod_informer, *self.object_informers.values())
        return len(self.object_informers) >= len(OBJECT_PATHS) and all(
            i is not None and i.synced.is_set() for i in informers) and self.volumes.synced()


def _ignore(_obj: dict) -> None:
    pass


def _ignore_update(_old: dict, _new: dict) -> None:
    pass
