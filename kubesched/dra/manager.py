"""What DynamicResources reads beside the snapshot (upstream's DRAManager and assume cache).

The scheduler builds one manager (scheduler.py) and plugins reach it through their Handle.
It reads ResourceSlices, DeviceClasses and DeviceTaintRules from the informers' stores and
keeps its own copy of the ResourceClaims (as upstream's claim assume cache does), fed by the
informers' events; those informers run only when a profile enables DynamicResources. Two
overlays on the claims:
- in-flight allocations: set in Reserve, cleared once PreBind wrote them (or Unreserve), so
  the next pod's allocator never hands out the same device;
- assumed claims: the object PreBind got back from the API, kept until the informer has
  seen that version, so a stale informer never shows a just-allocated claim as free.

The devices that allocated claims hold are counted as claims change (upstream's allocated
devices tracker), not gathered from every claim in each PreFilter: with thousands of claims
that gathering cost more than the allocation itself. Claims change only through the claim
events, assume and restore, which keep the counts.
"""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any, Callable, Protocol

from kubesched.dra.cel import SelectorCache
from kubesched.framework.quantity import QuantityError, parse_quantity

API = "/apis/resource.k8s.io/v1"  # where PreBind writes claims

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def _wins(meta: dict, current: dict) -> bool:
    """Two classes claim one extended resource name: the newer one wins, then the smaller name."""
    created, current_created = meta.get("creationTimestamp") or "", current.get("creationTimestamp") or ""
    if created != current_created:
        return created > current_created
    return meta.get("name", "") < current.get("name", "")


