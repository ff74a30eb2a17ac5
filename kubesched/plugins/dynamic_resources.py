"""DynamicResources: devices for pods through ResourceClaims (resource.k8s.io/v1), as v1.37.

PreEnqueue holds a pod whose claims do not exist yet; PreFilter gathers its claims (by name,
or the claim the resourceclaim controller made from a template, found through
pod.status.resourceClaimStatuses) and builds the allocator; Filter allocates on each node
(an allocated claim instead restricts the pod to its node selector); PostFilter deallocates
a claim that blocks the pod when no other pod uses it; Reserve/Unreserve keep allocations
in flight so two pods never get one device; PreBind writes status.allocation and
reservedFor; Score prefers nodes where a prioritized list got an earlier choice.

Extended resources backed by DRA (kubesched/dra/extended.py) ride along as one more claim,
made in PreBind. Devices with binding conditions (DRADeviceBindingConditions, on by default in
v1.37): PreBind waits until the driver reports every binding condition True in the claim's
status.devices (polling every 5 s, up to bindingTimeout, 600 s by default); a binding failure
condition or the timeout fails PreBind, Unreserve takes the pod off the claim, and the next
attempt's Filter finds the claim unavailable, so PostFilter deallocates it. A pod without
claims or DRA-backed extended resources skips every extension point (PreFilter Skip).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from kubesched import klog
from kubesched.api.node_affinity import NodeSelector
from kubesched.client import NO_ANSWER, ApiError, read_back
from kubesched.config.types import parse_duration
from kubesched.dra.allocator import AllocationError, Allocator, FailedOnNode
from kubesched.dra.extended import (
    SPECIAL_CLAIM_NAME,
    dra_backed_requests,
    find_extended_claim,
    is_dra_extended_resource_name,
    requests_and_mappings,
    special_claim,
)
from kubesched.dra.manager import API, DRAManager, claim_key
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PluginArgsError,
    Status,
)
from kubesched.framework.signers import Fragments
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields
from kubesched.plugins.helper.normalize_score import default_normalize_score

STATE_KEY = "DynamicResources"
FINALIZER = "resource.kubernetes.io/delete-protection"
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
BINDING_CONDITIONS_POLL_INTERVAL = 5.0  # seconds, as upstream's wait.PollUntilContextTimeout in PreBind


def _duration(args: dict, key: str, default: float) -> float:
    value = args.get(key)
    if value is None:
        return default
    try:
        return parse_duration(str(value))
    except ValueError as err:
        raise PluginArgsError(key, str(err)) from None


class ClaimNotReady(Exception):
    pass


class DeviceBindingFailed(Exception):
    """A binding failure condition is True (upstream's ErrDeviceBindingFailed)."""


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition(conditions: list, condition_type: str) -> dict | None:
    return next((c for c in conditions or () if c.get("type") == condition_type), None)


def claim_ready_for_binding(claim: dict) -> bool:
    """isClaimReadyForBinding: every binding condition of every allocated device True in the
    claim's status.devices; DeviceBindingFailed when a binding failure condition is True."""
    allocation = (claim.get("status") or {}).get("allocation")
    if allocation is None:
        return False
    statuses = (claim.get("status") or {}).get("devices") or ()
    for result in (allocation.get("devices") or {}).get("results") or ():
        if not result.get("bindingConditions"):
            continue
        # The first status of the device, whatever its shareID (getAllocatedDeviceStatus).
        device_status = next((d for d in statuses if (d.get("driver"), d.get("pool"), d.get("device"))
                              == (result.get("driver"), result.get("pool"), result.get("device"))), None)
        if device_status is None:
            return False
        conditions = device_status.get("conditions") or ()
        for condition_type in result.get("bindingFailureConditions") or ():
            failed = _condition(conditions, condition_type)
            if failed is not None and failed.get("status") == "True":
                raise DeviceBindingFailed(
                    f"device binding failed: claim={_meta(claim).get('name')}, reason={failed.get('reason', '')}, "
                    f"message={json.dumps(failed.get('message', ''), ensure_ascii=False)}")
        for condition_type in result["bindingConditions"]:
            met = _condition(conditions, condition_type)
            if met is None or met.get("status") != "True":
                return False
    return True


def claim_binding_timed_out(claim: dict, timeout: float, now: float | None = None) -> bool:
    """isClaimTimeout: a device with binding conditions, allocated longer than timeout ago."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    allocated_at = _parse_time(allocation.get("allocationTimestamp"))
    if allocated_at is None:
        return False
    if not any(r.get("bindingConditions") is not None for r in (allocation.get("devices") or {}).get("results") or ()):
        return False
    return allocated_at + timeout < (time.time() if now is None else now)


class _State:
    __slots__ = ("claims", "allocator", "available_on", "node_allocations", "unavailable", "allocations", "lock",
                 "extended", "extended_scalars", "node_extended", "bound_waiting", "prioritized")

    def __init__(self) -> None:
        self.claims: list[dict] = []
        self.allocator: Allocator | None = None
        self.available_on: list[NodeSelector | None] = []
        # Per node: the claims' indices and the allocator's search that found devices for them
        # there. The AllocationResults are built from it for the nodes Score or Reserve asks
        # about, not for every feasible node.
        self.node_allocations: dict[str, tuple[list[int], Any]] = {}
        self.unavailable: set[int] = set()
        self.allocations: dict[int, dict] = {}
        self.lock = threading.Lock()
        # The claim of the pod's DRA-backed extended resources (the last of claims), the pod's
        # extended resource requests, and per node the claim with its requests and mappings.
        self.extended: dict | None = None
        self.extended_scalars: dict[str, int] = {}
        self.node_extended: dict[str, tuple[dict, list[dict]]] = {}
        # Allocated claims whose devices have binding conditions: Filter checks they have not
        # failed or timed out.
        self.bound_waiting: list[int] = []
        # Whether a claim has a firstAvailable request, the only thing Score tells nodes apart by.
        self.prioritized = False

    def clone(self) -> "_State":
        return self  # shared across the cycle, as upstream's stateData

    def allocations_on(self, node_name: str) -> dict[int, dict] | None:
        """Claim index -> the AllocationResult Filter found on the node, or None."""
        found = self.node_allocations.get(node_name)
        if found is None:
            return None
        indices, search = found
        return dict(zip(indices, search.allocations()))


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def pod_claim_names(pod: dict) -> list[tuple[str, str | None, bool]]:
    """(pod claim name, ResourceClaim name or None, must check owner) per spec.resourceClaims;
    ClaimNotReady when a template's claim is not created yet (resourceclaim.Name)."""
    meta, spec = _meta(pod), pod.get("spec") or {}
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    out = []
    for pc in spec.get("resourceClaims") or ():
        if pc.get("resourceClaimName"):
            out.append((pc.get("name", ""), pc["resourceClaimName"], False))
        elif pc.get("resourceClaimTemplateName"):
            status = statuses.get(pc.get("name"))
            if status is None:
                raise ClaimNotReady(f'pod "{meta.get("namespace")}/{meta.get("name")}": ResourceClaim not created yet')
            # A null claim name: the controller decided no claim is needed.
            out.append((pc.get("name", ""), status.get("resourceClaimName"), True))
        else:
            raise ClaimNotReady(f'pod "{meta.get("namespace")}/{meta.get("name")}", spec.resourceClaim '
                                f'"{pc.get("name")}": none of the supported fields are set')
    return out


def is_reserved_for(pod: dict, claim: dict) -> bool:
    uid = _meta(pod).get("uid")
    return any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or ())


