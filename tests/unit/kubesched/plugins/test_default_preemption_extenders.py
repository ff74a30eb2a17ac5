"""DefaultPreemption with extenders (upstream callExtenders: the test extender keeps or drops
candidate nodes, answering with meta victims) and with a victim waiting in Permit (preempted
in memory, as upstream's executor does, instead of deleted)."""

import json

import pytest
from plugin_builders import FakeHandle, make_node, make_pod, place

from kubesched.config.types import ExtenderConfig
from kubesched.extender import HTTPExtender
from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.default_preemption import DefaultPreemption
from kubesched.plugins.node_resources_fit import NodeResourcesFit


def setup(extenders):
    nodes = [place(make_node(name, cpu="2", memory="1Gi", pods=10),
                   make_pod(f"{name}-victim", priority=1, reqs=[{"cpu": "2"}], uid=f"uid-{name}"))
             for name in ("keep", "drop")]
    handle = FakeHandle(nodes)
    handle.filters = [NodeResourcesFit(None, handle)]
    handle.extenders = extenders
    plugin = DefaultPreemption(None, handle)
    plugin.random_offset = lambda n: 0
    return plugin, handle


def preempt(plugin, handle):
    pod = make_pod("hi", priority=10, reqs=[{"cpu": "1"}])
    state = CycleState()
    assert handle.run_pre_filters(state, pod) is None
    statuses = {n.name: handle.run_filter_plugins_with_nominated_pods(state, pod, n)
                for n in handle.snapshot().node_info_list}
    return plugin.post_filter(state, pod, statuses)


@pytest.mark.parametrize("node_cache_capable", [False, True])
def test_the_extender_narrows_the_candidates(serve, node_cache_capable):
    url, log = serve("--reject", "drop")
    ext = HTTPExtender(ExtenderConfig(url_prefix=url, preempt_verb="preempt", node_cache_capable=node_cache_capable))
    plugin, handle = setup([ext])
    nominated, status = preempt(plugin, handle)
    assert (nominated, status.code) == ("keep", Code.SUCCESS)
    assert handle.client.deleted() == ["keep-victim"]
    [sent] = [json.loads(line) for line in log.read_text().splitlines()]
    assert sent["verb"] == "preempt" and sent["victim_nodes"] == ["drop", "keep"]


def test_a_failing_preempt_extender_fails_preemption_unless_ignorable(serve):
    url, _log = serve("--misbehave", "preempt=garbage")
    plugin, handle = setup([HTTPExtender(ExtenderConfig(url_prefix=url, preempt_verb="preempt"))])
    nominated, status = preempt(plugin, handle)
    assert nominated is None and status.code == Code.ERROR
    assert status.message() == "preemption: invalid character '<' looking for beginning of value"
    plugin, handle = setup([HTTPExtender(ExtenderConfig(url_prefix=url, preempt_verb="preempt", ignorable=True))])
    nominated, status = preempt(plugin, handle)
    assert status.code == Code.SUCCESS and nominated in ("keep", "drop")


def test_an_extender_that_drops_every_candidate_leaves_none(serve):
    url, _log = serve("--reject", "keep", "--reject", "drop")
    plugin, handle = setup([HTTPExtender(ExtenderConfig(url_prefix=url, preempt_verb="preempt"))])
    nominated, status = preempt(plugin, handle)
    assert nominated is None and status.code == Code.UNSCHEDULABLE
    assert status.message() == "preemption: no candidate node for preemption"
    assert not handle.client.deleted()


def test_a_waiting_victim_is_preempted_in_memory_not_deleted():
    from kubesched.framework.waiting_pods import WaitingPod, permit_outcome

    plugin, handle = setup([])
    victim = handle.snapshot().get("keep").pods["uid-keep"]
    waiting = {"uid-keep": WaitingPod(victim, {"Gang": 30})}
    handle.get_waiting_pod = waiting.get
    state = CycleState()
    pod = make_pod("hi", priority=10, reqs=[{"cpu": "1"}])
    assert handle.run_pre_filters(state, pod) is None
    statuses = {"keep": handle.run_filter_plugins_with_nominated_pods(state, pod, handle.snapshot().get("keep"))}
    nominated, status = plugin.post_filter(state, pod, statuses)
    assert (nominated, status.code) == ("keep", Code.SUCCESS)
    assert not handle.client.deleted()
    outcome = permit_outcome(waiting["uid-keep"].status())
    assert (outcome.code, outcome.message()) == (Code.ERROR, "waiting on permit for pod: preempted")
    assert [e[2] for e in handle.event_recorder.events] == ["Preempted"]
    assert handle.event_recorder.events[0][4].endswith("on node keep (in kube-scheduler memory).")
