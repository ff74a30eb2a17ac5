from plugin_builders import make_pod

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, Code, EventResource
from kubesched.plugins.scheduling_gates import SchedulingGates


def test_pod_without_gates_is_enqueued():
    assert SchedulingGates(None, Handle()).pre_enqueue(make_pod()) is None


def test_gated_pod_waits_with_upstream_message():
    pod = make_pod(scheduling_gates=[{"name": "foo"}, {"name": "bar"}])
    status = SchedulingGates(None, Handle()).pre_enqueue(pod)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ["waiting for scheduling gates: [foo bar]"]
    assert status.plugin == "SchedulingGates"


def test_requeued_when_gates_are_removed():
    (event,) = SchedulingGates(None, Handle()).events_to_register()
    assert event.resource == EventResource.UNSCHEDULED_POD
    assert event.action & ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
