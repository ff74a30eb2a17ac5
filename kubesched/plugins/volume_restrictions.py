"""VolumeRestrictions: inline disks that cannot be shared must not already be in use on the node.

GCE PD may be shared only read-only by every user; an AWS EBS volume ID never; an iSCSI
IQN only read-only; a Ceph RBD image (overlapping monitors, same pool and image) only
read-only. Upstream also enforces ReadWriteOncePod claims; kubesched keeps no claim
cache, so a pod with claims is rejected with a reason saying so (see VolumeBinding).
"""

from __future__ import annotations

from typing import Any

from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.volumes import pod_volume_claims, unsupported_volume_claims_reason

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
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


class VolumeRestrictions:
    name = "VolumeRestrictions"
    _STATE_KEY = "PreFilterVolumeRestrictions"

    def __init__(self, args: dict | None = None, handle: Any = None):
        self.handle = handle
        self._rejected = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT, plugin=self.name)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                ClusterEvent(EventResource.NODE, ActionType.ADD)]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        claims = pod_volume_claims(pod)
        if claims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, unsupported_volume_claims_reason(claims),
                                plugin=self.name)
        volumes = restricted_volumes(pod)
        if not volumes:
            return None, Status(Code.SKIP)
        state.write(self._STATE_KEY, volumes)
        return None, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        volumes = state.get(self._STATE_KEY)
        if volumes is None:
            volumes = restricted_volumes(pod)
        for volume in volumes:
            for existing_pod in node_info.pods.values():
                for existing in (existing_pod.raw.get("spec") or {}).get("volumes") or ():
                    if _conflict(volume, existing):
                        return self._rejected
        return None
