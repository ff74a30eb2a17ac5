import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, place, run_filter

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.node_ports import NodePorts

REJECTED = (Code.UNSCHEDULABLE, ("node(s) didn't have free ports for the requested pod ports",))


def port(host_port, protocol="TCP", host_ip=""):
    p = {"containerPort": host_port, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        p["hostIP"] = host_ip
    return p


@pytest.mark.parametrize("want_ports, used_ports, want", [
    ([], [port(8080)], None),
    ([port(8080, "UDP", "127.0.0.1")], [port(9090, "UDP", "127.0.0.1")], None),
    ([port(8080, "UDP", "127.0.0.1")], [port(8080, "UDP", "127.0.0.1")], REJECTED),
    ([port(8080, "TCP", "127.0.0.1")], [port(8080, "UDP", "127.0.0.1")], None),      # other protocol
    ([port(8080, "TCP", "127.0.0.1")], [port(8080, "TCP", "127.0.0.2")], None),      # other address
    ([port(8080, "TCP", "127.0.0.1")], [port(8080, "TCP")], REJECTED),                 # used on 0.0.0.0
    ([port(8080, "TCP")], [port(8080, "TCP", "127.0.0.1")], REJECTED),                 # want 0.0.0.0
    ([port(8080, "TCP", "0.0.0.0")], [port(8080, "UDP", "127.0.0.1")], None),
    ([port(8001, "UDP", "10.0.10.10"), port(8080)], [port(8080, "TCP", "10.0.10.10")], REJECTED),
    ([port(8080, "")], [port(8080, "TCP")], REJECTED),                                 # protocol defaults to TCP
])
def test_filter(want_ports, used_ports, want):
    node = place(make_node("n"), make_pod("existing", ports=used_ports))
    pod = make_pod(ports=want_ports) if want_ports else make_pod()
    assert code_and_reasons(run_filter(NodePorts(None, Handle()), pod, node)) == want


def test_container_port_without_host_port_is_ignored():
    node = place(make_node("n"), make_pod("existing", ports=[port(80)]))
    pod = make_pod(ports=[{"containerPort": 80}])
    _unused, status = NodePorts(None, Handle()).pre_filter(CycleState(), pod, [node])
    assert status.is_skip()


def test_only_sidecar_init_containers_hold_ports():
    spec = {"initContainers": [{"name": "init", "ports": [port(80)]},
                               {"name": "side", "restartPolicy": "Always", "ports": [port(81)]}]}
    node = place(make_node("n"), make_pod("existing", spec=spec))
    assert run_filter(NodePorts(None, Handle()), make_pod(ports=[port(80)]), node) is None
    assert code_and_reasons(run_filter(NodePorts(None, Handle()), make_pod(ports=[port(81)]), node)) == REJECTED


# Upstream's Test_isSchedulableAfterAssignedPodDeleted (nodeports/node_ports_test.go, v1.37.1).
@pytest.mark.parametrize("deleted, queue", [
    pytest.param(make_pod("other").raw, False, id="skip-queue-on-unscheduled"),
    pytest.param(make_pod("other", node_name="fake-node").raw, False, id="skip-queue-on-non-hostport"),
    pytest.param(make_pod("other", node_name="fake-node", ports=[port(8081)]).raw, False,
                 id="skip-queue-on-unrelated-hostport"),
    pytest.param(make_pod("other", node_name="fake-node", ports=[port(8080)]).raw, True,
                 id="queue-on-released-hostport"),
    pytest.param(make_pod("other", nominated="fake-node", ports=[port(8080)]).raw, True,
                 id="queue-on-nominated-pods-hostport"),
    pytest.param(make_pod("other", node_name="fake-node", ports=[port(8080, "UDP")]).raw, False,
                 id="skip-queue-on-other-protocol"),
])
def test_queueing_hint_after_assigned_pod_deleted(deleted, queue):
    pod = make_pod("p", ports=[port(8080)])
    assert NodePorts(None, Handle()).is_schedulable_after_pod_deleted(pod, deleted, None) is queue


def test_events_registered_as_upstream():
    events = {(e.resource.value, int(e.action)): e.hint is not None for e in NodePorts(None, Handle()).events_to_register()}
    assert events == {("AssignedPod", 2): True, ("Node", 1): False}
