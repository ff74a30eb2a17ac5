import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, run_filter

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code
from kubesched.plugins.node_declared_features import NodeDeclaredFeatures, required_features

REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match Pod's required features",))
RESTART_ALL = {"containers": [{"name": "c", "restartPolicyRules": [
    {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]}
HOST_USERNS = {"hostNetwork": True, "hostUsers": False}
BIND_OPTS = {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/x",
                                                            "bindMountOptions": ["ro"]}]}]}


@pytest.mark.parametrize("spec, want", [
    ({}, frozenset()),
    (RESTART_ALL, {"RestartAllContainersOnContainerExits"}),
    (HOST_USERNS, {"UserNamespacesHostNetworkSupport"}),
    ({"hostNetwork": True}, frozenset()),
    (BIND_OPTS, {"VolumeBindMountOptions"}),
])
def test_required_features(spec, want):
    assert required_features(make_pod(spec=spec)) == want


@pytest.mark.parametrize("spec, declared, want", [
    ({}, None, None),
    (RESTART_ALL, None, REJECTED),
    (RESTART_ALL, ["RestartAllContainersOnContainerExits"], None),
    (dict(HOST_USERNS, **BIND_OPTS), ["VolumeBindMountOptions"], REJECTED),
    (dict(HOST_USERNS, **BIND_OPTS), ["VolumeBindMountOptions", "UserNamespacesHostNetworkSupport"], None),
])
def test_filter(spec, declared, want):
    node = make_node("n", declared_features=declared)
    assert code_and_reasons(run_filter(NodeDeclaredFeatures(None, Handle()), make_pod(spec=spec), node)) == want
