"""What the volume plugins share about claims and volumes (upstream's
component-helpers/storage/volume and storage/ephemeral)."""

from __future__ import annotations

import copy
from typing import Any, Iterator

from kubesched.api.node_affinity import NodeSelector
from kubesched.backend.volumes import BETA_STORAGE_CLASS_ANNOTATION, pv_storage_class
from kubesched.framework.quantity import QuantityError, int_value

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
OBJECT_NAME_FIELD = "metadata.name"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def pod_claim_volumes(pod: Any) -> Iterator[tuple[str, bool]]:
    """(claim name, is ephemeral) of each volume backed by a claim, in spec order; a generic
    ephemeral volume's claim is named <pod>-<volume> (ephemeral.VolumeClaimName)."""
    for volume in (pod.raw.get("spec") or {}).get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            yield volume["persistentVolumeClaim"].get("claimName", ""), False
        elif volume.get("ephemeral") is not None:
            yield f"{pod.name}-{volume.get('name', '')}", True


def pod_mounts_claim(pod: Any, claim: dict | None) -> bool:
    """Whether claim is one the pod names in a persistentVolumeClaim volume (same namespace
    and name): the QueueingHint of plugins that a claim's arrival may unblock."""
    meta = _meta(claim or {})
    if meta.get("namespace") != _meta(pod.raw).get("namespace"):
        return False
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") == meta.get("name")
               for v in _spec(pod.raw).get("volumes") or () if v.get("persistentVolumeClaim") is not None)


def claim_class(pvc: dict) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation, else spec.storageClassName, else ""."""
    annotations = _meta(pvc).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return _spec(pvc).get("storageClassName") or ""


def claim_key(pvc: dict) -> str:
    return f"{_meta(pvc).get('namespace', '')}/{_meta(pvc).get('name', '')}"


def is_claim_fully_bound(pvc: dict) -> bool:
    """isPVCFullyBound: the claim names its volume and the PV controller completed the bind."""
    return bool(_spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in (_meta(pvc).get("annotations") or {})


def volume_is_for_pod(pod: Any, pvc: dict) -> str | None:
    """ephemeral.VolumeIsForPod: why the claim is not the pod's own ephemeral claim, or None."""
    meta = _meta(pvc)
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    if meta.get("namespace") != pod.namespace or owner is None or owner.get("uid") != pod.uid:
        return (f"PVC {meta.get('namespace', '')}/{meta.get('name', '')} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)")
    return None


def storage_bytes(quantity: Any) -> int:
    """A storage quantity's Value() (0 when absent or malformed, as an empty Quantity)."""
    if quantity is None:
        return 0
    try:
        return int_value(quantity)
    except QuantityError:
        return 0


def claim_request(pvc: dict) -> int | None:
    """Requested storage in bytes, or None when the claim requests none."""
    requests = (_spec(pvc).get("resources") or {}).get("requests") or {}
    return storage_bytes(requests["storage"]) if "storage" in requests else None


def pv_capacity(pv: dict) -> int:
    return storage_bytes((_spec(pv).get("capacity") or {}).get("storage"))


# Parsed nodeAffinity per PV object: a PV's affinity is checked once per node per cycle. The
# cache holds the affinity dict itself, so its id() cannot be reused while cached.
_affinity_cache: dict[int, tuple[dict, NodeSelector]] = {}


def _pv_selector(pv: dict) -> NodeSelector | None:
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    hit = _affinity_cache.get(id(required))
    if hit is not None and hit[0] is required:
        return hit[1]
    if len(_affinity_cache) > 100_000:
        _affinity_cache.clear()
    selector = NodeSelector(required)
    _affinity_cache[id(required)] = (required, selector)
    return selector


