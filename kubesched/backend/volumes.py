"""The storage objects the volume plugins read: PersistentVolumes, claims, StorageClasses,
CSINodes, CSIDrivers, CSIStorageCapacities and VolumeAttachments, each kept by an informer
that starts only when an enabled plugin needs it (``VOLUME_RESOURCES`` of the plugin class).

PersistentVolumes and claims also carry upstream's assume cache
(volumebinding/passive_assume_cache.go): VolumeBinding's Reserve records the binding it
will write as an assumed version of the object, which readers see until the informer
brings a newer resourceVersion (the write landed, or someone else changed the object) or
Unreserve restores it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from kubesched.backend.informer import Informer, object_key

PATHS = {
    "persistentvolumes": "/api/v1/persistentvolumes",
    "persistentvolumeclaims": "/api/v1/persistentvolumeclaims",
    "storageclasses": "/apis/storage.k8s.io/v1/storageclasses",
    "csinodes": "/apis/storage.k8s.io/v1/csinodes",
    "csidrivers": "/apis/storage.k8s.io/v1/csidrivers",
    "csistoragecapacities": "/apis/storage.k8s.io/v1/csistoragecapacities",
    "volumeattachments": "/apis/storage.k8s.io/v1/volumeattachments",
}
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"

# (resource, old or None, new or None): a storage object was added, updated or deleted.
EventHandler = Callable[[str, "dict | None", "dict | None"], None]


def _rv(obj: dict | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion", "")


def pv_storage_class(pv: dict) -> str:
    """GetPersistentVolumeClass: the beta annotation wins over spec.storageClassName."""
    annotations = (pv.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return (pv.get("spec") or {}).get("storageClassName") or ""


class OutOfSync(Exception):
    """Assume of an object whose cached version moved on (upstream: "is out of sync")."""


class VolumeObjects:
    """Caches of the storage API objects, shared by every profile's volume plugins."""

    def __init__(self) -> None:
        self.stores: dict[str, dict[str, dict]] = {resource: {} for resource in PATHS}
        self.informers: dict[str, Informer] = {}
        self._assumed: dict[str, dict[str, dict]] = {"persistentvolumes": {}, "persistentvolumeclaims": {}}
        self._lock = threading.RLock()
        # PersistentVolumes by storage class (upstream's storageclass index), kept on events.
        self._pvs_by_class: dict[str, dict[str, dict]] = {}
        self.handlers: list[EventHandler] = []
        # Counts the changes of every store, so that a reader can tell that nothing changed.
        self.generation = 0

    # -- feeding the caches ---------------------------------------------------------------

    def start(self, client: Any, resources: set[str], stop: threading.Event) -> None:
        """List and watch each resource (once); events reach ``handlers`` after the cache."""
        for resource in sorted(resources):
            if resource in self.informers:
                continue
            informer = Informer(
                client, PATHS[resource], name=resource, page_size=500,
                on_add=lambda obj, r=resource: self.apply(r, None, obj),
                on_update=lambda old, new, r=resource: self.apply(r, old, new),
                on_delete=lambda obj, r=resource: self.apply(r, obj, None))
            self.informers[resource] = informer
            informer.start(stop)

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def wait_synced(self, timeout: float | None) -> bool:
        return all(i.synced.wait(timeout) for i in self.informers.values())

    def apply(self, resource: str, old: dict | None, new: dict | None) -> None:
        """One informer event (old None: added; new None: deleted). Also the unit tests' feed."""
        obj = new if new is not None else old
        if obj is None:
            return
        key = object_key(obj)
        with self._lock:
            self.generation += 1
            store = self.stores[resource]
            if new is None:
                store.pop(key, None)
            else:
                store[key] = new
            if resource == "persistentvolumes":
                for by_class in self._pvs_by_class.values():
                    by_class.pop(key, None)
                if new is not None:
                    self._pvs_by_class.setdefault(pv_storage_class(new), {})[key] = new
            assumed = self._assumed.get(resource)
            if assumed is not None and key in assumed:
                # mayExpire: a newer API object (or its deletion) replaces the assumed one.
                if new is None or _rv(assumed[key]) != _rv(new):
                    del assumed[key]
        for handler in self.handlers:
            handler(resource, old, new)

    def add(self, resource: str, obj: dict) -> None:
        self.apply(resource, self.stores[resource].get(object_key(obj)), obj)

    # -- reading ----------------------------------------------------------------------------

    def get(self, resource: str, key: str) -> dict | None:
        """The informer's object (no assumed version)."""
        return self.stores[resource].get(key)

    def get_assumed(self, resource: str, key: str) -> dict | None:
        """The assumed version while it is based on the informer's object, else that object."""
        obj = self.stores[resource].get(key)
        if obj is None:
            return None
        assumed = self._assumed[resource].get(key)
        if assumed is not None and _rv(assumed) == _rv(obj):
            return assumed
        return obj

    def pvc(self, namespace: str, name: str) -> dict | None:
        return self.get_assumed("persistentvolumeclaims", f"{namespace}/{name}")

    def pv(self, name: str) -> dict | None:
        return self.get_assumed("persistentvolumes", name)

    def pvs_of_class(self, storage_class: str) -> list[dict]:
        """Upstream ListPVs(class): the class's PVs, assumed versions in place."""
        with self._lock:
            pvs = list((self._pvs_by_class.get(storage_class) or {}).values())
            assumed = self._assumed["persistentvolumes"]
            if not assumed:
                return pvs
            return [assumed[k] if (k := object_key(pv)) in assumed and _rv(assumed[k]) == _rv(pv) else pv
                    for pv in pvs]

    def storage_class(self, name: str) -> dict | None:
        return self.stores["storageclasses"].get(name)

    def csi_node(self, name: str) -> dict | None:
        return self.stores["csinodes"].get(name)

    def csi_driver(self, name: str) -> dict | None:
        return self.stores["csidrivers"].get(name)

    def storage_capacities(self) -> list[dict]:
        return list(self.stores["csistoragecapacities"].values())

    def volume_attachments(self) -> list[dict]:
        return list(self.stores["volumeattachments"].values())

    # -- the assume cache -------------------------------------------------------------------

    def assume(self, resource: str, obj: dict) -> None:
        """Record obj as the version to read until the API catches up; raises OutOfSync."""
        key = object_key(obj)
        with self._lock:
            stored = self.stores[resource].get(key)
            if stored is None:
                raise OutOfSync(f"{resource.removesuffix('s')} {key!r} not found")
            if _rv(stored) != _rv(obj):
                raise OutOfSync(f"{key!r} is out of sync (stored: {_rv(stored)}, assume: {_rv(obj)})")
            self._assumed[resource][key] = obj

    def restore(self, resource: str, obj: dict) -> None:
        """Drop the assumed version of obj (Unreserve), if it is still the one assumed."""
        key = object_key(obj)
        with self._lock:
            assumed = self._assumed[resource].get(key)
            if assumed is not None and _rv(assumed) == _rv(obj):
                del self._assumed[resource][key]

    def load(self, client: Any, resources: set[str]) -> None:
        """List each resource once, without watching (for `kubesched explain`)."""
        for resource in sorted(resources):
            for obj in client.list(PATHS[resource], page_size=500).get("items") or ():
                self.add(resource, obj)
