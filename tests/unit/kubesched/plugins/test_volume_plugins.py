"""The volume and DRA plugins without claims (skipped), VolumeRestrictions' inline disks, DRA's honest rejection."""

import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, place, run_filter

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState, PluginArgsError
from kubesched.plugins.dynamic_resources import DynamicResources
from kubesched.plugins.node_volume_limits import NodeVolumeLimits
from kubesched.plugins.volume_binding import VolumeBinding
from kubesched.plugins.volume_restrictions import VolumeRestrictions
from kubesched.plugins.volume_zone import VolumeZone

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
PLAIN_VOLUMES = [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "tmp", "emptyDir": {}},
                 {"name": "tok", "projected": {"sources": []}}, {"name": "h", "hostPath": {"path": "/x"}}]
VOLUME_PLUGINS = [VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone]


@pytest.mark.parametrize("plugin", VOLUME_PLUGINS + [DynamicResources])
@pytest.mark.parametrize("volumes", [None, PLAIN_VOLUMES])
def test_pods_without_claims_skip(plugin, volumes):
    _unused, status = plugin(None, Handle()).pre_filter(CycleState(), make_pod(volumes=volumes), [])
    assert status.is_skip()


def test_dynamic_resources_pod_whose_claim_does_not_exist_is_unschedulable():
    pod = make_pod(spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]})
    _unused, status = DynamicResources(None, Handle()).pre_filter(CycleState(), pod, [])
    assert code_and_reasons(status) == (UU, ('resourceclaim.resource.k8s.io "gpu-claim" not found',))


def disk(kind, **source):
    return [{"name": "d", kind: source}]


DISK_CONFLICT = (Code.UNSCHEDULABLE, ("node(s) had no available disk",))


@pytest.mark.parametrize("existing, incoming, want", [
    (disk("gcePersistentDisk", pdName="foo"), disk("gcePersistentDisk", pdName="foo"), DISK_CONFLICT),
    (disk("gcePersistentDisk", pdName="foo"), disk("gcePersistentDisk", pdName="bar"), None),
    (disk("gcePersistentDisk", pdName="foo", readOnly=True), disk("gcePersistentDisk", pdName="foo", readOnly=True),
     None),
    (disk("awsElasticBlockStore", volumeID="foo"), disk("awsElasticBlockStore", volumeID="foo"), DISK_CONFLICT),
    (disk("awsElasticBlockStore", volumeID="foo", readOnly=True),
     disk("awsElasticBlockStore", volumeID="foo", readOnly=True), DISK_CONFLICT),
    (disk("awsElasticBlockStore", volumeID="foo"), disk("awsElasticBlockStore", volumeID="bar"), None),
    (disk("iscsi", iqn="iqn.x", targetPortal="p", lun=0), disk("iscsi", iqn="iqn.x", targetPortal="p", lun=0),
     DISK_CONFLICT),
    (disk("iscsi", iqn="iqn.x", readOnly=True), disk("iscsi", iqn="iqn.x", readOnly=True), None),
    (disk("rbd", monitors=["a", "b"], pool="p", image="i"), disk("rbd", monitors=["b", "c"], pool="p", image="i"),
     DISK_CONFLICT),
    (disk("rbd", monitors=["a"], pool="p", image="i"), disk("rbd", monitors=["b"], pool="p", image="i"), None),
    (disk("rbd", monitors=["a"], pool="p", image="i", readOnly=True),
     disk("rbd", monitors=["a"], pool="p", image="i", readOnly=True), None),
])
def test_volume_restrictions_disk_conflicts(existing, incoming, want):
    node = place(make_node("n"), make_pod("existing", volumes=existing))
    assert code_and_reasons(run_filter(VolumeRestrictions(None, Handle()), make_pod(volumes=incoming), node)) == want


def test_volume_binding_args():
    assert VolumeBinding({"bindTimeoutSeconds": 30}, Handle()).bind_timeout_seconds == 30
    assert VolumeBinding(None, Handle()).bind_timeout_seconds == 600
    with pytest.raises(PluginArgsError) as err:
        VolumeBinding({"bindTimeoutSeconds": -1}, Handle())
    assert err.value.field == "bindTimeoutSeconds"


@pytest.mark.parametrize("args, field, message", [
    ({"shape": [{"utilization": 50, "score": 11}]}, "shape[0].score", "not in valid range [0, 10]"),
    ({"shape": []}, "shape", "at least one point must be specified"),
    ({"bindTimeout": 1}, "bindTimeout", "unknown field"),
])
def test_volume_binding_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        VolumeBinding(args, Handle())
    assert err.value.field == field and message in err.value.message


def test_volume_binding_default_shape():
    assert VolumeBinding(None, Handle()).shape == [(0, 10), (100, 0)]
    assert VolumeBinding({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}, Handle()).shape == [
        (0, 0), (100, 10)]


@pytest.mark.parametrize("args, field, message", [
    ({"filterTimeout": "-1s"}, "filterTimeout", "must be zero or positive"),
    ({"bindingTimeout": "500ms"}, "bindingTimeout", "must be at least 1 second"),
    ({"filterTimeout": "ten seconds"}, "filterTimeout", "invalid duration"),
])
def test_dynamic_resources_args_validation(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        DynamicResources(args, Handle())
    assert err.value.field == field and message in err.value.message


def test_dynamic_resources_default_args():
    plugin = DynamicResources({"filterTimeout": "0s", "bindingTimeout": "1m"}, Handle())
    assert (plugin.filter_timeout, plugin.binding_timeout) == (0.0, 60.0)