def pv_node_affinity_matches(pv: dict, node_labels: dict[str, str]) -> bool:
    """CheckNodeAffinity: the PV's required node affinity against the node's labels only
    (as upstream, which builds a nameless node: matchFields see no metadata.name)."""
    selector = _pv_selector(pv)
    if selector is None:
        return True
    for term in selector.terms:
        if term.error is not None:
            return False
        if term.labels is not None and not term.labels.matches(node_labels):
            continue
        if term.fields is not None and any((value == "") != is_in for _key, is_in, value in term.fields):
            continue
        return True
    return False


def topology_terms_match(terms: list[dict] | None, labels: dict[str, str]) -> bool:
    """MatchTopologySelectorTerms (StorageClass allowedTopologies): no terms match all."""
    if not terms:
        return True
    for term in terms:
        expressions = term.get("matchLabelExpressions") or ()
        if not expressions:
            continue
        if all(labels.get(e.get("key", "")) in (e.get("values") or ()) for e in expressions):
            return True
    return False


def is_volume_bound_to_claim(pv: dict, pvc: dict) -> bool:
    ref = _spec(pv).get("claimRef")
    if ref is None:
        return False
    meta = _meta(pvc)
    if ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def _access_modes_fit(pvc: dict, pv: dict) -> bool:
    offered = set(_spec(pv).get("accessModes") or ())
    return all(mode in offered for mode in _spec(pvc).get("accessModes") or ())


def find_matching_volume(pvc: dict, pvs: list[dict], node_labels: dict[str, str] | None,
                         excluded: set[str], claim_selector: Any = None) -> dict | None:
    """FindMatchingVolume for delay binding: the PV pre-bound to the claim if its affinity
    fits the node, else the smallest Available PV of the claim's class, mode, access modes,
    selector and size whose affinity fits the node. (VolumeAttributesClass is on in 1.37.)"""
    requested = claim_request(pvc) or 0
    requested_class = claim_class(pvc)
    claim_spec = _spec(pvc)
    claim_mode = claim_spec.get("volumeMode") or "Filesystem"
    claim_vac = claim_spec.get("volumeAttributesClassName") or ""
    smallest: dict | None = None
    smallest_size = 0
    for pv in pvs:
        name = _meta(pv).get("name", "")
        if name in excluded:
            continue
        spec = _spec(pv)
        if spec.get("claimRef") is not None and not is_volume_bound_to_claim(pv, pvc):
            continue
        size = pv_capacity(pv)
        if size < requested:
            continue
        if (spec.get("volumeMode") or "Filesystem") != claim_mode:
            continue
        if (spec.get("volumeAttributesClassName") or "") != claim_vac:
            continue
        if _meta(pv).get("deletionTimestamp"):
            continue
        affinity_fits = node_labels is None or pv_node_affinity_matches(pv, node_labels)
        if is_volume_bound_to_claim(pv, pvc):
            return pv if affinity_fits else None
        if node_labels is None:
            continue  # delay binding without a node: only pre-bound volumes count
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if claim_selector is not None and not claim_selector.matches(_meta(pv).get("labels") or {}):
            continue
        if pv_storage_class(pv) != requested_class:
            continue
        if not affinity_fits:
            continue
        if not _access_modes_fit(pvc, pv):
            continue
        if smallest is None or smallest_size > size:
            smallest, smallest_size = pv, size
    return smallest


def bind_volume_to_claim(pv: dict, pvc: dict) -> tuple[dict, bool]:
    """GetBindVolumeToClaim: a copy of pv whose claimRef names pvc (and bound-by-controller
    set when the scheduler made the choice); dirty when anything changed."""
    set_by_controller = not is_volume_bound_to_claim(pv, pvc)
    clone = copy.deepcopy(pv)
    dirty = False
    ref = _spec(pv).get("claimRef")
    meta = _meta(pvc)
    if ref is None or (ref.get("name"), ref.get("namespace"), ref.get("uid")) != \
            (meta.get("name"), meta.get("namespace"), meta.get("uid")):
        clone.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta.get("namespace"),
            "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        dirty = True
    annotations = clone.setdefault("metadata", {}).setdefault("annotations", {})
    if set_by_controller and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return clone, dirty