def claim_key(claim: dict) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _rv(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def allocated_device_ids(claim: dict) -> list[tuple[str, str, str]]:
    """Devices a claim's allocation holds exclusively (admin access does not hold them, and
    a result with a shareID holds only part of a device that allows multiple allocations)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            for r in (allocation.get("devices") or {}).get("results") or ()
            if not r.get("adminAccess") and not r.get("shareID")]


def _allocated(claim: dict | None) -> bool:
    return bool(((claim or {}).get("status") or {}).get("allocation"))


def pods_affected_by_claim(old: dict | None, new: dict | None) -> Callable[[Any], bool] | None:
    """Upstream's PreQueueingHint for a ResourceClaim event: None (every pod) when the event
    frees devices (a deallocation, or an allocated claim deleted), else a test that passes only
    the pods referring to this claim (by name, or through pod.status.resourceClaimStatuses), so
    that each of many claims the resourceclaim controller makes wakes only its own pod."""
    if (old is not None and new is not None and _allocated(old) and not _allocated(new)) or \
            (new is None and _allocated(old)):
        return None
    meta = ((new or old) or {}).get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")

    def refers_to_claim(pod: Any) -> bool:
        if pod.namespace != namespace:
            return False
        raw = pod.raw
        if any(pc.get("resourceClaimName") == name for pc in (raw.get("spec") or {}).get("resourceClaims") or ()):
            return True
        return any(s.get("resourceClaimName") == name
                   for s in (raw.get("status") or {}).get("resourceClaimStatuses") or ())
    return refers_to_claim


def add_shared_devices(claim: dict, shared: dict[tuple, dict[str, Fraction]]) -> None:
    """The shares of a claim's allocation (results with a shareID), summed per device into
    ``shared`` (upstream's AllocatedSharedDeviceIDs and AggregatedCapacity)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for r in (allocation.get("devices") or {}).get("results") or ():
        if r.get("adminAccess") or not r.get("shareID"):
            continue
        consumed = shared.setdefault((r.get("driver", ""), r.get("pool", ""), r.get("device", "")), {})
        for name, value in (r.get("consumedCapacity") or {}).items():
            try:
                consumed[name] = consumed.get(name, Fraction(0)) + parse_quantity(str(value))
            except QuantityError:
                continue  # the API server validated it; nothing sensible to count otherwise


class Informers(Protocol):
    """What the manager needs of the scheduler's informer registry (backend/informers.py)."""

    def store(self, resource: str) -> dict[str, dict]:
        ...

    def add_event_handler(self, resource: str, on_add: Callable[[dict], None] | None = None,
                          on_update: Callable[[dict, dict], None] | None = None,
                          on_delete: Callable[[dict], None] | None = None) -> None:
        ...


class DRAManager:
    def __init__(self, informers: Informers) -> None:
        self.lock = threading.Lock()
        self.claims: dict[str, dict] = {}
        # The informers' own stores, written by their thread: read them whole with one copy
        # (list(), dict()) rather than iterating while an event may land.
        self.slices = informers.store("resourceslices")
        self.classes = informers.store("deviceclasses")
        self.taint_rules = informers.store("devicetaintrules")
        self.assumed: dict[str, dict] = {}
        self.in_flight: dict[str, dict] = {}  # claim uid -> claim with its pending allocation
        # The devices held by allocated claims (assumed ones in place of the informer's), counted
        # per device since two claims may name one; the shares of devices that allow multiple
        # allocations, and the capacity those shares consume together.
        self._held_by: dict[str, tuple[list[tuple[str, str, str]], dict[tuple, dict[str, Fraction]]]] = {}
        self._held: dict[tuple[str, str, str], int] = {}
        self._shares: dict[tuple, int] = {}
        self._shared: dict[tuple, dict[str, Fraction]] = {}
        self.cel = SelectorCache()
        self._slices_list: list[dict] | None = None
        # Each node's pools as the allocator gathered them from _slices_list, dropped with it.
        self._pools: dict[str, tuple[dict, list]] = {}
        self._extended: dict[str, dict] | None = None
        self._classes_changes = 0  # so that a table built from classes that changed meanwhile is not kept
        informers.add_event_handler("resourceclaims", on_add=self._claim_added, on_update=self._claim_updated,
                                    on_delete=self._claim_deleted)
        for resource in ("resourceslices", "devicetaintrules"):
            informers.add_event_handler(resource, on_add=self._slices_changed, on_update=self._slices_updated,
                                        on_delete=self._slices_changed)
        informers.add_event_handler("deviceclasses", on_add=self._classes_changed, on_update=self._classes_updated,
                                    on_delete=self._classes_changed)

    # --- informer events (after the informer's store took them) -----------------------------

    def _claim_added(self, claim: dict) -> None:
        with self.lock:
            self._put_claim(claim_key(claim), claim)

    def _claim_updated(self, _old: dict, claim: dict) -> None:
        self._claim_added(claim)

    def _claim_deleted(self, claim: dict) -> None:
        with self.lock:
            self._drop_claim(claim_key(claim))

    def _slices_changed(self, _obj: dict) -> None:
        with self.lock:
            self._slices_list = None

    def _slices_updated(self, _old: dict, _new: dict) -> None:
        self._slices_changed(_new)

    def _classes_changed(self, _obj: dict) -> None:
        with self.lock:
            self._extended = None
            self._classes_changes += 1

    def _classes_updated(self, _old: dict, new: dict) -> None:
        self._classes_changed(new)

    # --- claims and the devices they hold ----------------------------------------------------------

    def _put_claim(self, key: str, claim: dict) -> None:
        self.claims[key] = claim
        assumed = self.assumed.get(key)
        if assumed is not None and _rv(claim) >= _rv(assumed):
            del self.assumed[key]
        self._recount(key)

    def _drop_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        self.assumed.pop(key, None)
        self._recount(key)

    def _recount(self, key: str) -> None:
        """Take the claim's old holding out of the counts and its current one in."""
        old = self._held_by.pop(key, None)
        if old is not None:
            for device in old[0]:
                left = self._held[device] - 1
                if left:
                    self._held[device] = left
                else:
                    del self._held[device]
            for device, consumed in old[1].items():
                total = self._shared[device]
                for name, value in consumed.items():
                    total[name] -= value
                left = self._shares[device] - 1
                if left:
                    self._shares[device] = left
                else:
                    del self._shares[device], self._shared[device]
        claim = self.assumed.get(key) or self.claims.get(key)
        if not _allocated(claim):
            return
        devices = allocated_device_ids(claim)
        shared: dict[tuple, dict[str, Fraction]] = {}
        add_shared_devices(claim, shared)
        if not devices and not shared:
            return
        self._held_by[key] = (devices, shared)
        for device in devices:
            self._held[device] = self._held.get(device, 0) + 1
        for device, consumed in shared.items():
            self._shares[device] = self._shares.get(device, 0) + 1
            total = self._shared.setdefault(device, {})
            for name, value in consumed.items():
                total[name] = total.get(name, Fraction(0)) + value

    # --- reads --------------------------------------------------------------------------------

    def get_claim(self, namespace: str, name: str) -> dict | None:
        key = f"{namespace}/{name}"
        with self.lock:
            return self.assumed.get(key) or self.claims.get(key)

    def device_class(self, name: str) -> dict | None:
        return self.classes.get(name)

    def class_for_extended_resource(self, resource_name: str) -> dict | None:
        """The DeviceClass backing an extended resource (upstream's ExtendedResourceCache):
        spec.extendedResourceName (the newest class wins, then the smaller name) or the
        implicit deviceclass.resource.kubernetes.io/<class name>."""
        extended = self._extended
        if extended is None:
            with self.lock:
                classes = list(self.classes.values())
                seen = self._classes_changes
            extended = {}
            for cls in classes:
                meta = cls.get("metadata") or {}
                extended[f"{DEVICE_CLASS_PREFIX}{meta.get('name', '')}"] = cls
                resource = (cls.get("spec") or {}).get("extendedResourceName")
                if not resource:
                    continue
                current = extended.get(resource)
                if current is None or _wins(meta, current.get("metadata") or {}):
                    extended[resource] = cls
            with self.lock:
                if seen == self._classes_changes:
                    self._extended = extended
        return extended.get(resource_name)

    def list_slices(self) -> list[dict]:
        """The ResourceSlices with the taints of the DeviceTaintRules added to their devices
        (upstream's ListWithDeviceTaintRules)."""
        return self.slices_and_pools()[0]

    def slices_and_pools(self) -> tuple[list[dict], dict[str, tuple[dict, list]]]:
        """list_slices(), and the per-node pool cache that belongs to that very list: the
        allocator fills it, and a slice or taint rule change replaces both."""
        with self.lock:
            if self._slices_list is None:
                rules = list(self.taint_rules.values())
                self._slices_list = [with_taint_rules(s, rules) if rules else s for s in list(self.slices.values())]
                self._pools = {}
            return self._slices_list, self._pools

    def allocated_devices(self) -> set[tuple[str, str, str]]:
        """Every device held whole by an allocated claim or an allocation in flight."""
        return self.allocated_state()[0]

    def allocated_state(self) -> tuple[set[tuple[str, str, str]], dict[tuple, dict[str, Fraction]]]:
        """The devices held whole, and the shared ones with the capacity their shares consume
        (GatherAllocatedState), from allocated claims and allocations in flight."""
        with self.lock:
            devices = set(self._held)
            shared = {device: dict(consumed) for device, consumed in self._shared.items()}
            for claim in self.in_flight.values():
                devices.update(allocated_device_ids(claim))
                key = claim_key(claim)
                written = self.assumed.get(key) or self.claims.get(key)
                if not (_allocated(written) and (written.get("metadata") or {}).get("uid")
                        == (claim.get("metadata") or {}).get("uid")):
                    add_shared_devices(claim, shared)  # once PreBind wrote it, it counts above
        return devices, shared

    # --- the assume cache ----------------------------------------------------------------------

    def pending_allocation(self, uid: str) -> dict | None:
        with self.lock:
            return self.in_flight.get(uid)

    def signal_pending_allocation(self, uid: str, claim: dict) -> None:
        with self.lock:
            self.in_flight[uid] = claim

    def remove_pending_allocation(self, uid: str) -> bool:
        with self.lock:
            return self.in_flight.pop(uid, None) is not None

    def assume(self, claim: dict) -> None:
        key = claim_key(claim)
        with self.lock:
            current = self.claims.get(key)
            if current is None or _rv(claim) > _rv(current):
                self.assumed[key] = claim
                self._recount(key)

    def restore(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        with self.lock:
            if self.assumed.pop(key, None) is not None:
                self._recount(key)


def with_taint_rules(slice_: dict, rules: list[dict]) -> dict:
    """The slice, or a copy whose selected devices carry the rules' taints (applyPatches)."""
    spec = slice_.get("spec") or {}
    patched = slice_
    for rule in rules:
        selector = (rule.get("spec") or {}).get("deviceSelector")
        if selector is None:
            continue
        if selector.get("driver") is not None and selector["driver"] != spec.get("driver"):
            continue
        if selector.get("pool") is not None and selector["pool"] != (spec.get("pool") or {}).get("name"):
            continue
        for index, device in enumerate(spec.get("devices") or ()):
            if selector.get("device") is not None and selector["device"] != device.get("name"):
                continue
            if patched is slice_:
                patched = {**slice_, "spec": {**spec, "devices": [dict(d) for d in spec.get("devices") or ()]}}
            target = patched["spec"]["devices"][index]
            target["taints"] = list(target.get("taints") or ()) + [rule["spec"].get("taint") or {}]
    return patched
