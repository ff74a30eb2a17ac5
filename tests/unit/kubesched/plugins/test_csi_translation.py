"""In-tree volumes translated to CSI (plugins/helper/csi_translation.py) and counted by
NodeVolumeLimits, as k8s.io/csi-translation-lib v0.37.1 and nodevolumelimits/csi.go do; the
cases come from their own tests (aws_ebs_test.go, gce_pd_test.go, in_tree_volume_test.go,
csi_test.go's "in-tree volume migration" and "mixed volumes" tables)."""

import pytest
from plugin_builders import FakeHandle, code_and_reasons, make_node, make_pod, place
from volume_builders import make_class, make_pv, make_pvc

from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.helper import csi_translation as csi
from kubesched.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits

EBS = csi.plugin_by_name("kubernetes.io/aws-ebs")
GCE = csi.plugin_by_name("kubernetes.io/gce-pd")
AZURE_DISK = csi.plugin_by_name("kubernetes.io/azure-disk")


@pytest.mark.parametrize("volume_id, handle", [
    ("aws://us-east-1a/vol-1234567890abcdef0", "vol-1234567890abcdef0"),
    ("aws:///vol-1234567890abcdef0", "vol-1234567890abcdef0"),
    ("vol-1234567890abcdef0", "vol-1234567890abcdef0"),
    ("csi-kubernetes.io/aws-ebs-1", "csi-kubernetes.io/aws-ebs-1"),  # a bare id is kept as it is
])
def test_ebs_volume_id_to_handle(volume_id, handle):
    pv = {"spec": {"awsElasticBlockStore": {"volumeID": volume_id}}}
    assert csi.pv_driver_and_handle(pv, EBS) == ("ebs.csi.aws.com", handle)


