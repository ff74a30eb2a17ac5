"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable, on the node
(upstream volumebinding/volume_binding.go, binder.go and scorer.go).

PreFilter sorts the pod's claims into bound, unbound Immediate (the pod waits for the PV
controller) and unbound WaitForFirstConsumer. Filter checks, per node, that bound claims'
PVs accept the node, that each delayed claim has the smallest fitting Available PV there
(static binding) or can be provisioned there (class provisioner, allowedTopologies,
CSIStorageCapacity). Reserve assumes the chosen bindings in the cache, PreBind writes them
(PV claimRef, or the claim's selected-node annotation) and waits for the PV controller to
finish within bindTimeoutSeconds; Unreserve restores the cache. A pod without claims skips
every point at the cost of one scan of its volumes.
"""

from __future__ import annotations

import copy
import math
import threading
import time

from kubesched import klog
from kubesched.api.selectors import SelectorError, label_selector
from kubesched.client import ApiError
from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, PluginArgsError, Status
from kubesched.framework.signers import VOLUMES_KEY, Fragments, volumes_signer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, int_arg
from kubesched.plugins.helper.csi_translation import (
    MIGRATED_PLUGINS_ANNOTATION,
    TranslationError,
    migrated_on_node,
    plugin_of_pv,
    translated_pv,
)
from kubesched.plugins.helper.volumes import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    bind_volume_to_claim,
    claim_class,
    claim_key,
    claim_request,
    find_matching_volume,
    is_claim_fully_bound,
    pod_claim_volumes,
    pv_capacity,
    pv_node_affinity_matches,
    storage_bytes,
    topology_terms_match,
    volume_is_for_pod,
)
from kubesched.plugins.resource_allocation import MAX_CUSTOM_PRIORITY_SCORE, broken_linear_function, validate_shape

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DEFAULT_SHAPE = [(0, MAX_CUSTOM_PRIORITY_SCORE), (100, 0)]
MAX_UTILIZATION = 100
BIND_POLL_SECONDS = 1.0
STATE_KEY = "VolumeBinding"
# Shared by the volume plugins: the runtime never changes a Skip status, and building one per
# pod is a cost on the hot path.
SKIP = Status(Code.SKIP)


class BindingError(Exception):
    pass


class PodVolumes:
    """What one node needs for the pod: claims to bind to PVs, claims to provision."""

    __slots__ = ("static_bindings", "dynamic_provisions")

    def __init__(self) -> None:
        self.static_bindings: list[tuple[dict, dict]] = []  # (pv, pvc)
        self.dynamic_provisions: list[tuple[dict, dict | None]] = []  # (pvc, CSIStorageCapacity used)


class _State:
    __slots__ = ("bound", "delayed", "pvs_by_class", "by_node", "has_static_bindings", "all_bound", "lock")

    def __init__(self, bound: list[dict], delayed: list[dict], pvs_by_class: dict[str, list[dict]]):
        self.bound = bound
        self.delayed = delayed
        self.pvs_by_class = pvs_by_class
        self.by_node: dict[str, PodVolumes] = {}
        self.has_static_bindings = False
        self.all_bound = False
        self.lock = threading.Lock()

    def clone(self) -> "_State":
        return self  # shared by every copy of the cycle state, as upstream's stateData


def _volume_limit(capacity: dict) -> int | None:
    value = capacity.get("maximumVolumeSize")
    if value is None:
        value = capacity.get("capacity")
    return None if value is None else storage_bytes(value)


class VolumeBinding:
    name = "VolumeBinding"
    INFORMERS = ("persistentvolumes", "persistentvolumeclaims", "storageclasses", "csinodes",
                 "csidrivers", "csistoragecapacities")

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("bindTimeoutSeconds", "shape"))
        self.bind_timeout_seconds = int_arg(args, "bindTimeoutSeconds", 600)
        if self.bind_timeout_seconds < 0:
            raise PluginArgsError("bindTimeoutSeconds", f"Invalid value: {self.bind_timeout_seconds}: "
                                  "invalid BindTimeoutSeconds, should not be a negative value")
        # StorageCapacityScoring is beta and on by default in 1.37: the shape defaults to
        # prefer the fullest fit ({0, 10}, {100, 0}) and scores every node with claims.
        self.shape = validate_shape(args["shape"], "shape") if args.get("shape") is not None else DEFAULT_SHAPE
        scale = 100 // MAX_CUSTOM_PRIORITY_SCORE
        self._score_function = broken_linear_function([(u, s * scale) for u, s in self.shape])
        self.volumes = handle.volumes

    # -- queueing ----------------------------------------------------------------------------

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(VOLUMES_KEY, volumes_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE,
                         hint=self._after_storage_class_change),
            ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE,
                         hint=_after_claim_of_pod_change),
            ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            ClusterEvent(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE, hint=_after_csi_node_change),
            ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE, hint=_after_csi_driver_change),
            ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, ActionType.ADD | ActionType.UPDATE,
                         hint=_after_capacity_change),
        ]

    @staticmethod
    def _after_storage_class_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
        return old is None or (old or {}).get("allowedTopologies") != (new or {}).get("allowedTopologies")

    # -- PreFilter ---------------------------------------------------------------------------

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        volumes = (pod.raw.get("spec") or {}).get("volumes")
        if not volumes or not any("persistentVolumeClaim" in v or "ephemeral" in v for v in volumes):
            return None, SKIP  # hot path: the common pod
        objects = self.volumes
        bound: list[dict] = []
        delayed: list[dict] = []
        immediate = False
        for name, ephemeral in pod_claim_volumes(pod):
            pvc = objects.pvc(pod.namespace, name)
            if pvc is None:
                reason = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                          if ephemeral else f'persistentvolumeclaim "{name}" not found')
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                                    f'"{(pvc.get("spec") or {}).get("volumeName", "")}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{name}" is being deleted')
            if ephemeral:
                problem = volume_is_for_pod(pod, pvc)
                if problem:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, problem)
            if is_claim_fully_bound(pvc):
                bound.append(pvc)
                continue
            try:
                delay = self._is_delay_binding(pvc)
            except BindingError as err:
                return None, Status.as_error(err)
            if delay and not (pvc.get("spec") or {}).get("volumeName"):
                delayed.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, UNBOUND_IMMEDIATE)
        pvs_by_class = {cls: objects.pvs_of_class(cls) for cls in {claim_class(pvc) for pvc in delayed}}
        state.write(STATE_KEY, _State(bound, delayed, pvs_by_class))
        return None, None

    def _is_delay_binding(self, pvc: dict) -> bool:
        class_name = claim_class(pvc)
        if not class_name:
            return False
        storage_class = self.volumes.storage_class(class_name)
        if storage_class is None:
            return False
        mode = storage_class.get("volumeBindingMode")
        if mode is None:
            raise BindingError(f'VolumeBindingMode not set for StorageClass "{class_name}"')
        return mode == WAIT_FOR_FIRST_CONSUMER

    # -- Filter ------------------------------------------------------------------------------

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        data: _State = state.read(STATE_KEY)
        try:
            pod_volumes, reasons = self.find_pod_volumes(pod, data, node_info)
        except (BindingError, SelectorError) as err:
            return Status.as_error(err)
        except TranslationError as err:
            return Status(Code.ERROR, f"could not translate pv: {err}", error=err)
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)
        with data.lock:
            data.by_node[node_info.name] = pod_volumes
            data.has_static_bindings = data.has_static_bindings or bool(pod_volumes.static_bindings)
        return None

    def find_pod_volumes(self, pod: PodInfo, data: _State, node: NodeInfo) -> tuple[PodVolumes, list[str]]:
        pod_volumes = PodVolumes()
        labels = node.labels
        bound_ok = unbound_ok = storage_ok = pvs_found = True
        for pvc in data.bound:
            pv = self.volumes.pv((pvc.get("spec") or {}).get("volumeName", ""))
            if pv is None:
                pvs_found = False
                break
            if (pv.get("spec") or {}).get("csi") is None:
                pv = self._as_csi_on_node(pv, node.name)
            if not pv_node_affinity_matches(pv, labels):
                bound_ok = False
                break
        if data.delayed:
            to_match: list[dict] = []
            to_provision: list[dict] = []
            for pvc in data.delayed:
                selected = ((pvc.get("metadata") or {}).get("annotations") or {}).get(ANN_SELECTED_NODE)
                if selected is not None:
                    if selected != node.name:
                        unbound_ok = False
                        break
                    to_provision.append(pvc)
                else:
                    to_match.append(pvc)
            else:
                if to_match:
                    unbound_ok, pod_volumes.static_bindings, unmatched = self._find_matching_volumes(
                        to_match, data, labels)
                    to_provision += unmatched
                if to_provision:
                    unbound_ok, storage_ok, pod_volumes.dynamic_provisions = self._check_provisions(
                        to_provision, node)
        reasons = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not storage_ok:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return pod_volumes, reasons

    def _as_csi_on_node(self, pv: dict, node_name: str) -> dict:
        """tryTranslatePVToCSI: an in-tree PV whose plugin the node's CSINode lists as migrated
        is checked with its CSI topology (the CSI driver's zone key); raises TranslationError."""
        plugin = plugin_of_pv(pv)
        if plugin is None or not migrated_on_node(plugin, self.volumes.csi_node(node_name)):
            return pv
        return translated_pv(pv, plugin)

    def _find_matching_volumes(self, claims: list[dict], data: _State, labels: dict[str, str]
                               ) -> tuple[bool, list[tuple[dict, dict]], list[dict]]:
        """Smallest claims first, each takes the smallest fitting PV not yet chosen."""
        chosen: set[str] = set()
        bindings: list[tuple[dict, dict]] = []
        unmatched: list[dict] = []
        for pvc in sorted(claims, key=lambda c: claim_request(c) or 0):
            selector_spec = (pvc.get("spec") or {}).get("selector")
            selector = None if selector_spec is None else label_selector(selector_spec, "spec.selector")
            pv = find_matching_volume(pvc, data.pvs_by_class.get(claim_class(pvc), []), labels, chosen, selector)
            if pv is None:
                unmatched.append(pvc)
                continue
            chosen.add((pv.get("metadata") or {}).get("name", ""))
            bindings.append((pv, pvc))
        return not unmatched, bindings, unmatched

    def _check_provisions(self, claims: list[dict], node: NodeInfo
                          ) -> tuple[bool, bool, list[tuple[dict, dict | None]]]:
        provisions: list[tuple[dict, dict | None]] = []
        for pvc in claims:
            class_name = claim_class(pvc)
            if not class_name:
                raise BindingError(f'no class for claim "{claim_key(pvc)}"')
            storage_class = self.volumes.storage_class(class_name)
            if storage_class is None:
                raise BindingError(f'failed to find storage class "{class_name}"')
            provisioner = storage_class.get("provisioner") or ""
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not topology_terms_match(storage_class.get("allowedTopologies"), node.labels):
                return False, True, []
            sufficient, capacity = self._has_enough_capacity(provisioner, pvc, class_name, node)
            if not sufficient:
                return True, False, []
            provisions.append((pvc, capacity))
        return True, True, provisions

    def _has_enough_capacity(self, provisioner: str, pvc: dict, class_name: str, node: NodeInfo
                             ) -> tuple[bool, dict | None]:
        size = claim_request(pvc)
        if size is None:
            return True, None
        driver = self.volumes.csi_driver(provisioner)
        if driver is None or not (driver.get("spec") or {}).get("storageCapacity"):
            return True, None
        for capacity in self.volumes.storage_capacities():
            if capacity.get("storageClassName") != class_name:
                continue
            limit = _volume_limit(capacity)
            if limit is None or limit < size:
                continue
            topology = capacity.get("nodeTopology")
            if topology is None:
                continue
            try:
                if not label_selector(topology, "nodeTopology").matches(node.labels):
                    continue
            except SelectorError:
                continue
            return True, capacity
        return False, None

    # -- Score -------------------------------------------------------------------------------

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if state.get(STATE_KEY) is None:
            return Status(Code.SKIP)
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        data: _State | None = state.get(STATE_KEY)
        pod_volumes = data.by_node.get(node_info.name) if data is not None else None
        if pod_volumes is None:
            return 0
        classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
        if pod_volumes.static_bindings:
            for pv, pvc in pod_volumes.static_bindings:
                entry = classes.setdefault(pv_storage_class_name(pv), [0, 0])
                entry[0] += claim_request(pvc) or 0
                entry[1] += pv_capacity(pv)
        else:
            for pvc, capacity in pod_volumes.dynamic_provisions:
                if capacity is None:
                    continue
                entry = classes.setdefault((pvc.get("spec") or {}).get("storageClassName") or "", [0, 0])
                entry[1] = storage_bytes(capacity.get("capacity"))
                entry[0] += claim_request(pvc) or 0
        if not classes:
            return 0
        total = 0
        for requested, capacity in classes.values():
            if capacity == 0 or requested > capacity:
                total += self._score_function(MAX_UTILIZATION)
            else:
                total += self._score_function(requested * MAX_UTILIZATION // capacity)
        return _round_half_away(total, len(classes))

    # -- Reserve / Unreserve -----------------------------------------------------------------

    def reserve(self, state, pod: PodInfo, node_name: str) -> Status | None:
        data: _State | None = state.get(STATE_KEY)
        if data is None:
            return None
        pod_volumes = data.by_node.get(node_name)
        if pod_volumes is None:
            data.all_bound = True
            return None
        try:
            data.all_bound = self.assume_pod_volumes(pod, node_name, pod_volumes)
        except Exception as err:  # noqa: BLE001 - an out-of-sync cache fails this attempt only
            return Status.as_error(err)
        return None

    def _all_claims_bound(self, pod: PodInfo) -> bool:
        for name, ephemeral in pod_claim_volumes(pod):
            pvc = self.volumes.pvc(pod.namespace, name)
            if pvc is None or (ephemeral and volume_is_for_pod(pod, pvc)) or not is_claim_fully_bound(pvc):
                return False
        return True

    def assume_pod_volumes(self, pod: PodInfo, node_name: str, pod_volumes: PodVolumes) -> bool:
        if self._all_claims_bound(pod):
            return True
        objects = self.volumes
        assumed_bindings: list[tuple[dict, dict]] = []
        assumed_claims: list[tuple[dict, dict | None]] = []
        try:
            for pv, pvc in pod_volumes.static_bindings:
                new_pv, dirty = bind_volume_to_claim(pv, pvc)
                if dirty:
                    objects.assume("persistentvolumes", new_pv)
                assumed_bindings.append((new_pv, pvc))
            for pvc, _capacity in pod_volumes.dynamic_provisions:
                clone = copy.deepcopy(pvc)
                clone.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
                objects.assume("persistentvolumeclaims", clone)
                assumed_claims.append((clone, None))
        except Exception:
            self._restore(assumed_bindings, assumed_claims)
            raise
        pod_volumes.static_bindings = assumed_bindings
        pod_volumes.dynamic_provisions = assumed_claims
        return False

    def _restore(self, bindings: list[tuple[dict, dict]], claims: list[tuple[dict, dict | None]]) -> None:
        for pv, _pvc in bindings:
            self.volumes.restore("persistentvolumes", pv)
        for pvc, _capacity in claims:
            self.volumes.restore("persistentvolumeclaims", pvc)

    def unreserve(self, state, pod: PodInfo, node_name: str) -> None:
        data: _State | None = state.get(STATE_KEY)
        pod_volumes = data.by_node.get(node_name) if data is not None else None
        if pod_volumes is not None:
            self._restore(pod_volumes.static_bindings, pod_volumes.dynamic_provisions)

    # -- PreBind -----------------------------------------------------------------------------

    def pre_bind(self, state, pod: PodInfo, node_name: str) -> Status | None:
        data: _State | None = state.get(STATE_KEY)
        if data is None or data.all_bound:
            return None
        pod_volumes = data.by_node.get(node_name)
        if pod_volumes is None:
            return Status.as_error(BindingError(f'no pod volume found for node "{node_name}"'))
        try:
            self.bind_pod_volumes(pod, node_name, pod_volumes)
        except (BindingError, ApiError) as err:
            if klog.V(5):
                klog.info("Failed to bind volumes for pod", pod=pod.key, err=str(err))
            return Status.as_error(err)
        return None

    def bind_pod_volumes(self, pod: PodInfo, node_name: str, pod_volumes: PodVolumes) -> None:
        """Write the bindings (PV claimRefs, then claims' selected-node), then wait for the
        PV controller to finish them; on a failed write the unwritten ones are restored."""
        client = self.handle.client
        bindings = pod_volumes.static_bindings
        claims = [pvc for pvc, _capacity in pod_volumes.dynamic_provisions]
        written_pvs = written_claims = 0
        try:
            for i, (pv, pvc) in enumerate(bindings):
                name = (pv.get("metadata") or {}).get("name", "")
                bindings[i] = (client.request("PUT", f"/api/v1/persistentvolumes/{name}", pv), pvc)
                written_pvs += 1
            for i, pvc in enumerate(claims):
                meta = pvc.get("metadata") or {}
                claims[i] = client.request(
                    "PUT", f"/api/v1/namespaces/{meta.get('namespace')}/persistentvolumeclaims/{meta.get('name')}",
                    pvc)
                written_claims += 1
        finally:
            self._restore(bindings[written_pvs:], [(c, None) for c in claims[written_claims:]])
        deadline = time.monotonic() + self.bind_timeout_seconds
        # Set when the scheduler stops (Scheduler.run): a shutdown must not wait out the timeout.
        stopping = self.handle.stopping
        while True:
            if self._check_bindings(node_name, bindings, claims):
                return
            if time.monotonic() >= deadline:
                raise BindingError("binding volumes: context deadline exceeded")
            if stopping.wait(BIND_POLL_SECONDS):
                raise BindingError("binding volumes: context canceled")

    def _check_bindings(self, node_name: str, bindings: list[tuple[dict, dict]], claims: list[dict]) -> bool:
        """checkBindings: True when every claim is fully bound to a PV that accepts the node;
        BindingError when the PV controller undid or failed the binding."""
        node = self.handle.snapshot().get(node_name)
        labels = node.labels if node is not None else {}
        objects = self.volumes
        for written_pv, pvc in bindings:
            name = (written_pv.get("metadata") or {}).get("name", "")
            pv = objects.get("persistentvolumes", name)
            current_claim = objects.get("persistentvolumeclaims", claim_key(pvc))
            if pv is None or current_claim is None:
                raise BindingError(f"binding volumes: failed to check binding: "
                                   f"{'persistentvolume' if pv is None else 'persistentvolumeclaim'} not found")
            if _rv_int(written_pv) > _rv_int(pv):
                return False  # the informer has not seen our write yet
            if not pv_node_affinity_matches(pv, labels):
                raise BindingError(f'binding volumes: pv "{name}" node affinity doesn\'t match node "{node_name}"')
            ref = (pv.get("spec") or {}).get("claimRef")
            if ref is None or not ref.get("uid"):
                raise BindingError(f'binding volumes: ClaimRef got reset for pv "{name}"')
            if not is_claim_fully_bound(current_claim):
                return False
        for written in claims:
            meta = written.get("metadata") or {}
            pvc = objects.get("persistentvolumeclaims", claim_key(written))
            if pvc is None:
                raise BindingError("binding volumes: failed to check provisioning pvc: persistentvolumeclaim "
                                   f'"{claim_key(written)}" not found')
            if _rv_int(written) > _rv_int(pvc):
                return False
            annotations = (pvc.get("metadata") or {}).get("annotations")
            if annotations is None:
                raise BindingError(f'binding volumes: selectedNode annotation reset for PVC "{meta.get("name")}"')
            if annotations.get(ANN_SELECTED_NODE) != node_name:
                raise BindingError(f'binding volumes: provisioning failed for PVC "{meta.get("name")}"')
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = objects.get("persistentvolumes", volume_name)
                if pv is None:
                    return False
                if not pv_node_affinity_matches(pv, labels):
                    raise BindingError(f'binding volumes: pv "{volume_name}" node affinity doesn\'t match '
                                       f'node "{node_name}"')
            if not is_claim_fully_bound(pvc):
                return False
        return True


def pv_storage_class_name(pv: dict) -> str:
    """BindingInfo.StorageClassName: spec.storageClassName only (not the beta annotation)."""
    return (pv.get("spec") or {}).get("storageClassName") or ""


def _rv_int(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _round_half_away(total: int, count: int) -> int:
    """math.Round(total / count) for non-negative totals."""
    return int(math.floor(total / count + 0.5))


# -- queueing hints (True: the event may make the pod schedulable) -----------------------------

def _claim_names(pod: dict) -> set[str]:
    name = (pod.get("metadata") or {}).get("name", "")
    names = set()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            names.add(volume["persistentVolumeClaim"].get("claimName", ""))
        elif volume.get("ephemeral") is not None:
            names.add(f"{name}-{volume.get('name', '')}")
    return names


def _after_claim_of_pod_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    pod = pod_info.raw
    claim = new or old or {}
    meta = claim.get("metadata") or {}
    if meta.get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    return meta.get("name") in _claim_names(pod)


def _after_csi_node_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    if old is None:
        return True
    key = MIGRATED_PLUGINS_ANNOTATION
    return ((old.get("metadata") or {}).get("annotations") or {}).get(key) != \
        (((new or {}).get("metadata") or {}).get("annotations") or {}).get(key)


def _after_csi_driver_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    pod = pod_info.raw
    name = ((new or {}).get("metadata") or {}).get("name")
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if (volume.get("csi") or {}).get("driver") != name:
            continue
        if ((old or {}).get("spec") or {}).get("storageCapacity") and \
                not ((new or {}).get("spec") or {}).get("storageCapacity"):
            return True
    return False


def _after_capacity_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    if old is None:
        return True
    new_limit = _volume_limit(new or {})
    old_limit = _volume_limit(old)
    return new_limit is not None and (old_limit is None or new_limit > old_limit)
