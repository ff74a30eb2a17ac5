"""VolumeZone, NodeVolumeLimits and VolumeRestrictions with claims (storage caches filled
as the informers would)."""

import pytest
from plugin_builders import FakeHandle, code_and_reasons, make_node, make_pod, place
from volume_builders import IMMEDIATE, claim_volume, make_class, make_pv, make_pvc

from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from kubesched.plugins.volume_restrictions import ERR_REASON_RWOP_CONFLICT, VolumeRestrictions
from kubesched.plugins.volume_zone import ERR_REASON_CONFLICT, VolumeZone

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
ZONE, BETA_ZONE, REGION = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone",
                           "topology.kubernetes.io/region")


def handle_with(*pairs, nodes=()):
    handle = FakeHandle(nodes)
    handle.add("storageclasses", make_class("wait"), make_class("now", mode=IMMEDIATE),
               make_class("csi", provisioner="csi.example.com"))
    for resource, obj in pairs:
        handle.add(resource, obj)
    return handle


def run(plugin, pod, nodes):
    state = CycleState()
    _unused, status = plugin.pre_filter(state, pod, nodes)
    if status is not None:
        return status, None
    return None, {n.name: code_and_reasons(plugin.filter(state, pod, n)) for n in nodes}


# -- VolumeZone -------------------------------------------------------------------------------

ZONED_NODES = [make_node("z1", labels={ZONE: "us-1a", REGION: "us"}), make_node("z2", labels={BETA_ZONE: "us-1b"}),
               make_node("plain")]


@pytest.mark.parametrize("pv_labels, fits", [
    ({ZONE: "us-1a"}, {"z1", "plain"}),
    ({BETA_ZONE: "us-1b"}, {"z2", "plain"}),
    ({ZONE: "us-1a__us-1c"}, {"z1", "plain"}),   # several zones joined by "__"
    ({BETA_ZONE: "us-1a__us-1b"}, {"z1", "z2", "plain"}),
    ({ZONE: "us-1b"}, {"plain"}),  # a GA key on the PV is not looked up as the node's beta key
    ({BETA_ZONE: "us-1a"}, {"z1", "plain"}),           # beta key on the PV, GA key on the node
    ({REGION: "eu"}, {"plain"}),
])
def test_volume_zone(pv_labels, fits):
    handle = handle_with(("persistentvolumeclaims", make_pvc("data", bound=True, volume_name="pv", storage_class="now")),
                         ("persistentvolumes", make_pv("pv", labels=pv_labels, storage_class="now")))
    _status, by_node = run(VolumeZone(None, handle), make_pod(volumes=[claim_volume("data")]), ZONED_NODES)
    assert {n for n, r in by_node.items() if r is None} == fits
    assert {r for r in by_node.values() if r is not None} <= {(UU, (ERR_REASON_CONFLICT,))}


@pytest.mark.parametrize("claim, objects, want", [
    (make_pvc("data", storage_class="wait"), (), Code.SKIP),  # WaitForFirstConsumer: VolumeBinding's job
    (make_pvc("data", storage_class="now"), (), (UU, ("PersistentVolume had no name",))),
    (make_pvc("data", storage_class=None), (), (UU, ("PersistentVolumeClaim had no pv name and storageClass name",))),
    (make_pvc("data", storage_class="gone"), (), (UU, ('storageclass.storage.k8s.io "gone" not found',))),
    (make_pvc("data", volume_name="missing", bound=True), (), (UU, ('persistentvolume "missing" not found',))),
    (None, (), (UU, ('persistentvolumeclaim "data" not found',))),
])
def test_volume_zone_pre_filter(claim, objects, want):
    handle = handle_with(*(() if claim is None else (("persistentvolumeclaims", claim),)), *objects)
    status, _unused = run(VolumeZone(None, handle), make_pod(volumes=[claim_volume("data")]), ZONED_NODES)
    assert (status.code if want == Code.SKIP else code_and_reasons(status)) == want


