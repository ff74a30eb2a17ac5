"""The structured-parameters allocator (k8s.io/dynamic-resource-allocation/structured).

Given one node, the ResourceSlices, the DeviceClasses and the devices already allocated,
``Allocator.allocate(node, claims)`` finds devices for every request of every claim or
returns None. The search is upstream's: pools sorted by (driver, pool), slices by name,
devices in slice order; a depth-first walk over claims -> requests -> devices that backs
off one device at a time, so the first answer is the one kube-scheduler finds. It covers
what v1.37 turns on by default and kubesched supports: class and request CEL selectors,
ExactCount and All, firstAvailable, matchAttribute and distinctAttribute, class and claim
config, partitionable devices (sharedCounters / consumesCounters), admin access, device
taints with request tolerations, per-device node selection, incomplete and invalid pools,
consumable capacity (kubesched/dra/capacity.py: capacity requests, devices shared by several
claims with ``allowMultipleAllocations``, a shareID and consumedCapacity per result) and devices
with binding conditions (copied into the result for PreBind to wait on).
"""

from __future__ import annotations

import time
import uuid
from fractions import Fraction
from typing import Any, Callable

from kubesched.api.node_affinity import NodeSelector
from kubesched.dra.capacity import CapacityError, consumed_capacity, format_quantity, request_fits
from kubesched.dra.cel import CelError, SelectorCache, device_view
from kubesched.framework.quantity import QuantityError, parse_quantity

ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_MAX_SIZE = 8
TAINT_EFFECTS_PREVENTING_ALLOCATION = ("NoSchedule", "NoExecute")


class AllocationError(Exception):
    """The allocation cannot be attempted (an error, not "does not fit")."""


class FailedOnNode(AllocationError):
    """Fails on this node only (upstream's ErrFailedAllocationOnNode): unschedulable there."""


class AllocationTimeout(AllocationError):
    """The search on one node took longer than the plugin's filterTimeout."""


DeviceID = tuple  # (driver, pool, device)


def node_matches(node: Any, node_name: str, all_nodes: bool, node_selector: dict | None) -> bool:
    if node_name:
        return node is not None and node.name == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        selector = NodeSelector(node_selector)
        errors = selector.errors()
        if errors:
            raise AllocationError(f"failed to parse node selector: {'; '.join(errors)}")
        return selector.matches(node)
    return False


def tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"


def _quantity(value: Any) -> Fraction:
    try:
        return parse_quantity(str(value))
    except QuantityError as err:
        raise AllocationError(f"invalid counter value {value!r}: {err}") from None


class Pool:
    __slots__ = ("driver", "name", "slices", "slices_not_on_node", "incomplete", "invalid", "invalid_reason",
                 "counter_sets")

    def __init__(self, driver: str, name: str):
        self.driver, self.name = driver, name
        self.slices: list[dict] = []
        self.slices_not_on_node: list[dict] = []
        self.incomplete = False
        self.invalid = False
        self.invalid_reason = ""
        self.counter_sets: dict[str, dict[str, Fraction]] = {}

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def _has_binding_conditions(pool: Pool) -> bool:
    return any(d.get("bindingConditions") is not None for s in pool.slices for d in _spec(s).get("devices") or ())


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def _pool_key(slice_: dict) -> tuple[str, str]:
    spec = _spec(slice_)
    return spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")


def _generation(slice_: dict) -> int:
    return int((_spec(slice_).get("pool") or {}).get("generation") or 0)


def _slice_count(slice_: dict) -> int:
    return int((_spec(slice_).get("pool") or {}).get("resourceSliceCount") or 0)


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


class Request:
    """One request, or one subrequest of a firstAvailable list (upstream's requestAccessor)."""

    __slots__ = ("name", "parent", "class_name", "mode", "count", "admin_access", "selectors", "tolerations",
                 "class_", "num_devices", "all_devices", "capacity")

    def __init__(self, raw: dict, parent: str | None):
        self.name = raw.get("name", "")
        self.parent = parent
        self.class_name = raw.get("deviceClassName", "")
        self.mode = raw.get("allocationMode") or "ExactCount"
        self.count = int(raw.get("count") or 1)
        self.admin_access = bool(raw.get("adminAccess"))
        self.selectors = [s.get("cel", {}).get("expression", "") if s.get("cel") else None
                          for s in raw.get("selectors") or ()]
        self.tolerations = list(raw.get("tolerations") or ())
        self.capacity = raw.get("capacity")
        self.class_: dict | None = None
        self.num_devices = 0
        self.all_devices: list[tuple] = []

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


