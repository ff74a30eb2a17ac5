"""VolumeZone: a pod's bound PersistentVolumes must be in the node's zone and region
(upstream volumezone/volume_zone.go).

The zone and region labels of each claim's PV (GA or beta keys, several zones joined by
"__") must match the node's label of the same key (or its GA equivalent). Claims of a
WaitForFirstConsumer class that are not bound yet are VolumeBinding's concern; a node
without any topology label accepts every volume. Generic ephemeral volumes are not checked,
as upstream.
"""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import VOLUMES_KEY, Fragments, volumes_signer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.volumes import WAIT_FOR_FIRST_CONSUMER, claim_class, pod_mounts_claim
from kubesched.plugins.volume_binding import SKIP

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
STATE_KEY = "PreFilterVolumeZone"


def pv_topologies(pv: dict) -> list[tuple[str, frozenset[str]]]:
    """(label key, allowed values) for each topology label of the PV."""
    labels = (pv.get("metadata") or {}).get("labels") or {}
    result = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            zones = [z.strip() for z in labels[key].split("__")]
            if all(zones):  # LabelZonesToSet refuses an empty element; upstream skips the label
                result.append((key, frozenset(zones)))
    return result


def _claim_names(pod: PodInfo) -> list[str]:
    return [v["persistentVolumeClaim"].get("claimName", "")
            for v in (pod.raw.get("spec") or {}).get("volumes") or () if v.get("persistentVolumeClaim") is not None]


class VolumeZone:
    name = "VolumeZone"
    INFORMERS = ("persistentvolumes", "persistentvolumeclaims", "storageclasses")

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.volumes = handle.volumes
        self._rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(VOLUMES_KEY, volumes_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD, hint=_after_storage_class_added),
            ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE,
                         hint=_after_claim_change),
            ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE,
                         hint=_after_pv_change),
        ]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        if not (pod.raw.get("spec") or {}).get("volumes"):
            return None, SKIP  # hot path
        claims = _claim_names(pod)
        if not claims:
            return None, SKIP
        topologies, status = self._pod_topologies(pod, claims)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(STATE_KEY, topologies)
        return None, None

    def _pod_topologies(self, pod: PodInfo, claims: list[str]
                        ) -> tuple[list[tuple[str, frozenset[str]]], Status | None]:
        topologies: list[tuple[str, frozenset[str]]] = []
        unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        for name in claims:
            if not name:
                return [], Status(unresolvable, "PersistentVolumeClaim had no name")
            pvc = self.volumes.get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                return [], Status(unresolvable, f'persistentvolumeclaim "{name}" not found')
            pv_name = (pvc.get("spec") or {}).get("volumeName") or ""
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return [], Status(unresolvable, "PersistentVolumeClaim had no pv name and storageClass name")
                storage_class = self.volumes.storage_class(class_name)
                if storage_class is None:
                    return [], Status(unresolvable, f'storageclass.storage.k8s.io "{class_name}" not found')
                mode = storage_class.get("volumeBindingMode")
                if mode is None:
                    return [], Status(unresolvable, f'VolumeBindingMode not set for StorageClass "{class_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return [], Status(unresolvable, "PersistentVolume had no name")
            pv = self.volumes.get("persistentvolumes", pv_name)
            if pv is None:
                return [], Status(unresolvable, f'persistentvolume "{pv_name}" not found')
            topologies += pv_topologies(pv)
        return topologies, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        topologies = state.get(STATE_KEY)
        if topologies is None:
            claims = _claim_names(pod)
            if not claims:
                return None
            topologies, status = self._pod_topologies(pod, claims)
            if status is not None:
                return status
        labels = node_info.labels
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return None
        for key, values in topologies:
            value = labels.get(key)
            if value is None:
                value = labels.get(_GA.get(key, key))
            if value is None or value not in values:
                return self._rejected
        return None


def _after_storage_class_added(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    return (new or {}).get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


def _after_claim_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    return pod_mounts_claim(pod_info, new)


def _after_pv_change(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    return old is None or pv_topologies(old) != pv_topologies(new or {})
