"""Every informer the scheduler runs, one per resource (upstream's SharedInformerFactory).

RESOURCES is the one table of what kubesched can watch: each resource's API path, the
cluster event its changes are to the scheduling queue (None: read, never a reason to requeue)
and whether the API server may not serve it. The scheduler requests nodes, pods and what
the enabled plugins declare (a plugin's INFORMERS and the resources of the events it
registers); only requested informers are started or loaded. Whatever keeps state beside a
store subscribes to its events with add_event_handler, in the order of the calls: the
PV/PVC assume cache (backend/volumes.py) and the DRA manager (dra/manager.py) when the
scheduler builds them, then eventhandlers.py's handlers (the cache, and the one dispatcher
to the queue's QueueingHints), so a requeued pod reads state that already saw the event.

start() lists and watches (in the watch process with kubesched/apiproc.py's client); load()
lists every requested resource once and stops there, for a run that reads the cluster
without scheduling it (`kubesched explain`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import urllib3

from kubesched import klog
from kubesched.backend.informer import Informer, list_into, owed_version
from kubesched.backend.trim import Transform, trim_metadata
from kubesched.client import ApiClient, ApiError
from kubesched.framework.interface import EventResource

PAGE_SIZE = 500


@dataclass(frozen=True)
class Resource:
    path: str
    # What a change of it is to the queue (upstream's EventResource of a registered event).
    event: EventResource | None = None
    # Served only with an API group or feature gate the cluster may have off: then the
    # resource is skipped with an error, instead of keeping the scheduler from syncing.
    optional: bool = False
    # Every change is an update of `event`'s resource (and carries no object a hint could read).
    as_update: bool = False


RESOURCES: dict[str, Resource] = {
    "nodes": Resource("/api/v1/nodes", EventResource.NODE),
    "pods": Resource("/api/v1/pods", EventResource.POD),
    # What InterPodAffinity (namespace selectors), PodTopologySpread (the default constraints'
    # selectors) and DefaultPreemption (disruption budgets) read.
    "namespaces": Resource("/api/v1/namespaces"),
    "services": Resource("/api/v1/services"),
    "replicationcontrollers": Resource("/api/v1/replicationcontrollers"),
    "replicasets": Resource("/apis/apps/v1/replicasets"),
    "statefulsets": Resource("/apis/apps/v1/statefulsets"),
    "poddisruptionbudgets": Resource("/apis/policy/v1/poddisruptionbudgets"),
    # Storage, for the volume plugins (backend/volumes.py).
    "persistentvolumes": Resource("/api/v1/persistentvolumes", EventResource.PERSISTENT_VOLUME),
    "persistentvolumeclaims": Resource("/api/v1/persistentvolumeclaims", EventResource.PERSISTENT_VOLUME_CLAIM),
    "storageclasses": Resource("/apis/storage.k8s.io/v1/storageclasses", EventResource.STORAGE_CLASS),
    "csinodes": Resource("/apis/storage.k8s.io/v1/csinodes", EventResource.CSI_NODE),
    "csidrivers": Resource("/apis/storage.k8s.io/v1/csidrivers", EventResource.CSI_DRIVER),
    "csistoragecapacities": Resource("/apis/storage.k8s.io/v1/csistoragecapacities",
                                     EventResource.CSI_STORAGE_CAPACITY),
    "volumeattachments": Resource("/apis/storage.k8s.io/v1/volumeattachments", EventResource.VOLUME_ATTACHMENT),
    # Dynamic Resource Allocation (dra/manager.py), off on a cluster without resource.k8s.io/v1.
    "resourceclaims": Resource("/apis/resource.k8s.io/v1/resourceclaims", EventResource.RESOURCE_CLAIM,
                               optional=True),
    "resourceslices": Resource("/apis/resource.k8s.io/v1/resourceslices", EventResource.RESOURCE_SLICE,
                               optional=True),
    "deviceclasses": Resource("/apis/resource.k8s.io/v1/deviceclasses", EventResource.DEVICE_CLASS,
                              optional=True),
    # A rule adds taints to slices' devices: to the queue a slice changed (upstream's
    # resourceslicetracker); the DRADeviceTaintRules gate may keep it unserved.
    "devicetaintrules": Resource("/apis/resource.k8s.io/v1/devicetaintrules", EventResource.RESOURCE_SLICE,
                                 optional=True, as_update=True),
    # Gang scheduling (GenericWorkload, beta and off by default in v1.37): served only with the
    # gate and scheduling.k8s.io/v1beta1 on in the API server.
    "podgroups": Resource("/apis/scheduling.k8s.io/v1beta1/podgroups", EventResource.POD_GROUP, optional=True),
}

OnAdd = Callable[[dict], None]
OnUpdate = Callable[[dict, dict], None]
OnDelete = Callable[[dict], None]


class InformerRegistry:
    """One informer per resource, made on first use, started or loaded when requested."""

    def __init__(self, client: ApiClient | None = None):
        self.client = client
        self.informers: dict[str, Informer] = {}
        self.requested: list[str] = []
        self.unserved: set[str] = set()
        self._handlers: dict[str, list[tuple[OnAdd | None, OnUpdate | None, OnDelete | None]]] = {}

    # -- informers and their stores ----------------------------------------------------------

    def informer(self, resource: str) -> Informer:
        """The resource's informer (not started: see request)."""
        informer = self.informers.get(resource)
        if informer is None:
            spec = RESOURCES.get(resource)
            if spec is None:
                raise KeyError(f"no informer for {resource!r}; known: {', '.join(RESOURCES)}")
            informer = self.informers[resource] = Informer(
                self.client, spec.path, name=resource, page_size=PAGE_SIZE, on_add=_ignore,
                on_update=_ignore_update, on_delete=_ignore)
            self._connect(resource)
        return informer

    def request(self, resource: str, transform: Transform = trim_metadata) -> Informer:
        """Ask for the resource to be listed and watched (by start) or listed (by load)."""
        informer = self.informer(resource)
        informer.transform = transform
        if resource not in self.requested:
            self.requested.append(resource)
        return informer

    def store(self, resource: str) -> dict[str, dict]:
        """key -> object as the informer holds it; empty while the resource is not requested."""
        return self.informer(resource).store

    def get(self, resource: str, key: str) -> dict | None:
        return self.informer(resource).store.get(key)

    def list(self, resource: str, namespace: str | None = None) -> list[dict]:
        items = list(self.informer(resource).store.values())  # one C-level copy: the watch thread writes
        if namespace is None:
            return items
        return [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]

    # -- events ------------------------------------------------------------------------------

    def add_event_handler(self, resource: str, on_add: OnAdd | None = None, on_update: OnUpdate | None = None,
                          on_delete: OnDelete | None = None) -> None:
        """Call these on every add, update and delete of the resource, after the store took it."""
        self._handlers.setdefault(resource, []).append((on_add, on_update, on_delete))
        self.informer(resource)
        self._connect(resource)

    def _connect(self, resource: str) -> None:
        """Point the informer's callbacks at the handlers: a lone handler directly (pods and
        nodes are the hot path), several one after another."""
        informer = self.informers[resource]
        handlers = self._handlers.get(resource, ())
        adds = [h[0] for h in handlers if h[0] is not None]
        updates = [h[1] for h in handlers if h[1] is not None]
        deletes = [h[2] for h in handlers if h[2] is not None]
        informer.on_add = _fan_out(adds) if adds else _ignore
        informer.on_update = _fan_out(updates) if updates else _ignore_update
        informer.on_delete = _fan_out(deletes) if deletes else _ignore

    def put(self, resource: str, obj: dict) -> None:
        """The object as a watch would bring it: stored, and the handlers called (for replays
        of a cluster without an API server: tests, the benchmark's loop-only mode)."""
        self.informer(resource).apply_event("ADDED", obj, "")

    def remove(self, resource: str, obj: dict) -> None:
        self.informer(resource).apply_event("DELETED", obj, "")

    # -- running -----------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """List and watch every requested resource until stop is set."""
        if self.client is None:
            raise RuntimeError("informers need an API client to start")
        for resource in self.requested:
            if self._served(resource):
                self.informers[resource].start(stop)

    def load(self) -> None:
        """List every requested resource once, without watching: nodes and pods last, so the
        pods meet the nodes, claims and volumes they refer to (`kubesched explain`)."""
        if self.client is None:
            raise RuntimeError("informers need an API client to load")
        for resource in sorted(self.requested, key=lambda r: (r == "pods", r == "nodes", r)):
            if self._served(resource):
                informer = self.informers[resource]
                list_into(self.client, informer.path, PAGE_SIZE, informer.transform, informer.apply_list_page)

    def _served(self, resource: str) -> bool:
        if not RESOURCES[resource].optional:
            return True
        try:
            self.client.get(RESOURCES[resource].path, params={"limit": 1})
        except ApiError as err:
            if err.status == 404:
                klog.error("Resource not served by the API server; the plugins that read it go without it",
                           resource=resource)
                self.unserved.add(resource)
                return False
        except Exception:  # noqa: BLE001 - unreachable now: the informer retries and says so
            pass
        return True

    def _waited(self) -> list[Informer]:
        return [self.informers[r] for r in self.requested if r not in self.unserved]

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self._waited())

    def catch_up(self, client: ApiClient, stop: threading.Event, timeout: float) -> list[str]:
        """Wait until every informer has applied what the server had made of its resource when
        called; the resources still behind after timeout (or stop).

        For a new leader: a standby's watches can trail the server by seconds on a loaded
        machine, and a cache without the last bindings overcommits nodes (owed_version says
        what each informer must reach; client asks, so it must not be the informers' own).
        """
        deadline = time.monotonic() + timeout
        informers = self._waited()

        def owed(informer: Informer) -> str | None:
            try:
                return owed_version(client, informer.path, informer.resource_version, deadline)
            except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                klog.warning("Cannot tell what the cache still lacks; going on", resource=informer.name,
                             err=str(err)[:300])
                return None

        with ThreadPoolExecutor(max_workers=max(1, len(informers)), thread_name_prefix="catch-up") as pool:
            targets = list(pool.map(owed, informers))
        for informer, target in zip(informers, targets):
            if target is not None:
                # The server answered the probe: a reflector in backoff after an outage need not
                # wait out its delay (up to 30 s) before it fetches what it owes.
                informer.retry_now()
        behind = []
        for informer, target in zip(informers, targets):
            while target is not None and not informer.holds(target):
                if time.monotonic() >= deadline or stop.wait(0.01):
                    behind.append(informer.name)
                    break
        return behind

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self._waited():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(remaining):
                return False
        return True


def _fan_out(handlers: list[Callable]) -> Callable:
    if len(handlers) == 1:
        return handlers[0]
    handlers = list(handlers)

    def each(*objects: dict) -> None:
        for handler in handlers:
            handler(*objects)
    return each


def _ignore(_obj: dict) -> None:
    pass


def _ignore_update(_old: dict, _new: dict) -> None:
    pass