class Allocator:
    """Built once per scheduling cycle (PreFilter), used for every node (Filter)."""

    def __init__(self, allocated: set, classes: dict[str, dict], slices: list[dict],
                 cel_cache: SelectorCache, claim_key: Callable[[dict], str] = _name, timeout: float = 0.0,
                 shared: dict[tuple, dict[str, Fraction]] | None = None,
                 pool_cache: dict[str, tuple[dict, list[Pool]]] | None = None):
        self.timeout = timeout  # seconds per node, 0 for none (DynamicResources' filterTimeout)
        self.allocated = allocated
        # Devices with allowMultipleAllocations held by allocated claims: device -> the capacity
        # their shares consume together (upstream's AllocatedSharedDeviceIDs and
        # AggregatedCapacity; a device is in use when it is a key, even with nothing consumed).
        self.shared = shared or {}
        self.classes = classes
        self.cel = cel_cache
        self.all_slices = slices
        self.claim_key = claim_key
        self.slices_by_node: dict[str, list[dict]] = {}
        self.slices_shared: list[dict] = []
        for s in slices:
            node_name = _spec(s).get("nodeName")
            if node_name:
                self.slices_by_node.setdefault(node_name, []).append(s)
            else:
                self.slices_shared.append(s)
        # Device views for CEL, per slice object and device index: slices are immutable
        # objects from the informer, so one view serves every node and every cycle of this
        # allocator.
        self._views: dict[tuple[int, int], dict] = {}
        # node name -> (the node's labels, its pools): pools depend only on the slices, and on
        # the labels where a slice selects nodes by them. Kept by the caller for as long as
        # ``slices`` is the same list, so that later cycles skip gathering.
        self.pool_cache = pool_cache if pool_cache is not None else {}
        self._available_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}

    # --- pools ------------------------------------------------------------------------------

    def gather_pools(self, node: Any) -> list[Pool]:
        """The node's pools, sorted; the caller must not change them (they are cached)."""
        cached = self.pool_cache.get(node.name)
        if cached is not None and (not self.slices_shared or cached[0] is node.labels):
            return cached[1]
        pools = self._gather_pools(node)
        self.pool_cache[node.name] = (node.labels, pools)
        return pools

    def _gather_pools(self, node: Any) -> list[Pool]:
        by_pool: dict[tuple[str, str], list[dict]] = {}
        for s in self.slices_by_node.get(node.name, []) + self.slices_shared:
            spec = _spec(s)
            if spec.get("nodeName") or spec.get("allNodes") or spec.get("nodeSelector") is not None:
                try:
                    relevant = node_matches(node, spec.get("nodeName") or "", bool(spec.get("allNodes")),
                                            spec.get("nodeSelector"))
                except AllocationError as err:
                    raise AllocationError(f"failed to perform node selection for slice {_name(s)}: {err}") from None
            elif spec.get("perDeviceNodeSelection"):
                relevant = False
                for d in spec.get("devices") or ():
                    if node_matches(node, d.get("nodeName") or "", bool(d.get("allNodes")), d.get("nodeSelector")):
                        relevant = True
                        break
            else:
                continue
            if not relevant:
                continue
            key = _pool_key(s)
            current = by_pool.get(key)
            if current is None or _generation(s) > _generation(current[0]):
                by_pool[key] = [s]
            elif _generation(s) == _generation(current[0]):
                current.append(s)
        pools = []
        for (driver, name), pool_slices in by_pool.items():
            generation = _generation(pool_slices[0])
            wanted = _slice_count(pool_slices[0])
            all_for_pool: list[dict] | None = None
            if len(pool_slices) != wanted:
                same = [s for s in self.all_slices if _pool_key(s) == (driver, name)]
                if any(_generation(s) > generation for s in same):
                    continue  # obsolete: a newer generation is being published
                all_for_pool = [s for s in same if _generation(s) == generation]
                if len(all_for_pool) != wanted:
                    pool = Pool(driver, name)
                    pool.incomplete = True
                    pools.append(pool)
                    continue
            pools.append(self._build_pool(driver, name, pool_slices, all_for_pool))
        # Pools with a device that has binding conditions come last, so devices that are ready
        # at once are preferred (each group sorted by pool ID).
        pools.sort(key=lambda p: (_has_binding_conditions(p), p.driver, p.name))
        return pools

    def _build_pool(self, driver: str, name: str, slices: list[dict], all_for_pool: list[dict] | None) -> Pool:
        pool = Pool(driver, name)
        slices = sorted(slices, key=_name)
        counter_slices = []
        for s in slices:
            (counter_slices if _spec(s).get("sharedCounters") else pool.slices).append(s)
        if all_for_pool is not None and len(all_for_pool) > len(slices):
            on_node = {_name(s) for s in slices}
            for s in all_for_pool:
                if _name(s) in on_node:
                    continue
                (counter_slices if _spec(s).get("sharedCounters") else pool.slices_not_on_node).append(s)
        seen: set[str] = set()
        for s in pool.slices:
            for d in _spec(s).get("devices") or ():
                if d.get("name") in seen:
                    return self._invalid(pool, f"duplicate device name {d.get('name')}")
                seen.add(d.get("name"))
        for s in counter_slices:
            for cs in _spec(s).get("sharedCounters") or ():
                if cs.get("name") in pool.counter_sets:
                    return self._invalid(pool, f"duplicate counter set name {cs.get('name')}")
                try:
                    pool.counter_sets[cs.get("name")] = {
                        n: _quantity((c or {}).get("value", "0")) for n, c in (cs.get("counters") or {}).items()}
                except AllocationError as err:
                    return self._invalid(pool, str(err))
        for s in pool.slices + pool.slices_not_on_node:
            for d in _spec(s).get("devices") or ():
                for consumption in d.get("consumesCounters") or ():
                    counter_set = pool.counter_sets.get(consumption.get("counterSet"))
                    if counter_set is None:
                        return self._invalid(pool, f"counter set {consumption.get('counterSet')} not found")
                    for counter in consumption.get("counters") or {}:
                        if counter not in counter_set:
                            return self._invalid(
                                pool, f"counter {counter} not found in counter set {consumption.get('counterSet')}")
        return pool

    @staticmethod
    def _invalid(pool: Pool, reason: str) -> Pool:
        pool.invalid, pool.invalid_reason = True, reason
        pool.slices, pool.slices_not_on_node = [], []
        return pool

    # --- one node ---------------------------------------------------------------------------

    def allocate(self, node: Any, claims: list[dict]) -> list[dict] | None:
        """One AllocationResult per claim, in order; None when they do not all fit here.
        AllocationError when the allocation cannot be attempted (FailedOnNode: on this node)."""
        search = self.find(node, claims)
        return None if search is None else search.allocations()

    def find(self, node: Any, claims: list[dict]) -> "_Run | None":
        """As allocate, but the search that fit the claims instead of its AllocationResults,
        which its allocations() builds when they are wanted (Filter runs on many nodes, and
        Reserve takes one)."""
        search = _Run(self, node, claims)
        if not search.run():
            return None
        search.done()
        return search

    def device_availability(self, node: Any, claim: dict) -> list[tuple[str, str, int, int]]:
        """For `kubesched explain`: per request of claim (each subrequest of a firstAvailable
        list), (request, its device class, how many devices on node the class and the request
        select, how many of those no claim holds and no untolerated taint keeps out). A class
        that does not exist counts -1. Raises AllocationError for a broken selector."""
        run = _Run(self, node, [claim])
        pools = self.gather_pools(node)
        out = []
        for raw in (_spec(claim).get("devices") or {}).get("requests") or ():
            if raw.get("firstAvailable"):
                requests = [Request(sub, raw.get("name", "")) for sub in raw["firstAvailable"]]
            else:
                requests = [Request(raw.get("exactly") or {}, None)]
                requests[0].name = raw.get("name", "")
            for req in requests:
                req.class_ = self.classes.get(req.class_name)
                if req.class_ is None:
                    out.append((req.full_name, req.class_name, -1, -1))
                    continue
                selected = free = 0
                for pool in pools:
                    for s in pool.slices:
                        for index, device in enumerate(_spec(s).get("devices") or ()):
                            if not run._selectable(req, 0, s, index, claim):
                                continue
                            selected += 1
                            device_id = (pool.driver, pool.name, device.get("name"))
                            held = device_id in self.allocated or (
                                device_id in self.shared and not device.get("allowMultipleAllocations"))
                            tainted = any(taint.get("effect") in TAINT_EFFECTS_PREVENTING_ALLOCATION and not any(
                                tolerates(t, taint) for t in req.tolerations) for taint in device.get("taints") or ())
                            free += not held and not tainted
                out.append((req.full_name, req.class_name, selected, free))
        return out

    def device_view(self, slice_: dict, index: int) -> dict:
        key = (id(slice_), index)
        view = self._views.get(key)
        if view is None:
            spec = _spec(slice_)
            view = device_view(spec.get("driver", ""), spec["devices"][index])
            self._views[key] = view
        return view

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        key = (pool.driver, pool.name)
        available = self._available_counters.get(key)
        if available is None:
            available = {cs: dict(counters) for cs, counters in pool.counter_sets.items()}
            for s in pool.slices + pool.slices_not_on_node:
                for d in _spec(s).get("devices") or ():
                    device_id = (pool.driver, pool.name, d.get("name"))
                    if device_id not in self.allocated and device_id not in self.shared:
                        continue
                    for consumption in d.get("consumesCounters") or ():
                        counters = available.get(consumption.get("counterSet"), {})
                        for n, c in (consumption.get("counters") or {}).items():
                            if n in counters:
                                counters[n] -= _quantity((c or {}).get("value", "0"))
            self._available_counters[key] = available
        return available


