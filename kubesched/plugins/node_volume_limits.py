"""NodeVolumeLimits: the node's CSI attach limits must hold the pod's new volumes
(upstream nodevolumelimits/csi.go).

Each claim-backed volume counts against its CSI driver: the bound PV's driver and volume
handle, or, for a claim still unbound, its StorageClass provisioner with a handle unique to
the claim. Volumes already used by the node's pods or attached to it (VolumeAttachments)
count once; the limit per driver is the node's CSINode allocatable count. A driver whose
CSIDriver sets preventPodSchedulingIfMissing must be on the node's CSINode (VolumeLimitScaling,
beta and on in 1.37).

In-tree volumes of the plugins whose CSI migration v1.37 has locked on (awsElasticBlockStore,
gcePersistentDisk, azureDisk, cinder, portworxVolume), as a PV's source, a pod's inline volume
or a StorageClass provisioner, count against the CSI driver they migrated to, under the handle
csi-translation-lib gives them, on any node that has a CSINode (helper/csi_translation.py).
"""

from __future__ import annotations

import secrets

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import VOLUMES_KEY, Fragments, volumes_signer
from kubesched.framework.snapshot import NodeMemos
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.csi_translation import (
    IN_TREE_SOURCE_KEYS,
    TranslationError,
    inline_driver_and_handle,
    migration_counted,
    plugin_by_name,
    plugin_of_pv,
    plugin_of_volume,
    pv_driver_and_handle,
)
from kubesched.plugins.helper.volumes import claim_class, volume_is_for_pod
from kubesched.plugins.volume_binding import SKIP

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
# The volume sources this plugin counts: claims, generic ephemeral volumes, migrated in-tree ones.
_COUNTED_SOURCES = IN_TREE_SOURCE_KEYS | {"persistentVolumeClaim", "ephemeral"}
_PRE_FILTER_STATE_KEY = "PreFilterNodeVolumeLimits"


class _PreFilterState:
    """What Filter reads for every node of one cycle, gathered once:
    - attachments: per node, the CSI volumes VolumeAttachments attach there;
    - pod_volumes: the pod's attachable volumes (or the lookup error), keyed by whether the
      node has a CSINode, the only way they depend on the node (migration_counted);
    - attached: the plugin's memo of each node's attached volumes (NodeMemos)."""

    __slots__ = ("attachments", "pod_volumes", "attached")

    def __init__(self, attachments: dict[str, dict[str, str]], attached: dict[str, tuple]):
        self.attachments = attachments
        self.pod_volumes: dict[bool, tuple[dict[str, str], Exception | None]] = {}
        self.attached = attached


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool):
        super().__init__(message)
        self.not_found = not_found