def test_volume_zone_skips_ephemeral_volumes_pods_without_claims_and_unparsable_zones():
    handle = handle_with(("persistentvolumeclaims", make_pvc("data", bound=True, volume_name="pv", storage_class="now")),
                         ("persistentvolumes", make_pv("pv", labels={ZONE: "us-1a__"}, storage_class="now")))
    plugin = VolumeZone(None, handle)
    for volumes in (None, [{"name": "e", "ephemeral": {}}], [claim_volume("data")]):
        assert plugin.pre_filter(CycleState(), make_pod(volumes=volumes), [])[1].is_skip()


# -- NodeVolumeLimits ---------------------------------------------------------------------------

def csi_node(name, count=None, driver="csi.example.com"):
    drivers = [{"name": driver, "nodeID": name, **({"allocatable": {"count": count}} if count is not None else {})}]
    return ("csinodes", {"metadata": {"name": name}, "spec": {"drivers": drivers}})


def csi_pv(name, handle_id):
    return ("persistentvolumes", make_pv(name, storage_class="csi", phase="Bound",
                                         csi={"driver": "csi.example.com", "volumeHandle": handle_id}))


def bound_claim(name, pv):
    return ("persistentvolumeclaims", make_pvc(name, bound=True, volume_name=pv, storage_class="csi"))


def test_node_volume_limits_counts_new_and_attached_volumes():
    existing = make_pod("existing", volumes=[claim_volume("used")])
    nodes = [place(make_node("full"), existing), make_node("free"), make_node("nolimit")]
    handle = handle_with(csi_node("full", 1), csi_node("free", 1), csi_node("nolimit"),
                         bound_claim("used", "pv-used"), csi_pv("pv-used", "h-used"),
                         bound_claim("new", "pv-new"), csi_pv("pv-new", "h-new"))
    _status, by_node = run(NodeVolumeLimits(None, handle), make_pod(volumes=[claim_volume("new")]), nodes)
    assert by_node == {"full": (Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)), "free": None,
                       "nolimit": None}
    # The same volume already on the node is not counted twice.
    _status, by_node = run(NodeVolumeLimits(None, handle), make_pod(volumes=[claim_volume("used")]), nodes)
    assert by_node["full"] is None


def test_node_volume_limits_counts_a_nodes_volumes_again_when_its_pods_or_the_storage_objects_change():
    existing = make_pod("existing", volumes=[claim_volume("used")])
    full = place(make_node("full"), existing)
    handle = handle_with(csi_node("full", 1), bound_claim("used", "pv-used"), csi_pv("pv-used", "h-used"),
                         bound_claim("new", "pv-new"), csi_pv("pv-new", "h-new"))
    plugin = NodeVolumeLimits(None, handle)  # one instance, as in a running scheduler
    pod = make_pod(volumes=[claim_volume("new")])
    exceeded = (Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))
    assert run(plugin, pod, [full])[1] == {"full": exceeded}
    assert run(plugin, pod, [full])[1] == {"full": exceeded}
    # The placed pod's volume is no longer a CSI one: nothing attached counts.
    handle.add("persistentvolumes", make_pv("pv-used", storage_class="csi", phase="Bound"))
    assert run(plugin, pod, [full])[1] == {"full": None}
    # A new NodeInfo (the snapshot's, after a pod change) is counted afresh.
    handle.add(*csi_pv("pv-used", "h-used"))
    assert run(plugin, pod, [full])[1] == {"full": exceeded}
    assert run(plugin, pod, [make_node("full")])[1] == {"full": None}