def test_ebs_volume_id_with_a_bad_path_does_not_translate():
    with pytest.raises(csi.TranslationError, match="Invalid format for AWS volume"):
        csi.pv_driver_and_handle({"spec": {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/disk-1"}}}, EBS)


@pytest.mark.parametrize("labels, handle", [
    ({}, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
    ({"topology.kubernetes.io/zone": "us-central1-a"}, "projects/UNSPECIFIED/zones/us-central1-a/disks/pd"),
    ({"failure-domain.beta.kubernetes.io/zone": "us-central1-a__us-central1-c"},
     "projects/UNSPECIFIED/regions/us-central1/disks/pd"),
])
def test_gce_pd_handle_follows_the_zone_labels(labels, handle):
    pv = {"metadata": {"labels": labels}, "spec": {"gcePersistentDisk": {"pdName": "pd"}}}
    assert csi.pv_driver_and_handle(pv, GCE) == ("pd.csi.storage.gke.io", handle)


def test_gce_pd_in_zones_of_two_regions_does_not_translate():
    pv = {"metadata": {"labels": {"topology.kubernetes.io/zone": "us-central1-a__europe-west1-b"}},
          "spec": {"gcePersistentDisk": {"pdName": "pd"}}}
    with pytest.raises(csi.TranslationError, match="multiple or no regions"):
        csi.pv_driver_and_handle(pv, GCE)


def test_azure_disk_that_is_not_managed_does_not_translate():
    assert csi.pv_driver_and_handle({"spec": {"azureDisk": {"diskURI": "uri"}}}, AZURE_DISK) == \
        ("disk.csi.azure.com", "uri")
    with pytest.raises(csi.TranslationError, match="not supported in csi migration"):
        csi.pv_driver_and_handle({"spec": {"azureDisk": {"diskURI": "uri", "kind": "Dedicated"}}}, AZURE_DISK)


def _terms(pv):
    return [[(e["key"], e["values"]) for e in t["matchExpressions"]]
            for t in pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]]


def _affinity(*requirements):
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": k, "operator": "In", "values": list(v)} for k, v in requirements]}]}}


@pytest.mark.parametrize("labels, affinity, want", [
    # The GA zone in nodeAffinity is renamed to the driver's key.
    ({}, _affinity(("topology.kubernetes.io/zone", ["us-east-1a"])),
     [[("topology.ebs.csi.aws.com/zone", ["us-east-1a"])]]),
    # The beta zone and region: the zone is renamed, the region becomes GA.
    ({}, _affinity(("failure-domain.beta.kubernetes.io/zone", ["us-east-1a"]),
                   ("failure-domain.beta.kubernetes.io/region", ["us-east-1"])),
     [[("topology.ebs.csi.aws.com/zone", ["us-east-1a"]), ("topology.kubernetes.io/region", ["us-east-1"])]]),
    # No zone in nodeAffinity: the PV's zone label becomes a term.
    ({"topology.kubernetes.io/zone": "us-east-1a__us-east-1b"}, None,
     [[("topology.ebs.csi.aws.com/zone", ["us-east-1a", "us-east-1b"])]]),
    # ... added to each existing term.
    ({"failure-domain.beta.kubernetes.io/zone": "us-east-1a"}, _affinity(("kubernetes.io/hostname", ["n1"])),
     [[("kubernetes.io/hostname", ["n1"]), ("topology.ebs.csi.aws.com/zone", ["us-east-1a"])]]),
])
def test_topology_moves_to_the_drivers_zone_key(labels, affinity, want):
    pv = {"metadata": {"name": "pv", "labels": labels}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}}
    if affinity:
        pv["spec"]["nodeAffinity"] = affinity
    translated = csi.translated_pv(pv, EBS)
    assert _terms(translated) == want
    assert pv["spec"].get("nodeAffinity") == affinity  # the cached PV is left as it was


@pytest.mark.parametrize("volume, plugin", [
    ({"awsElasticBlockStore": {"volumeID": "v"}}, "kubernetes.io/aws-ebs"),
    ({"gcePersistentDisk": {"pdName": "p"}}, "kubernetes.io/gce-pd"),
    ({"azureDisk": {"diskURI": "u", "diskName": "d"}}, "kubernetes.io/azure-disk"),
    ({"cinder": {"volumeID": "v"}}, "kubernetes.io/cinder"),
    ({"portworxVolume": {"volumeID": "v"}}, "kubernetes.io/portworx-volume"),
    ({"vsphereVolume": {"volumePath": "p"}}, "kubernetes.io/vsphere-volume"),
    ({"azureFile": {"shareName": "s", "secretName": "x"}}, "kubernetes.io/azure-file"),
    ({"hostPath": {"path": "/tmp"}}, None),
    ({"csi": {"driver": "d"}}, None),
])
def test_which_volumes_are_migratable(volume, plugin):
    found = csi.plugin_of_volume(volume)
    assert (found.plugin_name if found else None) == plugin


def test_migration_is_counted_with_any_csinode_and_checked_for_binding_only_when_annotated():
    bare = {"metadata": {"name": "n"}}
    migrated = "kubernetes.io/gce-pd,kubernetes.io/aws-ebs"
    annotated = {"metadata": {"name": "n", "annotations": {csi.MIGRATED_PLUGINS_ANNOTATION: migrated}}}
    assert not csi.migration_counted(EBS, None)
    assert csi.migration_counted(EBS, bare)
    assert not csi.migration_counted(csi.plugin_by_name("kubernetes.io/vsphere-volume"), bare)
    assert not csi.migrated_on_node(EBS, bare)
    assert csi.migrated_on_node(EBS, annotated)
    assert not csi.migrated_on_node(AZURE_DISK, annotated)


# -- NodeVolumeLimits: upstream's TestCSILimits, in-tree migration and mixed volumes -----------

IN_TREE, EBS_CSI, HOSTPATH = "kubernetes.io/aws-ebs", "ebs.csi.aws.com", "kubernetes.io/hostpath"


def _pv(driver, j):
    name = f"csi-{driver}-{j}"
    if driver == IN_TREE:
        return make_pv(name, storage_class="", phase="Bound") | {"spec": {"awsElasticBlockStore": {"volumeID": name}}}
    if driver == HOSTPATH:
        return make_pv(name, storage_class="", phase="Bound") | {"spec": {"hostPath": {"path": "/tmp"}}}
    return make_pv(name, storage_class="", phase="Bound", csi={"driver": driver, "volumeHandle": name})


def _handle(drivers, limit_source, max_vols, nodes):
    handle = FakeHandle(nodes)
    handle.add("storageclasses", make_class("csi-sc", provisioner=drivers[0]))
    for driver in drivers:
        for j in range(4):
            handle.add("persistentvolumes", _pv(driver, j))
            handle.add("persistentvolumeclaims", make_pvc(f"csi-{driver}-{j}", volume_name=f"csi-{driver}-{j}",
                                                          bound=True, storage_class=None))
    handle.add("persistentvolumeclaims", make_pvc("csi-4", storage_class="csi-sc"))
    if limit_source:
        handle.add("csinodes", {"metadata": {"name": "n"}, "spec": {"drivers": [
            {"name": d, "nodeID": "n", **({"allocatable": {"count": max_vols}} if limit_source == "csinode" else {})}
            for d in drivers]}})
    return handle


def _claims(*names):
    return make_pod(volumes=[{"name": f"v{i}", "persistentVolumeClaim": {"claimName": n}} for i, n in enumerate(names)])


def _inline(volume_id):
    return make_pod(volumes=[{"name": "inline", "awsElasticBlockStore": {"volumeID": volume_id}}])


PODS = {
    "inTreeOneVolPod": lambda: _claims(f"csi-{IN_TREE}-0"),
    "inTreeTwoVolPod": lambda: _claims(f"csi-{IN_TREE}-1", f"csi-{IN_TREE}-2"),
    "csiEBSOneVolPod": lambda: _claims(f"csi-{EBS_CSI}-0"),
    "csiEBSTwoVolPod": lambda: _claims(f"csi-{EBS_CSI}-1", f"csi-{EBS_CSI}-2"),
    "pendingVolumePod": lambda: _claims("csi-4"),
    "inTreeNonMigratableOneVolPod": lambda: _claims(f"csi-{HOSTPATH}-0"),
    "inTreeInlineVolPod": lambda: _inline("aws-inline1"),
    "inTreeInlineVolPodWithSameCSIVolumeID": lambda: _inline(f"csi-{EBS_CSI}-1"),
}
EXCEEDED = (Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))


@pytest.mark.parametrize("new, existing, max_vols, drivers, limit_source, want", [
    pytest.param("inTreeOneVolPod", ["inTreeTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode", EXCEEDED,
                 id="should count in-tree volumes if migration is enabled"),
    pytest.param("inTreeInlineVolPod", ["inTreeTwoVolPod"], 0, [IN_TREE, EBS_CSI], "", None, id="nil csi node"),
    pytest.param("pendingVolumePod", ["inTreeTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode", EXCEEDED,
                 id="should count unbound in-tree volumes if migration is enabled"),
    pytest.param("inTreeOneVolPod", ["inTreeTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode-with-no-limit", None,
                 id="should not limit pod if volume used does not report limits"),
    pytest.param("inTreeNonMigratableOneVolPod", ["csiEBSTwoVolPod"], 2, [HOSTPATH, EBS_CSI], "csinode", None,
                 id="should not count non-migratable in-tree volumes"),
    pytest.param("inTreeInlineVolPod", ["inTreeTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode", EXCEEDED,
                 id="should count in-tree inline volumes if migration is enabled"),
    pytest.param("inTreeOneVolPod", ["csiEBSTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode", EXCEEDED,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)"),
    pytest.param("inTreeInlineVolPod", ["csiEBSTwoVolPod", "inTreeOneVolPod"], 3, [IN_TREE, EBS_CSI], "csinode",
                 EXCEEDED, id="should count in-tree, inline and csi volumes if migration is enabled"),
    pytest.param("inTreeInlineVolPodWithSameCSIVolumeID", ["csiEBSTwoVolPod", "inTreeOneVolPod"], 3,
                 [IN_TREE, EBS_CSI], "csinode", None,
                 id="should not count in-tree, inline and csi volumes if migration is enabled"),
    pytest.param("csiEBSOneVolPod", ["inTreeTwoVolPod"], 2, [IN_TREE, EBS_CSI], "csinode", EXCEEDED,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)"),
])
def test_node_volume_limits_counts_migrated_in_tree_volumes(new, existing, max_vols, drivers, limit_source, want):
    node = place(make_node("n"), *[PODS[name]() for name in existing])
    plugin = NodeVolumeLimits(None, _handle(drivers, limit_source, max_vols, [node]))
    pod, state = PODS[new](), CycleState()
    _unused, status = plugin.pre_filter(state, pod, [node])
    assert status is None
    assert code_and_reasons(plugin.filter(state, pod, node)) == want


def test_an_inline_volume_that_does_not_translate_is_an_error():
    node = make_node("n")
    plugin = NodeVolumeLimits(None, _handle([IN_TREE, EBS_CSI], "csinode", 2, [node]))
    pod, state = _inline("aws://zone/not-a-volume"), CycleState()
    plugin.pre_filter(state, pod, [node])
    assert code_and_reasons(plugin.filter(state, pod, node)) == (
        Code.ERROR, ("converting volume(inline) from inline to csi: Invalid format for AWS volume "
                     "(aws://zone/not-a-volume)",))


# -- VolumeBinding: a bound in-tree PV is checked in CSI topology on nodes that migrated it ------

def test_bound_in_tree_pv_is_checked_in_the_drivers_topology_where_the_csinode_migrated_it():
    from volume_builders import claim_volume

    from kubesched.plugins.volume_binding import ERR_REASON_NODE_CONFLICT, VolumeBinding

    ebs_zone = "topology.ebs.csi.aws.com/zone"
    # Node "ga" carries the GA zone only, "csi" the driver's zone only; both annotate the migration
    # but for different plugins.
    nodes = [make_node("ga", labels={"topology.kubernetes.io/zone": "z1"}),
             make_node("csi", labels={ebs_zone: "z1"})]
    handle = FakeHandle(nodes)
    handle.add("storageclasses", make_class("now", mode="Immediate"))
    pv = make_pv("ebs", storage_class="now", phase="Bound", affinity={"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}]}})
    pv["spec"]["awsElasticBlockStore"] = {"volumeID": "vol-1"}
    handle.add("persistentvolumes", pv)
    handle.add("persistentvolumeclaims", make_pvc("data", bound=True, volume_name="ebs", storage_class="now"))
    pod = make_pod(volumes=[claim_volume("data")])

    def filtered(migrated_on):
        for node in ("ga", "csi"):
            plugins = "kubernetes.io/aws-ebs" if node in migrated_on else "kubernetes.io/gce-pd"
            handle.add("csinodes", {"metadata": {"name": node, "annotations": {csi.MIGRATED_PLUGINS_ANNOTATION: plugins}},
                                    "spec": {"drivers": []}})
        plugin, state = VolumeBinding(None, handle), CycleState()
        assert plugin.pre_filter(state, pod, nodes)[1] is None
        return {n.name: code_and_reasons(plugin.filter(state, pod, n)) for n in nodes}

    conflict = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT,))
    assert filtered(migrated_on=()) == {"ga": None, "csi": conflict}
    assert filtered(migrated_on=("ga", "csi")) == {"ga": conflict, "csi": None}
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == \
        "topology.kubernetes.io/zone"  # the cache's PV is never rewritten