class NodeVolumeLimits:
    name = "NodeVolumeLimits"
    INFORMERS = ("persistentvolumes", "persistentvolumeclaims", "storageclasses", "csinodes",
                 "csidrivers", "volumeattachments")

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.volumes = handle.volumes
        # Unbound claims get a handle no real volume has (upstream: a random 32-char prefix).
        self._volume_id_prefix = secrets.token_hex(16)
        self._exceeded = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        # node name -> (the generation of the node's NodeInfo, whether it has a CSINode, the
        # storage objects' generation, the volumes its pods attach): every change to a node's
        # pods takes a new generation, so an entry holds while the node, the CSINode's presence
        # and every storage object are as they were.
        self._attached_memos = NodeMemos()

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(VOLUMES_KEY, volumes_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent(EventResource.CSI_NODE, ActionType.ADD),
            ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE, hint=_after_csi_node_update),
            ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
            ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, hint=_after_claim_added),
            ClusterEvent(EventResource.VOLUME_ATTACHMENT, ActionType.DELETE, hint=_after_attachment_deleted),
        ]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        for volume in (pod.raw.get("spec") or {}).get("volumes") or ():  # hot path: most pods mount a token
            for key in volume:
                if key in _COUNTED_SOURCES:
                    state.write(_PRE_FILTER_STATE_KEY, self._pre_filter_state())
                    return None, None
        return None, SKIP  # nothing this plugin counts

    def _pre_filter_state(self) -> _PreFilterState:
        return _PreFilterState(self._attachments_by_node(), self._attached_memos.table(self.handle.snapshot()))

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        csi_node = self.volumes.csi_node(node_info.name)
        # Built here when the profile disables this plugin's PreFilter.
        cycle: _PreFilterState = state.get(_PRE_FILTER_STATE_KEY) or self._pre_filter_state()
        # Worked out at most twice per cycle, not per node (see _PreFilterState).
        found = cycle.pod_volumes.get(csi_node is not None)
        if found is None:
            volumes: dict[str, str] = {}
            try:
                self._attachable_volumes(pod, csi_node, volumes, new_pod=True)
                found = (volumes, None)
            except _LookupError as err:
                found = (volumes, err)
            cycle.pod_volumes[csi_node is not None] = found
        if found[1] is not None:
            if found[1].not_found:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(found[1]))
            return Status(Code.ERROR, str(found[1]))
        if not found[0]:
            return None
        new_volumes = dict(found[0])
        for driver in set(new_volumes.values()):
            if not self._driver_on_node(driver, csi_node):
                return Status(Code.UNSCHEDULABLE, f"{driver} CSI driver is not installed on the node")
        limits = _volume_limits(csi_node)
        if not limits:
            return None
        generation = self.volumes.generation
        entry = cycle.attached.get(node_info.name)
        if entry is not None and entry[0] == node_info.generation and entry[1] == (csi_node is not None) \
                and entry[2] == generation:
            attached = entry[3]
        else:
            attached = {}
            for existing in node_info.pods.values():
                try:
                    self._attachable_volumes(existing, csi_node, attached, new_pod=False)
                except _LookupError as err:
                    return Status(Code.ERROR, str(err))
            cycle.attached[node_info.name] = (node_info.generation, csi_node is not None, generation, attached)
        attached_count: dict[str, int] = {}
        for unique_name, driver in attached.items():
            new_volumes.pop(unique_name, None)
            attached_count[driver] = attached_count.get(driver, 0) + 1
        for unique_name, driver in cycle.attachments.get(node_info.name, {}).items():
            if unique_name not in attached:
                attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new_volumes.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, count in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + count > limit:
                return self._exceeded
        return None

    def _attachable_volumes(self, pod: PodInfo, csi_node: dict | None, result: dict[str, str], new_pod: bool) -> None:
        """filterAttachableVolumes: each volume's "<driver>/<handle>" -> driver, in spec order."""
        for volume in (pod.raw.get("spec") or {}).get("volumes") or ():
            if volume.get("persistentVolumeClaim") is not None:
                name, ephemeral = volume["persistentVolumeClaim"].get("claimName", ""), False
            elif volume.get("ephemeral") is not None:
                name, ephemeral = f"{pod.name}-{volume.get('name', '')}", True
            else:
                self._attachable_inline_volume(volume, csi_node, result)
                continue
            if not name:
                raise _LookupError("PersistentVolumeClaim had no name", False)
            pvc = self.volumes.get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                if new_pod:
                    raise _LookupError(f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" '
                                       "not found", True)
                continue
            if ephemeral:
                problem = volume_is_for_pod(pod, pvc)
                if problem:
                    raise _LookupError(problem, False)
            driver, handle = self._driver_info(pvc, csi_node)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver

    @staticmethod
    def _attachable_inline_volume(volume: dict, csi_node: dict | None, result: dict[str, str]) -> None:
        """checkAttachableInlineVolume: an in-tree inline volume counts once migrated."""
        plugin = plugin_of_volume(volume)
        if plugin is None or not migration_counted(plugin, csi_node):
            return
        try:
            driver, handle = inline_driver_and_handle(volume, plugin)
        except TranslationError as err:
            raise _LookupError(f"converting volume({volume.get('name', '')}) from inline to csi: {err}", False) from None
        if handle:
            result[f"{driver}/{handle}"] = driver

    def _driver_info(self, pvc: dict, csi_node: dict | None) -> tuple[str, str]:
        pv_name = (pvc.get("spec") or {}).get("volumeName")
        pv = self.volumes.get("persistentvolumes", pv_name) if pv_name else None
        if pv is None:
            class_name = claim_class(pvc)
            storage_class = self.volumes.storage_class(class_name) if class_name else None
            if storage_class is None:
                return "", ""
            meta = pvc.get("metadata") or {}
            handle = f"{self._volume_id_prefix}-{meta.get('namespace', '')}/{meta.get('name', '')}"
            provisioner = storage_class.get("provisioner") or ""
            plugin = plugin_by_name(provisioner)
            if plugin is None:
                return provisioner, handle
            return (plugin.driver, handle) if migration_counted(plugin, csi_node) else ("", "")
        csi = (pv.get("spec") or {}).get("csi")
        if csi is not None:
            return csi.get("driver") or "", csi.get("volumeHandle") or ""
        plugin = plugin_of_pv(pv)
        if plugin is None or not migration_counted(plugin, csi_node):
            return "", ""
        try:
            return pv_driver_and_handle(pv, plugin)
        except TranslationError:
            return "", ""  # upstream logs it and does not count the volume

    def _driver_on_node(self, driver: str, csi_node: dict | None) -> bool:
        csi_driver = self.volumes.csi_driver(driver)
        if csi_driver is None or not (csi_driver.get("spec") or {}).get("preventPodSchedulingIfMissing"):
            return True
        if csi_node is None:
            return False
        return any(d.get("name") == driver for d in (csi_node.get("spec") or {}).get("drivers") or ())

    def _attachments_by_node(self) -> dict[str, dict[str, str]]:
        """Per node, the CSI volumes VolumeAttachments attach there ("<attacher>/<handle>" ->
        attacher). Gathered once per cycle: upstream lists every attachment for each node it
        filters, which here cost the attachments times the nodes."""
        by_node: dict[str, dict[str, str]] = {}
        for attachment in self.volumes.volume_attachments():
            spec = attachment.get("spec") or {}
            attacher = spec.get("attacher")
            pv_name = (spec.get("source") or {}).get("persistentVolumeName")
            if not spec.get("nodeName") or not attacher or not pv_name:
                continue
            pv = self.volumes.get("persistentvolumes", pv_name)
            csi = ((pv or {}).get("spec") or {}).get("csi")
            if csi is not None:
                by_node.setdefault(spec["nodeName"], {})[f"{attacher}/{csi.get('volumeHandle', '')}"] = attacher
        return by_node


def _volume_limits(csi_node: dict | None) -> dict[str, int]:
    limits: dict[str, int] = {}
    for driver in ((csi_node or {}).get("spec") or {}).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None:
            limits[driver.get("name", "")] = int(count)
    return limits


def _after_csi_node_update(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    before = _volume_limits(old)
    for name, count in _volume_limits(new).items():
        if count > before.get(name, 0):
            return True
    return False


def _after_claim_added(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    pod = pod_info.raw
    meta = (new or {}).get("metadata") or {}
    pod_meta = pod.get("metadata") or {}
    if meta.get("namespace") != pod_meta.get("namespace"):
        return False
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            name = volume["persistentVolumeClaim"].get("claimName")
        elif volume.get("ephemeral") is not None:
            name = f"{pod_meta.get('name', '')}-{volume.get('name', '')}"
        else:
            continue
        if name == meta.get("name"):
            return True
    return False


def _after_attachment_deleted(pod_info: PodInfo, old: dict | None, new: dict | None) -> bool:
    pod = pod_info.raw
    return any(v.get("persistentVolumeClaim") is not None for v in (pod.get("spec") or {}).get("volumes") or ())
