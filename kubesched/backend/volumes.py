"""The storage objects the volume plugins read: PersistentVolumes, claims, StorageClasses,
CSINodes, CSIDrivers, CSIStorageCapacities and VolumeAttachments, from the informers'
stores (backend/informers.py; each is watched only when an enabled plugin declares it).

PersistentVolumes and claims also carry upstream's assume cache
(volumebinding/passive_assume_cache.go): VolumeBinding's Reserve records the binding it
will write as an assumed version of the object, which readers see until the informer
brings a newer resourceVersion (the write landed, or someone else changed the object) or
Unreserve restores it.
"""

from __future__ import annotations

import threading

from kubesched.backend.informer import object_key
from kubesched.backend.informers import InformerRegistry

STORAGE_RESOURCES = ("persistentvolumes", "persistentvolumeclaims", "storageclasses", "csinodes", "csidrivers",
                     "csistoragecapacities", "volumeattachments")
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


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
    """The storage objects, shared by every profile's volume plugins, with the PV/PVC
    assume cache and the PersistentVolumes indexed by storage class."""

    def __init__(self, informers: InformerRegistry) -> None:
        self.stores = {resource: informers.store(resource) for resource in STORAGE_RESOURCES}
        self._assumed: dict[str, dict[str, dict]] = {"persistentvolumes": {}, "persistentvolumeclaims": {}}
        self._lock = threading.RLock()
        # PersistentVolumes by storage class (upstream's storageclass index), kept on events.
        self._pvs_by_class: dict[str, dict[str, dict]] = {}
        # Counts the changes of every store, so that a reader can tell that nothing changed.
        self.generation = 0
        for resource in STORAGE_RESOURCES:
            informers.add_event_handler(
                resource, on_add=lambda obj, r=resource: self._changed(r, None, obj),
                on_update=lambda old, new, r=resource: self._changed(r, old, new),
                on_delete=lambda obj, r=resource: self._changed(r, obj, None))

    def _changed(self, resource: str, old: dict | None, new: dict | None) -> None:
        """An informer event (old None: added; new None: deleted), after its store took it."""
        key = object_key(new if new is not None else old)
        with self._lock:
            self.generation += 1
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
