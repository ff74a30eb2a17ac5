"""In-tree volumes as their CSI drivers see them (k8s.io/csi-translation-lib v0.37.1), for
the two places the scheduler translates: NodeVolumeLimits counts a migrated in-tree volume
against its CSI driver's attach limit, and VolumeBinding checks a bound in-tree PV's node
affinity in the CSI driver's topology key once the node's CSINode lists the plugin as migrated.

Only what the scheduler reads is translated: the driver, the volume handle and the zone
topology. Volumes of other kinds are not migratable and stay as they are.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Callable

# CSINode annotation: the in-tree plugins whose volumes that node's CSI drivers serve.
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
MULTI_ZONE_DELIMITER = "__"
GCE_UNSPECIFIED = "UNSPECIFIED"
_AWS_VOLUME_ID = re.compile(r"^vol-[^/]*$")


class TranslationError(ValueError):
    """The in-tree volume cannot be translated (a malformed volume ID, zones of two regions)."""


def _aws_volume_handle(source: dict, labels: dict[str, str]) -> str:
    """KubernetesVolumeIDToEBSVolumeID: aws://<zone>/vol-... or a bare vol-... id."""
    volume_id = source.get("volumeID") or ""
    if not volume_id.startswith("aws://"):
        return volume_id
    path = volume_id[len("aws://"):].partition("/")[2].strip("/")
    if not _AWS_VOLUME_ID.match(path):
        raise TranslationError(f"Invalid format for AWS volume ({volume_id})")
    return path


def _gce_volume_handle(source: dict, labels: dict[str, str]) -> str:
    """projects/UNSPECIFIED/zones/<zone>/disks/<pd>, or regions/<region> for a PV in several zones."""
    zones_label = labels.get(LABEL_BETA_ZONE) or labels.get(LABEL_ZONE) or ""
    zones = zones_label.split(MULTI_ZONE_DELIMITER)
    name = source.get("pdName") or ""
    if len(zones) == 1 and zones[0]:
        return f"projects/{GCE_UNSPECIFIED}/zones/{zones[0]}/disks/{name}"
    if len(zones) > 1:
        regions = set()
        for zone in zones:
            parts = zone.split("-")
            if len(parts) != 3:
                raise TranslationError(f"zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}")
            regions.add("-".join(parts[:2]))
        if len(regions) != 1:
            raise TranslationError(f"multiple or no regions gotten from zones, got: {sorted(regions)}")
        return f"projects/{GCE_UNSPECIFIED}/regions/{regions.pop()}/disks/{name}"
    return f"projects/{GCE_UNSPECIFIED}/zones/{GCE_UNSPECIFIED}/disks/{name}"


def _inline_gce_volume_handle(source: dict, labels: dict[str, str]) -> str:
    return f"projects/{GCE_UNSPECIFIED}/zones/{GCE_UNSPECIFIED}/disks/{source.get('pdName') or ''}"


def _azure_disk_volume_handle(source: dict, labels: dict[str, str]) -> str:
    kind = source.get("kind")
    if kind is not None and kind.lower() != "managed":
        raise TranslationError(f"kind({kind}) is not supported in csi migration")
    return source.get("diskURI") or ""


def _volume_id(source: dict, labels: dict[str, str]) -> str:
    return source.get("volumeID") or ""


@dataclass(frozen=True)
class InTreePlugin:
    plugin_name: str  # the in-tree plugin, as CSINode's migrated-plugins annotation names it
    driver: str  # the CSI driver it migrated to
    source_key: str  # its volume source in a PV or pod volume
    pv_handle: Callable[[dict, dict[str, str]], str]
    inline_handle: Callable[[dict, dict[str, str]], str]
    topology_key: str = ""  # the CSI driver's zone key; "" when the translation keeps topology as it is
    # Whether v1.37's scheduler translates it at all (isCSIMigrationOn): the five plugins whose
    # migration is GA and locked on; vSphere and Azure File are translatable but never counted.
    migration_on: bool = True


IN_TREE_PLUGINS = (
    InTreePlugin("kubernetes.io/aws-ebs", "ebs.csi.aws.com", "awsElasticBlockStore", _aws_volume_handle,
                 _aws_volume_handle, "topology.ebs.csi.aws.com/zone"),
    InTreePlugin("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", "gcePersistentDisk", _gce_volume_handle,
                 _inline_gce_volume_handle, "topology.gke.io/zone"),
    InTreePlugin("kubernetes.io/azure-disk", "disk.csi.azure.com", "azureDisk", _azure_disk_volume_handle,
                 _azure_disk_volume_handle),
    InTreePlugin("kubernetes.io/cinder", "cinder.csi.openstack.org", "cinder", _volume_id, _volume_id,
                 "topology.cinder.csi.openstack.org/zone"),
    InTreePlugin("kubernetes.io/portworx-volume", "pxd.portworx.com", "portworxVolume", _volume_id, _volume_id),
    InTreePlugin("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com", "vsphereVolume",
                 lambda source, labels: source.get("volumePath") or "", lambda source, labels: "",
                 migration_on=False),
    InTreePlugin("kubernetes.io/azure-file", "file.csi.azure.com", "azureFile",
                 lambda source, labels: "", lambda source, labels: "", migration_on=False),
)
_BY_PLUGIN_NAME = {p.plugin_name: p for p in IN_TREE_PLUGINS}
_BY_SOURCE_KEY = {p.source_key: p for p in IN_TREE_PLUGINS}
# The volume source keys of in-tree plugins: a pod volume with none of them is not migratable.
IN_TREE_SOURCE_KEYS = frozenset(_BY_SOURCE_KEY)