class _Run:
    """One Allocate call: the search state for one node."""

    def __init__(self, alloc: Allocator, node: Any, claims: list[dict]):
        self.a = alloc
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = []
        # requests[claim][request] -> list of Request (one, or the subrequests in order)
        self.requests: list[list[list[Request]]] = []
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_Constraint]] = []
        self.match_cache: dict[tuple, bool] = {}
        self.allocating: dict[tuple, set[int]] = {}
        self.consumed: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        # Capacity this run's shares take of devices that allow multiple allocations.
        self.allocating_capacity: dict[tuple, dict[str, Fraction]] = {}
        self.results: list[list[_Result]] = []
        self.deadline = time.monotonic() + alloc.timeout if alloc.timeout > 0 else 0.0
        self._allocations: list[dict] | None = None

    def done(self) -> None:
        """Drop what only the search needed; what allocations() reads stays."""
        self.pools, self.constraints, self.match_cache = [], [], {}
        self.allocating, self.consumed, self.allocating_capacity = {}, {}, {}

    def allocations(self) -> list[dict]:
        """One AllocationResult per claim, in order (after run() found them)."""
        if self._allocations is None:
            self._allocations = [self._result(ci, claim) for ci, claim in enumerate(self.claims)]
        return self._allocations

    def run(self) -> bool:
        try:
            self.pools = self.a.gather_pools(self.node)
        except AllocationError as err:
            raise AllocationError(f"gather pool information: {err}") from None
        for ci, claim in enumerate(self.claims):
            devices = (_spec(claim).get("devices") or {})
            per_claim = []
            min_claim = 0
            for raw in devices.get("requests") or ():
                if raw.get("firstAvailable"):
                    subs = [self._validate(Request(sub, raw.get("name", "")), ci, claim)
                            for sub in raw["firstAvailable"]]
                    min_req = min(r.num_devices for r in subs)
                    per_claim.append(subs)
                else:
                    req = self._validate(Request(raw.get("exactly") or {}, None), ci, claim, raw.get("name", ""))
                    min_req = req.num_devices
                    per_claim.append([req])
                if min_req > ALLOCATION_RESULTS_MAX_SIZE - min_claim:
                    raise AllocationError(
                        f"claim {self._key(claim)}, request {raw.get('name', '')}: adding {min_req} devices exceeds "
                        f"the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_claim} already accounted for")
                min_claim += min_req
            self.requests.append(per_claim)
            constraints = []
            for i, c in enumerate(devices.get("constraints") or ()):
                if c.get("matchAttribute"):
                    constraints.append(_MatchAttribute(c.get("requests") or (), c["matchAttribute"]))
                elif c.get("distinctAttribute"):
                    constraints.append(_DistinctAttribute(c.get("requests") or (), c["distinctAttribute"]))
                else:
                    raise AllocationError(f"claim {self._key(claim)}, constraint #{i}: empty constraint "
                                          "(unsupported constraint type?)")
            self.constraints.append(constraints)
            self.results.append([])
        try:
            done = self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _MaxSizeExceeded:
            done = False
        if not done:
            for pool in self.pools:
                if pool.invalid:
                    raise FailedOnNode("invalid resource pools were encountered")
            return False
        if not all(_spec(chosen.slice).get("nodeName") for results in self.results for chosen in results):
            self.allocations()  # a slice's node selector may be refused: as upstream, while filtering
        return True

    def _key(self, claim: dict) -> str:
        meta = claim.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def _validate(self, req: Request, ci: int, claim: dict, name: str | None = None) -> Request:
        if name is not None:
            req.name = name
        label = f"claim {self._key(claim)}, request {req.full_name}"
        for i, expr in enumerate(req.selectors):
            if expr is None:
                raise AllocationError(f"{label}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not req.class_name:
            raise AllocationError(f"{label}: missing device class name (unsupported request type?)")
        cls = self.a.classes.get(req.class_name)
        if cls is None:
            raise AllocationError(f"{label}: could not retrieve device class {req.class_name}: "
                                  f'deviceclass.resource.k8s.io "{req.class_name}" not found')
        req.class_ = cls
        if req.mode == "ExactCount":
            req.num_devices = req.count
        elif req.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(f"{label}: asks for all devices, but resource pool {pool.id} is currently "
                                          "being updated")
                if pool.invalid:
                    raise AllocationError(f"{label}: asks for all devices, but resource pool {pool.id} is currently "
                                          "invalid")
                for s in pool.slices:
                    for di, device in enumerate(_spec(s).get("devices") or ()):
                        if not self._selectable(req, ci, s, di, claim):
                            continue
                        # Only the device's own capacity here: what others consume is checked when
                        # allocating, so a device that is full makes "All" fail.
                        try:
                            fits = (not req.capacity and not device.get("allowMultipleAllocations")) or \
                                request_fits(None, req.capacity, device.get("capacity") or {}, None)
                        except CapacityError as err:
                            raise AllocationError(f"claim {self._key(claim)}, request {req.name}: checking "
                                                  f"capacity for device {device.get('name')}: {err}") from None
                        if fits:
                            req.all_devices.append((pool, s, di))
            req.num_devices = len(req.all_devices)
        else:
            raise AllocationError(f"{label}: unsupported count mode {req.mode}")
        return req

    # --- the search (allocateOne) -----------------------------------------------------------

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        if self.deadline and time.monotonic() > self.deadline:
            raise AllocationTimeout(f"node {self.node.name}: timed out trying to allocate devices")
        if ci >= len(self.claims):
            return True
        per_claim = self.requests[ci]
        if ri >= len(per_claim):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _MaxSizeExceeded:
                return False
        alternatives = per_claim[ri]
        if not in_sub and alternatives[0].parent is not None:
            all_exceeded = True
            for sub_index in range(len(alternatives)):
                try:
                    ok = self._one(ci, ri, sub_index, 0, True, (0, 0, 0))
                except _MaxSizeExceeded:
                    continue
                all_exceeded = False
                if ok:
                    self.selected_sub[(ci, ri)] = sub_index
                    return True
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        req = alternatives[si]
        if req.mode == "All" and not req.all_devices:
            return False
        if di >= req.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if req.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[ci]):
            raise _MaxSizeExceeded
        if req.mode == "All":
            pool, s, index = req.all_devices[di]
            undo = self._allocate_device(ci, req, pool, s, index, must=True)
            if undo is None:
                return False
            if self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0)):
                return True
            undo()
            return False
        claim = self.claims[ci]
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            for sli in range(start[1] if pi == start[0] else 0, len(pool.slices)):
                s = pool.slices[sli]
                devices = _spec(s).get("devices") or ()
                first = start[2] if (pi == start[0] and sli == start[1]) else 0
                for index in range(first, len(devices)):
                    device_id = (pool.driver, pool.name, devices[index].get("name"))
                    if req.admin_access:
                        if ci in self.allocating.get(device_id, ()):
                            continue
                    elif device_id in self.a.allocated or self.allocating.get(device_id):
                        continue
                    if not self._selectable(req, ci, s, index, claim):
                        continue
                    if not self._capacity_fits(ci, req, device_id, devices[index], "checking"):
                        continue
                    undo = self._allocate_device(ci, req, pool, s, index)
                    if undo is None:
                        continue
                    if self._one(ci, ri, si, di + 1, in_sub, (pi, sli, index + 1)):
                        return True
                    undo()
        return False

    def _selectable(self, req: Request, ci: int, s: dict, index: int, claim: dict) -> bool:
        spec = _spec(s)
        device = spec["devices"][index]
        key = (ci, id(req), id(s), index)
        cached = self.match_cache.get(key)
        if cached is not None:
            return cached
        device_id = f"{spec.get('driver')}/{(spec.get('pool') or {}).get('name')}/{device.get('name')}"
        result = False
        class_selectors = [(x.get("cel") or {}).get("expression") for x in _spec(req.class_).get("selectors") or ()]
        if self._selectors_match(req.class_, class_selectors, s, index, device_id, claim) and \
                self._selectors_match(None, req.selectors, s, index, device_id, claim):
            result = True
            if spec.get("perDeviceNodeSelection"):
                result = node_matches(self.node, device.get("nodeName") or "", bool(device.get("allNodes")),
                                      device.get("nodeSelector"))
        self.match_cache[key] = result
        return result

    def _selectors_match(self, cls: dict | None, expressions: list, s: dict, index: int, device_id: str,
                         claim: dict) -> bool:
        for i, expr in enumerate(expressions):
            owner = f"class {_name(cls)}" if cls is not None else f"claim {self._key(claim)}"
            if expr is None:
                raise AllocationError(f"{owner}: selector #{i}: CEL expression empty (unsupported selector type?)")
            compiled = self.a.cel.get(expr)
            if compiled.error is not None:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {compiled.error}")
            meta = s.get("metadata") or {}
            version = meta.get("resourceVersion")
            key = (expr, meta.get("name"), version, index) if version else None
            outcome = self.a.cel.outcome(key) if key else None
            if outcome is None:
                try:
                    outcome = compiled.matches(self.a.device_view(s, index))
                except CelError as err:
                    outcome = str(err)
                if key:
                    self.a.cel.remember(key, outcome)
            if isinstance(outcome, str):
                raise AllocationError(f"{owner}: selector #{i} on device {device_id}: CEL runtime error: {outcome}")
            if not outcome:
                return False
        return True

    def _allocate_device(self, ci: int, req: Request, pool: Pool, s: dict, index: int,
                         must: bool = False) -> Callable[[], None] | None:
        device = _spec(s)["devices"][index]
        device_id = (pool.driver, pool.name, device.get("name"))
        multiple = bool(device.get("allowMultipleAllocations"))
        if not multiple and req.admin_access and ci in self.allocating.get(device_id, ()):
            return None
        if not req.admin_access and (device_id in self.a.allocated or self.allocating.get(device_id)):
            return None
        undo_steps: list[Callable[[], None]] = []

        def undo() -> None:
            for step in reversed(undo_steps):
                step()

        # A shared device already in use has had its counters charged by its first share.
        in_use_shared = multiple and (device_id in self.a.shared or device_id in self.allocating_capacity)
        if device.get("consumesCounters") and not in_use_shared:
            if not self._reserve_counters(pool, device):
                return None
            undo_steps.append(lambda: self._release_counters(pool, device))
        for taint in device.get("taints") or ():
            if taint.get("effect") in TAINT_EFFECTS_PREVENTING_ALLOCATION and \
                    not any(tolerates(t, taint) for t in req.tolerations):
                undo()
                return None
        base = req.parent or req.name
        sub = req.name if req.parent else ""
        for constraint in self.constraints[ci]:
            if not constraint.add(base, sub, device, device_id):
                undo()
                if must:
                    # allocationMode All: a constraint that rules out one of "all" devices can
                    # never be met, which upstream treats as an error.
                    raise AllocationError(f"claim {self._key(self.claims[ci])}, request {req.name}: cannot add "
                                          f"device {'/'.join(device_id)} because a claim constraint would not be "
                                          "satisfied")
                return None
            undo_steps.append(lambda c=constraint: c.remove(base, sub))
        if not multiple:
            self.allocating.setdefault(device_id, set()).add(ci)
            undo_steps.append(lambda: self.allocating[device_id].discard(ci))
        try:
            fits = self._capacity_fits(ci, req, device_id, device, "rechecking")
        except AllocationError:
            undo()
            raise
        if not fits:
            undo()
            return None
        share_id, consumed = None, None
        if multiple:
            try:
                consumed = consumed_capacity(req.capacity, device.get("capacity") or {})
            except CapacityError as err:
                undo()
                raise AllocationError(f"claim {self._key(self.claims[ci])}, request {req.name}: computing consumed "
                                      f"capacity for device {'/'.join(device_id)}: {err}") from None
            share_id = str(uuid.uuid4())
            undo_steps.append(self._take_capacity(device_id, {n: v for n, (v, _fmt) in consumed.items()}))
        self.results[ci].append(_Result(req, device_id, device, s, share_id, consumed))
        n = len(self.results[ci])
        undo_steps.append(lambda: self.results[ci].__delitem__(slice(n - 1, None)))
        return undo

    def _capacity_fits(self, ci: int, req: Request, device_id: tuple, device: dict, what: str) -> bool:
        """Whether the request fits the device's capacity beside the shares already taken."""
        if not req.capacity and not device.get("allowMultipleAllocations"):
            # Held whole and asked for no amount: it takes its full capacity, which always fits
            # (the API allows no request policy without allowMultipleAllocations). The common
            # case, so it skips the quantity arithmetic.
            return True
        try:
            return request_fits(self.a.shared.get(device_id), req.capacity, device.get("capacity") or {},
                                self.allocating_capacity.get(device_id))
        except CapacityError as err:
            raise AllocationError(f"claim {self._key(self.claims[ci])}, request {req.name}: {what} capacity for "
                                  f"device {'/'.join(device_id)}: {err}") from None

    def _take_capacity(self, device_id: tuple, consumed: dict[str, Fraction]) -> Callable[[], None]:
        """Record one share's capacity; the returned step gives it back. The entry itself marks
        the device as shared in this run, so it stays while an earlier share holds it."""
        existed = device_id in self.allocating_capacity
        entry = self.allocating_capacity.setdefault(device_id, {})
        for name, value in consumed.items():
            entry[name] = entry.get(name, Fraction(0)) + value

        def give_back() -> None:
            current = self.allocating_capacity.get(device_id)
            if current is None:
                return
            for name, value in consumed.items():
                if name in current:
                    current[name] -= value
            if not existed and all(v == 0 for v in current.values()):
                del self.allocating_capacity[device_id]
        return give_back

    def _reserve_counters(self, pool: Pool, device: dict) -> bool:
        available = self.a.available_counters(pool)
        consumed = self.consumed.setdefault((pool.driver, pool.name), {})
        for consumption in device.get("consumesCounters") or ():
            per_set = consumed.setdefault(consumption.get("counterSet"), {})
            for n, c in (consumption.get("counters") or {}).items():
                per_set[n] = per_set.get(n, Fraction(0)) + _quantity((c or {}).get("value", "0"))
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for n, value in counters.items():
                if value < used.get(n, 0):
                    self._release_counters(pool, device)
                    return False
        return True

    def _release_counters(self, pool: Pool, device: dict) -> None:
        consumed = self.consumed[(pool.driver, pool.name)]
        for consumption in device.get("consumesCounters") or ():
            per_set = consumed[consumption.get("counterSet")]
            for n, c in (consumption.get("counters") or {}).items():
                per_set[n] -= _quantity((c or {}).get("value", "0"))

    # --- the AllocationResult ---------------------------------------------------------------

    def _result(self, ci: int, claim: dict) -> dict:
        devices_spec = _spec(claim).get("devices") or {}
        raw_requests = devices_spec.get("requests") or ()
        results = []
        for chosen_device in self.results[ci]:
            req, device_id, device = chosen_device.request, chosen_device.device_id, chosen_device.device
            entry: dict[str, Any] = {"request": req.full_name, "driver": device_id[0], "pool": device_id[1],
                                     "device": device_id[2]}
            if req.admin_access:
                entry["adminAccess"] = True
            if req.tolerations:
                entry["tolerations"] = req.tolerations
            if chosen_device.share_id is not None:
                entry["shareID"] = chosen_device.share_id
            if chosen_device.consumed:
                entry["consumedCapacity"] = {n: format_quantity(v, fmt) for n, (v, fmt) in chosen_device.consumed.items()}
            if device.get("bindingConditions"):
                entry["bindingConditions"] = list(device["bindingConditions"])
            if device.get("bindingFailureConditions"):
                entry["bindingFailureConditions"] = list(device["bindingFailureConditions"])
            results.append(entry)

        def chosen(ri: int) -> Request:
            alternatives = self.requests[ci][ri]
            return alternatives[self.selected_sub.get((ci, ri), 0)] if alternatives[0].parent else alternatives[0]

        config: list[dict] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri in range(len(raw_requests)):
            req = chosen(ri)
            cls = req.class_
            if cls is None:
                continue
            class_name = _name(cls)
            if class_name in class_ranges:
                start, end = class_ranges[class_name]
                for i in range(start, end):
                    config[i]["requests"].append(req.full_name)
                continue
            start = len(config)
            for c in _spec(cls).get("config") or ():
                config.append({"source": "FromClass", "requests": [req.full_name],
                               **{k: v for k, v in c.items() if k != "requests"}})
            class_ranges[class_name] = (start, len(config))
        for c in devices_spec.get("config") or ():
            body = {k: v for k, v in c.items() if k != "requests"}
            names = c.get("requests") or []
            if not names:
                config.append({"source": "FromClaim", **body})
                continue
            for ri, raw in enumerate(raw_requests):
                req = chosen(ri)
                if raw.get("name") in names or (req.parent and req.full_name in names):
                    config.append({"source": "FromClaim", "requests": list(names), **body})
                    break
        for entry in config:
            names = entry.get("requests")
            if not names:
                continue
            if all(raw.get("name") in names or (chosen(ri).parent and chosen(ri).full_name in names)
                   for ri, raw in enumerate(raw_requests)):
                entry.pop("requests")
        allocation: dict[str, Any] = {"devices": {"results": results}}
        if config:
            allocation["devices"]["config"] = config
        node_selector = self._node_selector(ci)
        if node_selector is not None:
            allocation["nodeSelector"] = node_selector
        return allocation

    def _node_selector(self, ci: int) -> dict | None:
        fields: list[dict] = []
        expressions: list[dict] = []
        for chosen_device in self.results[ci]:
            device, spec = chosen_device.device, _spec(chosen_device.slice)
            if spec.get("perDeviceNodeSelection"):
                node_name, selector = device.get("nodeName"), device.get("nodeSelector")
            else:
                node_name, selector = spec.get("nodeName"), spec.get("nodeSelector")
            if node_name:
                return {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [self.node.name]}]}]}
            if selector is not None:
                terms = selector.get("nodeSelectorTerms") or []
                if len(terms) > 1:
                    raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
                if terms:
                    _merge(terms[0].get("matchFields") or (), fields)
                    _merge(terms[0].get("matchExpressions") or (), expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _merge(source: Any, target: list[dict]) -> None:
    for req in source:
        if not any(t.get("key") == req.get("key") and t.get("operator") == req.get("operator")
                   and set(t.get("values") or ()) == set(req.get("values") or ()) for t in target):
            target.append(req)


class _MaxSizeExceeded(Exception):
    pass


class _Result:
    """One device chosen for one request (upstream's internalDeviceResult)."""

    __slots__ = ("request", "device_id", "device", "slice", "share_id", "consumed")

    def __init__(self, request: Request, device_id: tuple, device: dict, slice_: dict, share_id: str | None,
                 consumed: dict[str, tuple[Fraction, str]] | None):
        self.request, self.device_id, self.device, self.slice = request, device_id, device, slice_
        self.share_id, self.consumed = share_id, consumed


def _lookup_attribute(device: dict, device_id: tuple, name: str) -> dict | None:
    attrs = device.get("attributes") or {}
    if name in attrs:
        return attrs[name]
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id[0]:
        return None
    return attrs.get(ident)


def _typed_value(attr: dict) -> tuple[str, Any] | None:
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return kind, attr[kind]
    return None


class _Constraint:
    def __init__(self, requests: Any, attribute: str):
        self.requests = set(requests)
        self.attribute = attribute

    def applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, device: dict, device_id: tuple) -> bool:
        raise NotImplementedError

    def remove(self, base: str, sub: str) -> None:
        raise NotImplementedError


class _MatchAttribute(_Constraint):
    def __init__(self, requests: Any, attribute: str):
        super().__init__(requests, attribute)
        self.value: tuple | None = None
        self.count = 0

    def add(self, base: str, sub: str, device: dict, device_id: tuple) -> bool:
        if not self.applies(base, sub):
            return True
        attr = _lookup_attribute(device, device_id, self.attribute)
        value = _typed_value(attr) if attr is not None else None
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, base: str, sub: str) -> None:
        if self.applies(base, sub):
            self.count -= 1


class _DistinctAttribute(_Constraint):
    def __init__(self, requests: Any, attribute: str):
        super().__init__(requests, attribute)
        self.values: list[tuple] = []

    def add(self, base: str, sub: str, device: dict, device_id: tuple) -> bool:
        if not self.applies(base, sub):
            return True
        attr = _lookup_attribute(device, device_id, self.attribute)
        value = _typed_value(attr) if attr is not None else None
        if value is None or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, base: str, sub: str) -> None:
        if self.applies(base, sub):
            self.values.pop()
