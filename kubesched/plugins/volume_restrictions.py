"""VolumeRestrictions: volumes that cannot be shared must not already be in use
(upstream volumerestrictions/volume_restrictions.go).

Inline disks: a GCE PD may be shared only read-only by every user; an AWS EBS volume ID
never; an iSCSI IQN only read-only; a Ceph RBD image (overlapping monitors, same pool and
image) only read-only. Claims: a PersistentVolumeClaim with the ReadWriteOncePod access
mode may be used by one pod only, so while any scheduled pod uses it, no node fits.
"""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import VOLUMES_KEY, Fragments, volumes_signer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.volumes import pod_mounts_claim
from kubesched.plugins.volume_binding import SKIP

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                            "already in-use by another pod")
_RESTRICTED_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _conflict(volume: dict, existing: dict) -> bool:
    disk, other = volume.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
    if disk is not None and other is not None:
        if disk.get("pdName") == other.get("pdName") and not (disk.get("readOnly") and other.get("readOnly")):
            return True
    ebs, other = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
    if ebs is not None and other is not None and ebs.get("volumeID") == other.get("volumeID"):
        return True
    iscsi, other = volume.get("iscsi"), existing.get("iscsi")
    if iscsi is not None and other is not None:
        if iscsi.get("iqn") == other.get("iqn") and not (iscsi.get("readOnly") and other.get("readOnly")):
            return True
    rbd, other = volume.get("rbd"), existing.get("rbd")
    if rbd is not None and other is not None:
        shared_monitor = bool(set(rbd.get("monitors") or ()) & set(other.get("monitors") or ()))
        if (shared_monitor and rbd.get("pool", "rbd") == other.get("pool", "rbd")
                and rbd.get("image") == other.get("image") and not (rbd.get("readOnly") and other.get("readOnly"))):
            return True
    return False


def restricted_volumes(pod: PodInfo) -> list[dict]:
    return [v for v in (pod.raw.get("spec") or {}).get("volumes") or ()
            if any(v.get(source) is not None for source in _RESTRICTED_SOURCES)]


class _PreFilterState:
    __slots__ = ("rwop_claims", "conflicts", "volumes")

    def __init__(self, rwop_claims: frozenset[str], conflicts: int, volumes: list[dict]):
        self.rwop_claims = rwop_claims
        self.conflicts = conflicts
        self.volumes = volumes

    def clone(self) -> "_PreFilterState":
        return _PreFilterState(self.rwop_claims, self.conflicts, self.volumes)

    def update_with_pod(self, pod: PodInfo, multiplier: int) -> None:
        self.conflicts += multiplier * sum(1 for name in _claim_names(pod) if name in self.rwop_claims)


def _claim_names(pod: PodInfo) -> list[str]:
    return [v["persistentVolumeClaim"].get("claimName", "")
            for v in (pod.raw.get("spec") or {}).get("volumes") or () if v.get("persistentVolumeClaim") is not None]


class VolumeRestrictions:
    name = "VolumeRestrictions"
    INFORMERS = ("persistentvolumeclaims",)
    _STATE_KEY = "PreFilterVolumeRestrictions"

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.volumes = handle.volumes
        self._rejected = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT, plugin=self.name)
        self._rwop_rejected = Status(Code.UNSCHEDULABLE, ERR_REASON_RWOP_CONFLICT, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(VOLUMES_KEY, volumes_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                ClusterEvent(EventResource.NODE, ActionType.ADD),
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, hint=_after_claim_added)]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        if not (pod.raw.get("spec") or {}).get("volumes"):
            return None, SKIP  # hot path: most pods mount nothing this plugin checks
        claims = _claim_names(pod)
        volumes = restricted_volumes(pod)
        if not claims and not volumes:
            return None, SKIP
        rwop: set[str] = set()
        for name in claims:
            pvc = self.volumes.get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found')
            if "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or ()):
                rwop.add(name)
        conflicts = 0
        if rwop:
            used = {name for node in nodes for other in node.pods.values() if other.namespace == pod.namespace
                    for name in _claim_names(other)}
            conflicts = len(rwop & used)
        if not volumes and conflicts == 0:
            return None, SKIP
        state.write(self._STATE_KEY, _PreFilterState(frozenset(rwop), conflicts, volumes))
        return None, None

    def pre_filter_extensions(self) -> "VolumeRestrictions":
        return self

    def add_pod(self, state, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        s: _PreFilterState | None = state.get(self._STATE_KEY)
        if s is not None and pod_to_add.namespace == pod_to_schedule.namespace:
            s.update_with_pod(pod_to_add, 1)
        return None

    def remove_pod(self, state, pod_to_schedule: PodInfo, pod_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        s: _PreFilterState | None = state.get(self._STATE_KEY)
        if s is not None and pod_to_remove.namespace == pod_to_schedule.namespace:
            s.update_with_pod(pod_to_remove, -1)
        return None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        s: _PreFilterState | None = state.get(self._STATE_KEY)
        volumes = s.volumes if s is not None else restricted_volumes(pod)
        for volume in volumes:
            for existing_pod in node_info.pods.values():
                for existing in (existing_pod.raw.get("spec") or {}).get("volumes") or ():
                    if _conflict(volume, existing):
                        return self._rejected
        if s is not None and s.conflicts > 0:
            return self._rwop_rejected
        return None


def _after_claim_added(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    return pod_mounts_claim(pod_info, new)