def test_node_volume_limits_counts_unbound_claims_by_provisioner_and_volume_attachments():
    nodes = [make_node("n"), make_node("m")]
    handle = handle_with(csi_node("n", 2), csi_node("m", 2), csi_pv("pv-att", "h-att"),
                         ("persistentvolumeclaims", make_pvc("a", storage_class="csi")),
                         ("persistentvolumeclaims", make_pvc("b", storage_class="csi")))
    pod = make_pod(volumes=[claim_volume("a", "x"), claim_volume("b", "y")])
    assert run(NodeVolumeLimits(None, handle), pod, nodes)[1] == {"n": None, "m": None}
    handle.add("volumeattachments", {"metadata": {"name": "va"}, "spec": {
        "attacher": "csi.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv-att"}}})
    assert run(NodeVolumeLimits(None, handle), pod, nodes)[1] == {
        "n": (Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)), "m": None}


def test_node_volume_limits_missing_claim_and_missing_driver():
    nodes = [make_node("n")]
    handle = handle_with(bound_claim("data", "pv"), csi_pv("pv", "h"))
    status, by_node = run(NodeVolumeLimits(None, handle), make_pod(volumes=[claim_volume("gone")]), nodes)
    assert by_node == {"n": (UU, ('looking up PVC default/gone: persistentvolumeclaim "gone" not found',))}
    handle.add("csidrivers", {"metadata": {"name": "csi.example.com"}, "spec": {"preventPodSchedulingIfMissing": True}})
    _status, by_node = run(NodeVolumeLimits(None, handle), make_pod(volumes=[claim_volume("data")]), nodes)
    assert by_node == {"n": (Code.UNSCHEDULABLE, ("csi.example.com CSI driver is not installed on the node",))}
    handle.add(*csi_node("n"))
    assert run(NodeVolumeLimits(None, handle), make_pod(volumes=[claim_volume("data")]), nodes)[1] == {"n": None}


def test_node_volume_limits_skips_inline_csi_and_plain_volumes():
    pod = make_pod(volumes=[{"name": "s", "csi": {"driver": "secrets-store.csi.k8s.io"}}, {"name": "e", "emptyDir": {}}])
    assert NodeVolumeLimits(None, handle_with()).pre_filter(CycleState(), pod, [])[1].is_skip()


# -- VolumeRestrictions: ReadWriteOncePod ---------------------------------------------------------

def test_read_write_once_pod_claim_in_use_blocks_every_node():
    rwop = ("persistentvolumeclaims", make_pvc("solo", access_modes=("ReadWriteOncePod",)))
    holder = make_pod("holder", volumes=[claim_volume("solo")])
    nodes = [place(make_node("a"), holder), make_node("b")]
    plugin = VolumeRestrictions(None, handle_with(rwop))
    _status, by_node = run(plugin, make_pod("second", volumes=[claim_volume("solo")]), nodes)
    assert by_node == {"a": (Code.UNSCHEDULABLE, (ERR_REASON_RWOP_CONFLICT,)),
                       "b": (Code.UNSCHEDULABLE, (ERR_REASON_RWOP_CONFLICT,))}
    # Preemption's dry run removes the holder: the claim is free again.
    state = CycleState()
    pod = make_pod("second", volumes=[claim_volume("solo")])
    plugin.pre_filter(state, pod, nodes)
    plugin.remove_pod(state, pod, holder, nodes[0])
    assert plugin.filter(state, pod, nodes[1]) is None


def test_read_write_once_pod_unused_or_other_namespace_skips():
    rwop = ("persistentvolumeclaims", make_pvc("solo", access_modes=("ReadWriteOncePod",)))
    other_ns = make_pod("holder", namespace="elsewhere", volumes=[claim_volume("solo")])
    plugin = VolumeRestrictions(None, handle_with(rwop))
    nodes = [place(make_node("a"), other_ns)]
    assert plugin.pre_filter(CycleState(), make_pod(volumes=[claim_volume("solo")]), nodes)[1].is_skip()


def test_volume_restrictions_missing_claim():
    status, _unused = run(VolumeRestrictions(None, handle_with()), make_pod(volumes=[claim_volume("gone")]), [])
    assert code_and_reasons(status) == (UU, ('persistentvolumeclaim "gone" not found',))