class DynamicResources:
    name = "DynamicResources"
    INFORMERS = ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules")

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("filterTimeout", "bindingTimeout"))
        self.filter_timeout = _duration(args, "filterTimeout", 10.0)
        if self.filter_timeout < 0:
            raise PluginArgsError("filterTimeout", f"Invalid value: {args['filterTimeout']!r}: must be zero or positive")
        self.binding_timeout = _duration(args, "bindingTimeout", 600.0)
        if self.binding_timeout < 1:
            raise PluginArgsError("bindingTimeout", f"Invalid value: {args['bindingTimeout']!r}: must be at least 1 second")
        self.manager: DRAManager = handle.dra

    def sign_pod(self, pod: PodInfo) -> Fragments:
        """A pod with claims gets devices of its own: never batched."""
        return None if (pod.raw.get("spec") or {}).get("resourceClaims") else []

    # --- events ----------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                         | ActionType.UPDATE_NODE_ALLOCATABLE),
            ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE,
                         hint=self.is_schedulable_after_claim_change),
            ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE),
        ]

    def is_schedulable_after_claim_change(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """isSchedulableAfterClaimChange: the pod's own claim appeared or its status changed, or
        a claim was deallocated; not when another claim changed or the pod still lacks one."""
        if new is None:
            return bool(((old or {}).get("status") or {}).get("allocation"))
        try:
            claims = self._pod_claims(pod.raw)
        except ClaimNotReady:
            return False
        if old is not None and (old.get("status") or {}).get("allocation") and \
                not (new.get("status") or {}).get("allocation"):
            return True
        uid = _meta(new).get("uid")
        if not any(_meta(c).get("uid") == uid for c in claims):
            return False
        return old is None or (old.get("status") or {}) != (new.get("status") or {})

    # --- claims of a pod -------------------------------------------------------------------------

    def _pod_claims(self, pod: dict) -> list[dict]:
        """foreachPodResourceClaim: ClaimNotReady with upstream's wording when one is missing."""
        claims = []
        namespace = _meta(pod).get("namespace", "default")
        for _pod_claim, claim_name, check_owner in pod_claim_names(pod):
            if claim_name is None:
                continue
            claim = self.manager.get_claim(namespace, claim_name)
            if claim is None:
                raise ClaimNotReady(f'resourceclaim.resource.k8s.io "{claim_name}" not found')
            if _meta(claim).get("deletionTimestamp"):
                raise ClaimNotReady(f'resourceclaim "{claim_name}" is being deleted')
            if check_owner:
                owners = _meta(claim).get("ownerReferences") or ()
                if not any(o.get("uid") == _meta(pod).get("uid") and o.get("controller") for o in owners):
                    raise ClaimNotReady(f"ResourceClaim {namespace}/{claim_name} was not created for Pod "
                                        f"{namespace}/{_meta(pod).get('name')} (Pod is not owner)")
            claims.append(claim)
        return claims

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not (pod.raw.get("spec") or {}).get("resourceClaims"):
            return None
        try:
            self._pod_claims(pod.raw)
        except ClaimNotReady as err:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(err), plugin=self.name)
        return None

    # --- PreFilter / Filter ------------------------------------------------------------------------

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        has_claims = bool((pod.raw.get("spec") or {}).get("resourceClaims"))
        scalar = pod.requests.scalar
        backed = dra_backed_requests(scalar, self.manager) if scalar and self.manager.classes else {}
        if not has_claims and not backed:
            return None, Status(Code.SKIP)  # hot path: pods without claims cost nothing here
        s = _State()
        state.write(STATE_KEY, s)
        try:
            claims = self._pod_claims(pod.raw) if has_claims else []
        except ClaimNotReady as err:
            return None, self._unschedulable(str(err))
        if backed:
            s.extended_scalars = {n: q for n, q in scalar.items() if q and is_dra_extended_resource_name(n)}
            with self.manager.lock:
                known = list({**self.manager.claims, **self.manager.assumed}.values())
            s.extended = find_extended_claim(pod.raw, known) or special_claim(pod.raw)
            claims.append(s.extended)
        if not claims:
            return None, Status(Code.SKIP)
        to_allocate = 0
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation is not None:
                selector = allocation.get("nodeSelector")
                s.available_on.append(NodeSelector(selector) if selector else None)
                if any(r.get("bindingConditions") for r in (allocation.get("devices") or {}).get("results") or ()):
                    s.bound_waiting.append(len(s.available_on) - 1)
                continue
            s.available_on.append(None)
            to_allocate += 1
            if claim is s.extended:
                continue
            if self.manager.pending_allocation(_meta(claim).get("uid", "")) is not None:
                return None, self._unschedulable(
                    f"resource claim {claim_key(claim)} is in the process of being allocated")
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                if request.get("exactly") is not None:
                    status = self._validate_class((request["exactly"] or {}).get("deviceClassName", ""),
                                                  request.get("name", ""))
                elif request.get("firstAvailable"):
                    status = None
                    for sub in request["firstAvailable"]:
                        status = self._validate_class(sub.get("deviceClassName", ""),
                                                      f"{request.get('name', '')}/{sub.get('name', '')}")
                        if status is not None:
                            break
                else:
                    status = self._unschedulable(f"resource claim {claim_key(claim)}, request "
                                                 f"{request.get('name', '')}: unknown request type")
                if status is not None:
                    return None, status
        if to_allocate:
            allocated, shared = self.manager.allocated_state()
            slices, pool_cache = self.manager.slices_and_pools()
            s.allocator = Allocator(allocated, dict(self.manager.classes), slices, self.manager.cel, claim_key,
                                    self.filter_timeout, shared=shared, pool_cache=pool_cache)
        s.claims = claims
        s.prioritized = any(request.get("firstAvailable") for claim in claims
                            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ())
        return None, None

    def _validate_class(self, class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return Status(Code.ERROR, f"request {request_name}: unsupported request type", plugin=self.name)
        if self.manager.device_class(class_name) is None:
            return self._unschedulable(f"request {request_name}: device class {class_name} does not exist")
        return None

    def _unschedulable(self, reason: str) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, plugin=self.name)

    def _extended_on_node(self, s: _State, pod: PodInfo, node_info: NodeInfo) -> tuple[dict | None, list, Status | None]:
        """filterExtendedResources: the extended claim with this node's requests, or None when
        the node's own allocatable (a device plugin) serves every extended resource."""
        claim = s.extended
        if claim is None:
            return None, [], None
        if ((claim.get("spec") or {}).get("devices") or {}).get("requests") is not None and \
                (claim.get("status") or {}).get("allocation") is None:
            return None, [], self._unschedulable("cannot schedule extended resource claim")
        on_dra = []
        for name in s.extended_scalars:
            allocatable = node_info.allocatable.scalar.get(name)
            if self.manager.class_for_extended_resource(name) is not None and not allocatable:
                on_dra.append(name)
            elif allocatable is None:
                return None, [], self._unschedulable("cannot fit resource")
        if not on_dra or (claim.get("status") or {}).get("allocation") is not None:
            return None, [], None
        requests, mappings = requests_and_mappings(pod.raw, on_dra, self.manager)
        node_claim = copy.deepcopy(claim)
        node_claim["spec"] = {"devices": {"requests": requests}}
        return node_claim, mappings, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return None
        node_claim, mappings, status = self._extended_on_node(s, pod, node_info)
        if status is not None:
            return status
        if node_claim is None and len(s.claims) == 1 and s.extended is not None and \
                (s.extended.get("status") or {}).get("allocation") is None:
            return None  # only extended resources, all served by the node's allocatable
        unavailable = [i for i, sel in enumerate(s.available_on) if sel is not None and not sel.matches(node_info)]
        for index in s.bound_waiting:
            if index not in unavailable and self._binding_blocked(s.claims[index]):
                unavailable.append(index)
        allocations: tuple[list[int], Any] | None = None
        if s.allocator is not None:
            indices, to_allocate = [], []
            for i, c in enumerate(s.claims):
                if (c.get("status") or {}).get("allocation") is not None:
                    continue
                if c is s.extended:
                    if node_claim is None:
                        continue
                    c = node_claim
                indices.append(i)
                to_allocate.append(c)
            try:
                search = s.allocator.find(node_info, to_allocate)
            except FailedOnNode as err:
                return self._unschedulable(str(err))
            except AllocationError as err:
                return Status(Code.ERROR, str(err), plugin=self.name, error=err)
            if search is None:
                return self._unschedulable("cannot allocate all claims")
            allocations = (indices, search)
        if unavailable:
            with s.lock:
                s.unavailable.update(unavailable)
            return self._unschedulable("resourceclaim not available on the node")
        if allocations is not None:
            with s.lock:
                s.node_allocations[node_info.name] = allocations
                if node_claim is not None:
                    s.node_extended[node_info.name] = (node_claim, mappings)
        return None

    def _binding_blocked(self, claim: dict) -> bool:
        """An allocated claim whose binding failed, or has not finished within bindingTimeout:
        unavailable, so that PostFilter deallocates it and other devices get a chance."""
        try:
            ready = claim_ready_for_binding(claim)
        except DeviceBindingFailed:
            return True
        return not ready and claim_binding_timed_out(claim, self.binding_timeout)

    # --- PostFilter ----------------------------------------------------------------------------------

    def pod_group_post_filter(self, pod_group: dict, members: list[PodInfo], states: list,
                              simulate: Callable) -> tuple[dict[str, str], Status]:
        """Upstream's PodGroupPostFilter for the members' own claims: each member the cycle
        tried (states holds their cycle states, in order) gets PostFilter's clean-up, one claim
        deallocated or the extended resources' claim deleted. When no member reached this
        plugin's PreFilter the group's state is missing: "not found", an error as upstream's.
        Claims of the PodGroup itself (DRAWorkloadResourceClaims) are not handled."""
        tried = [(pod, state) for pod, state in zip(members, states)
                 if state.get(STATE_KEY) is not None or self.name in state.skip_filter_plugins]
        if not tried:
            return {}, Status(Code.ERROR, "not found")
        for pod, state in tried:
            status = self._deallocate_or_delete_pod_claims(state.get(STATE_KEY), pod)
            if status.code == Code.ERROR:
                return {}, status
        return {}, Status(Code.UNSCHEDULABLE, "deallocation and deletion of ResourceClaims completed")

    def post_filter(self, state, pod: PodInfo, statuses: dict) -> tuple[str | None, Status]:
        s: _State | None = state.get(STATE_KEY)
        if s is None and self.name not in state.skip_filter_plugins:
            # Upstream's PostFilter reads the state its PreFilter writes for every pod. When an
            # earlier PreFilter rejected the pod (VolumeBinding: unbound immediate claims), that
            # state is missing: PostFilter fails with "not found", DefaultPreemption does not
            # run, and the FailedScheduling message ends in "not found", as kube-scheduler's does.
            return None, Status(Code.ERROR, "not found", plugin=self.name)
        return None, self._deallocate_or_delete_pod_claims(s, pod)

    def _deallocate_or_delete_pod_claims(self, s: _State | None, pod: PodInfo) -> Status:
        """One of the pod's claims Filter found unavailable, allocated and reserved for no
        other pod, deallocated; else its extended resources' claim deleted (upstream
        deallocateOrDeletePodClaims)."""
        if s is None or not s.claims:
            return Status(Code.UNSCHEDULABLE)
        for index in sorted(s.unavailable):
            claim = s.claims[index]
            reserved = (claim.get("status") or {}).get("reservedFor") or ()
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                updated = copy.deepcopy(claim)
                status = updated.setdefault("status", {})
                for field in ("reservedFor", "allocation", "devices"):
                    status.pop(field, None)
                meta = _meta(claim)
                try:
                    self.handle.client.request("PUT", f"{API}/namespaces/{meta.get('namespace')}/resourceclaims/"
                                               f"{meta.get('name')}/status", updated)
                except ApiError as err:
                    return Status(Code.ERROR, str(err), plugin=self.name, error=err)
                return Status(Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed", plugin=self.name)
        extended = s.extended
        if extended is not None and _meta(extended).get("name") != SPECIAL_CLAIM_NAME:
            try:
                self._delete_claim(extended)
            except ApiError as err:
                return Status(Code.ERROR, str(err), plugin=self.name, error=err)
            return Status(Code.UNSCHEDULABLE, "deletion of ResourceClaim completed", plugin=self.name)
        return Status(Code.UNSCHEDULABLE)

    def _delete_claim(self, claim: dict) -> None:
        meta = _meta(claim)
        path = f"{API}/namespaces/{meta.get('namespace')}/resourceclaims/{meta.get('name')}"
        current = self.handle.client.get(path)
        finalizers = [f for f in _meta(current).get("finalizers") or () if f != FINALIZER]
        if finalizers != (_meta(current).get("finalizers") or []):
            current["metadata"]["finalizers"] = finalizers
            self.handle.client.request("PUT", path, current)
        try:
            self.handle.client.request("DELETE", path)
        except ApiError as err:
            if err.status != 404:
                raise

    # --- Score ---------------------------------------------------------------------------------------

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return Status(Code.SKIP)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return 0
        if not s.prioritized:
            return 0  # no firstAvailable request: every node scores the same
        allocations = s.allocations_on(node_info.name)
        if allocations is None:
            return 0
        score = 0
        for index, claim in enumerate(s.claims):
            allocation = (claim.get("status") or {}).get("allocation") or allocations.get(index)
            if allocation is None:
                continue
            chosen = {r.get("request") for r in (allocation.get("devices") or {}).get("results") or ()
                      if "/" in (r.get("request") or "")}
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                for i, sub in enumerate(request.get("firstAvailable") or ()):
                    if f"{request.get('name')}/{sub.get('name')}" in chosen:
                        score += FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - i
        return score

    def normalize_score(self, state, pod: PodInfo, scores: list) -> None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)

    # --- Reserve / Unreserve -------------------------------------------------------------------------

    def reserve(self, state, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims or s.allocator is None:
            return None
        allocations = s.allocations_on(node_name)
        # The other nodes' searches are done with; the binding cycle keeps this state until
        # PreBind's writes are through, and a backlog of bindings would keep them all.
        s.node_allocations.clear()
        user_to_allocate = [i for i, c in enumerate(s.claims)
                            if (c.get("status") or {}).get("allocation") is None and c is not s.extended]
        if not allocations:
            if not user_to_allocate:
                return None
            return Status(Code.ERROR, "claim allocation not found for node", plugin=self.name)
        if any(i not in allocations for i in user_to_allocate):
            return Status(Code.ERROR, f"internal error, have {len(allocations)} allocations, "
                                      f"{len(user_to_allocate)} claims to allocate", plugin=self.name)
        for index, allocation in allocations.items():
            s.allocations[index] = allocation
            claim = copy.deepcopy(s.claims[index])
            claim.setdefault("status", {})["allocation"] = allocation
            self.manager.signal_pending_allocation(_meta(claim).get("uid", ""), claim)
        return None

    def unreserve(self, state, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return
        for claim in s.claims:
            meta = _meta(claim)
            if self.manager.remove_pending_allocation(meta.get("uid", "")):
                self.manager.restore(meta.get("namespace", ""), meta.get("name", ""))
            current = self.manager.get_claim(meta.get("namespace", ""), meta.get("name", "")) or claim
            if (current.get("status") or {}).get("allocation") is not None and is_reserved_for(pod.raw, current):
                patch = {"metadata": {"uid": meta.get("uid")},
                         "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
                try:
                    self.handle.client.request("PATCH", f"{API}/namespaces/{meta.get('namespace')}/resourceclaims/"
                                               f"{meta.get('name')}/status", patch,
                                               content_type="application/strategic-merge-patch+json")
                except ApiError as err:
                    klog.error("unreserve", resourceclaim=claim_key(claim), err=str(err))

    # --- PreBind ---------------------------------------------------------------------------------------

    def pre_bind(self, state, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return None
        for index, claim in enumerate(s.claims):
            if is_reserved_for(pod.raw, claim):
                continue
            if claim is s.extended:
                status = self._bind_extended_claim(s, index, pod, node_name)
                if status is not None:
                    return status
                continue
            try:
                s.claims[index] = self._bind_claim(pod, claim, s.allocations.get(index))
            except (ApiError, ClaimNotReady) as err:
                return Status(Code.ERROR, str(err), plugin=self.name, error=err)
        if any(r.get("bindingConditions") for c in s.claims
               for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()):
            return self._wait_for_binding_conditions(s, pod, node_name)
        return None

    def _wait_for_binding_conditions(self, s: _State, pod: PodInfo, node_name: str) -> Status | None:
        """Wait until the driver reports the devices ready (all binding conditions True), as
        upstream's PreBind: check now, then every 5 s, until bindingTimeout."""
        self.handle.event_recorder.eventf(pod.raw, "Normal", "BindingConditionsPending", "Scheduling",
                                          f"waiting for binding conditions for device on node {node_name}")
        deadline = time.monotonic() + self.binding_timeout
        while True:
            try:
                if self._pod_ready_for_binding(s):
                    return None
            except (DeviceBindingFailed, ClaimNotReady) as err:
                return Status(Code.ERROR, str(err), plugin=self.name, error=err)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Status(Code.ERROR, "device binding timeout: context deadline exceeded", plugin=self.name)
            time.sleep(min(BINDING_CONDITIONS_POLL_INTERVAL, remaining))
            if time.monotonic() >= deadline:
                return Status(Code.ERROR, "device binding timeout: context deadline exceeded", plugin=self.name)

    def _pod_ready_for_binding(self, s: _State) -> bool:
        """isPodReadyForBinding, on the claims as the informer sees them now."""
        for index, claim in enumerate(s.claims):
            meta = _meta(claim)
            if meta.get("name") == SPECIAL_CLAIM_NAME:
                continue  # extended resources the node's allocatable served: no claim was made
            current = self.manager.get_claim(meta.get("namespace", ""), meta.get("name", ""))
            if current is None:
                raise ClaimNotReady(f'resourceclaim.resource.k8s.io "{meta.get("name")}" not found')
            s.claims[index] = current
            if not claim_ready_for_binding(current):
                if claim_binding_timed_out(current, self.binding_timeout):
                    raise ClaimNotReady(f"device binding timeout: claim={meta.get('name')}")
                return False
        return True

    def _bind_extended_claim(self, s: _State, index: int, pod: PodInfo, node_name: str) -> Status | None:
        """Create the claim of the pod's extended resources, allocate and reserve it, and
        record it in the pod's status.extendedResourceClaimStatus."""
        claim = s.claims[index]
        allocation = s.allocations.get(index)
        if allocation is None and _meta(claim).get("name") == SPECIAL_CLAIM_NAME:
            return None  # every extended resource came from the node's allocatable
        created = None
        try:
            if _meta(claim).get("name") == SPECIAL_CLAIM_NAME:
                node_claim, mappings = s.node_extended.get(node_name, (None, []))
                if node_claim is None:
                    return Status(Code.ERROR, f"extended resource claim not found for node {node_name}",
                                  plugin=self.name)
                body = copy.deepcopy(node_claim)
                meta = body["metadata"]
                for field in ("name", "uid"):
                    meta.pop(field, None)
                body.pop("status", None)
                try:
                    created = self.handle.client.request(
                        "POST", f"{API}/namespaces/{meta.get('namespace')}/resourceclaims", body)
                except ApiError as err:
                    raise ApiError(err.status, err.reason, f"create claim for extended resources "
                                                           f"{meta.get('namespace')}/{SPECIAL_CLAIM_NAME}: "
                                                           f"{err.message}") from None
                self.manager.signal_pending_allocation(_meta(created).get("uid", ""), {**created, "status": {
                    "allocation": allocation}})
                self.manager.remove_pending_allocation(_meta(claim).get("uid", ""))
                claim = created
            else:
                mappings = s.node_extended.get(node_name, (None, []))[1]
            s.claims[index] = self._bind_claim(pod, claim, allocation)
            if created is not None:
                if not mappings:
                    raise ClaimNotReady(f"nil or empty request mappings, no update of pod {pod.key} "
                                        "ExtendedResourceClaimStatus")
                try:
                    self.handle.client.patch_pod_status(pod.namespace, pod.name, {"status": {
                        "extendedResourceClaimStatus": {"requestMappings": mappings,
                                                        "resourceClaimName": _meta(created).get("name")}}})
                except ApiError as err:
                    raise ApiError(err.status, err.reason, f"update pod {pod.key} ExtendedResourceClaimStatus: "
                                                           f"{err.message}") from None
        except (ApiError, ClaimNotReady) as err:
            if created is not None:
                # Leave nothing half done: the claim made here goes with the failed attempt.
                self.manager.remove_pending_allocation(_meta(created).get("uid", ""))
                try:
                    self._delete_claim(created)
                except ApiError as cleanup_err:
                    klog.error("delete extended resource claim", resourceclaim=claim_key(created),
                               err=str(cleanup_err))
            return Status(Code.ERROR, str(err), plugin=self.name, error=err)
        return None

    def _written_all_the_same(self, path: str, pod: PodInfo) -> dict | None:
        """The claim at path if a status write that got no answer was made all the same: it is
        allocated and reserved for pod. Upstream undoes the allocation at once (Unreserve), and
        its devices look free until the claim's watch shows the write; the soak saw a device
        given to a second claim so, in a connection reset. Ask the API server first, until it
        answers (the devices stay taken while it is away, the safe side); None when the write
        was not made, or the scheduler stops before an answer came."""
        current = read_back(self.handle.client, path, self.handle.stopping.wait)
        if current is not None and (current.get("status") or {}).get("allocation") is not None \
                and is_reserved_for(pod.raw, current):
            return current
        return None

    def _bind_claim(self, pod: PodInfo, claim: dict, allocation: dict | None) -> dict:
        meta = _meta(claim)
        path = f"{API}/namespaces/{meta.get('namespace')}/resourceclaims/{meta.get('name')}"
        uid = meta.get("uid", "")
        claim = copy.deepcopy(claim)
        refresh = False
        try:
            for _attempt in range(5):  # retry.DefaultRetry: conflicts re-read the claim
                if refresh:
                    claim = self.handle.client.get(path)
                refresh = True
                if _meta(claim).get("deletionTimestamp"):
                    raise ClaimNotReady(f"claim {claim_key(claim)} got deleted in the meantime")
                status = claim.setdefault("status", {})
                if allocation is not None:
                    if status.get("allocation") is not None:
                        raise ClaimNotReady(f"claim {claim_key(claim)} got allocated elsewhere in the meantime")
                    finalizers = _meta(claim).setdefault("finalizers", [])
                    if FINALIZER not in finalizers:
                        finalizers.append(FINALIZER)
                        try:
                            claim = self.handle.client.request("PUT", path, claim)
                        except ApiError as err:
                            if err.status == 409:
                                continue
                            raise ApiError(err.status, err.reason,
                                           f"add finalizer to claim {claim_key(claim)}: {err.message}") from None
                        status = claim.setdefault("status", {})
                    status["allocation"] = dict(allocation)
                if status.get("allocation") is None:
                    raise ClaimNotReady(f"claim {claim_key(claim)} got deallocated elsewhere in the meantime")
                if not status["allocation"].get("allocationTimestamp"):
                    status["allocation"]["allocationTimestamp"] = \
                        datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                status["reservedFor"] = list(status.get("reservedFor") or ()) + [
                    {"resource": "pods", "name": pod.name, "uid": pod.uid}]
                try:
                    claim = self.handle.client.request("PUT", f"{path}/status", claim)
                except ApiError as err:
                    if err.status == 409:
                        continue
                    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
                    raise ApiError(err.status, err.reason, f"{what} claim {claim_key(claim)}: {err.message}") from None
                except NO_ANSWER:
                    written = self._written_all_the_same(path, pod)
                    if written is None:
                        raise
                    klog.info("The claim's answer was lost, but it is written", resourceclaim=claim_key(written),
                              pod=pod.key)
                    claim = written
                self.manager.assume(claim)
                return claim
            raise ClaimNotReady(f"claim {claim_key(claim)}: too many conflicts while updating its status")
        finally:
            if allocation is not None:
                self.manager.remove_pending_allocation(uid)