def _plugin_of_source(source: dict) -> InTreePlugin | None:
    # Hot path: every pod's volumes (configMap, secret, projected token...) pass here; one
    # set test turns away all that are no in-tree source.
    if IN_TREE_SOURCE_KEYS.isdisjoint(source):
        return None
    return next((p for key, p in _BY_SOURCE_KEY.items() if source.get(key) is not None), None)


def plugin_of_pv(pv: dict) -> InTreePlugin | None:
    """The in-tree plugin of a PV's source (IsPVMigratable / GetInTreePluginNameFromSpec)."""
    return _plugin_of_source(pv.get("spec") or {})


def plugin_of_volume(volume: dict) -> InTreePlugin | None:
    """The in-tree plugin of a pod's inline volume (IsInlineMigratable)."""
    return _plugin_of_source(volume)


def plugin_by_name(name: str) -> InTreePlugin | None:
    """IsMigratableIntreePluginByName, for a StorageClass provisioner."""
    return _BY_PLUGIN_NAME.get(name)


def migration_counted(plugin: InTreePlugin, csi_node: dict | None) -> bool:
    """nodevolumelimits' isCSIMigrationOn: any CSINode object for the node will do in v1.37."""
    return csi_node is not None and plugin.migration_on


def migrated_on_node(plugin: InTreePlugin, csi_node: dict | None) -> bool:
    """volumebinding's isPluginMigratedToCSIOnNode: the CSINode's migrated-plugins annotation names it."""
    if csi_node is None or not plugin.migration_on:
        return False
    listed = ((csi_node.get("metadata") or {}).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return plugin.plugin_name in listed.split(",")


def pv_driver_and_handle(pv: dict, plugin: InTreePlugin) -> tuple[str, str]:
    """TranslateInTreePVToCSI's csi.driver and csi.volumeHandle; raises TranslationError."""
    spec = pv.get("spec") or {}
    labels = (pv.get("metadata") or {}).get("labels") or {}
    return plugin.driver, plugin.pv_handle(spec.get(plugin.source_key) or {}, labels)


def inline_driver_and_handle(volume: dict, plugin: InTreePlugin) -> tuple[str, str]:
    """TranslateInTreeInlineVolumeToCSI's driver and handle ("" when the plugin has no inline form)."""
    return plugin.driver, plugin.inline_handle(volume.get(plugin.source_key) or {}, {})


def translated_pv(pv: dict, plugin: InTreePlugin) -> dict:
    """The PV with its zone topology in the CSI driver's key (translateTopologyFromInTreeToCSI):
    the GA or beta zone in nodeAffinity is renamed, or, without one, the PV's zone label becomes
    a nodeAffinity term; a beta region becomes the GA region. Raises TranslationError."""
    pv_driver_and_handle(pv, plugin)  # the same failures as upstream's translation
    out = copy.deepcopy(pv)
    if not plugin.topology_key:
        return out
    spec = out.setdefault("spec", {})
    labels = (out.get("metadata") or {}).get("labels") or {}
    zone_key, region_key = _topology_label_keys(out)
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    if _values(terms, zone_key):
        _rename(terms, zone_key, plugin.topology_key)
    elif zone_key in labels:
        zones = labels[zone_key].split(MULTI_ZONE_DELIMITER)
        requirement = {"key": plugin.topology_key, "operator": "In", "values": zones}
        if not terms:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}
        else:
            for term in terms:
                term.setdefault("matchExpressions", []).append(dict(requirement, values=list(zones)))
    if region_key == LABEL_BETA_REGION and _values(terms, region_key):
        _rename(terms, region_key, LABEL_REGION)
    return out


def _topology_label_keys(pv: dict) -> tuple[str, str]:
    """getTopologyLabel: the beta keys when the PV uses them (in labels or nodeAffinity), else GA."""
    labels = (pv.get("metadata") or {}).get("labels") or {}
    terms = ((((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    if LABEL_BETA_ZONE in labels or _values(terms, LABEL_BETA_ZONE):
        return LABEL_BETA_ZONE, LABEL_BETA_REGION
    return LABEL_ZONE, LABEL_REGION


def _values(terms: list[dict], key: str) -> list[str]:
    return [v for term in terms for expr in term.get("matchExpressions") or () if expr.get("key") == key
            for v in expr.get("values") or ()]


def _rename(terms: list[dict], old: str, new: str) -> None:
    for term in terms:
        for expr in term.get("matchExpressions") or ():
            if expr.get("key") == old:
                expr["key"] = new
