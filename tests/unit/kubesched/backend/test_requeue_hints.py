"""Requeue as v1.37: per-plugin QueueingHints decide whether an event can help a pod that
plugin rejected; node deletes, a nominated pod's delete or un-nomination, and declaredFeatures
changes requeue the pods they can help."""

from types import SimpleNamespace

import pytest
from kubesched_fakes import FakeSort, node_raw, pod_raw

from kubesched.backend.cache import SchedulerCache
from kubesched.backend.queue import BACKOFF, UNSCHEDULABLE, Nominator, SchedulingQueue
from kubesched.eventhandlers import EventHandlers, node_scheduling_properties_change
from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.types import PodInfo
from kubesched.plugins.node_affinity import NodeAffinity
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.plugins.node_unschedulable import NodeUnschedulable
from kubesched.plugins.pod_topology_spread import PodTopologySpread
from kubesched.plugins.taint_toleration import TaintToleration


class Clock:
    now = 100.0

    def __call__(self):
        return self.now


PLUGINS = {cls.name: cls for cls in (NodeAffinity, NodeResourcesFit, NodeUnschedulable, TaintToleration)}


def plugin(name):
    return PLUGINS[name](None, Handle())


@pytest.fixture
def handlers():
    h = EventHandlers()
    h.cache = SchedulerCache()
    events = {name: plugin(name).events_to_register() for name in PLUGINS}
    events["PodTopologySpread"] = PodTopologySpread(None, Handle()).events_to_register()
    h.queue = SchedulingQueue(FakeSort(None, None).less, plugin_events=events, clock=Clock(), nominator=Nominator())
    # A profile with no pod waiting at Permit.
    h.frameworks = {"default-scheduler": SimpleNamespace(reject_waiting_pod=lambda uid: False)}
    return h


def rejected(h, raw, *plugins):
    p = PodInfo(raw)
    h.queue.add(p)
    popped = h.queue.pop(timeout=0)
    popped.unschedulable_plugins = set(plugins)
    h.queue.add_unschedulable_if_not_present(popped)
    assert h.queue.where(popped.uid) == UNSCHEDULABLE
    return popped


def test_node_add_requeues_only_pods_whose_rejector_the_node_helps(handlers):
    wants_ssd = pod_raw("wants-ssd")
    wants_ssd["spec"]["nodeSelector"] = {"disk": "ssd"}
    big = pod_raw("big", cpu="8")
    a = rejected(handlers, wants_ssd, "NodeAffinity")
    b = rejected(handlers, big, "NodeResourcesFit")
    handlers.on_node_add(node_raw("small-hdd", cpu="4"))
    assert handlers.queue.where(a.uid) == UNSCHEDULABLE  # label does not match
    assert handlers.queue.where(b.uid) == UNSCHEDULABLE  # 8 cpu do not fit in 4
    handlers.on_node_add(node_raw("big-ssd", cpu="16", labels={"disk": "ssd"}))
    assert handlers.queue.where(a.uid) == BACKOFF and handlers.queue.where(b.uid) == BACKOFF


def test_taint_update_requeues_only_when_the_pod_now_tolerates_the_node(handlers):
    p = rejected(handlers, pod_raw("p"), "TaintToleration")
    tainted = node_raw("n1", taints=[{"key": "a", "effect": "NoSchedule"}], rv="1")
    handlers.cache.add_node(tainted)
    other_taint = node_raw("n1", taints=[{"key": "b", "effect": "NoSchedule"}], rv="2")
    handlers.on_node_update(tainted, other_taint)
    assert handlers.queue.where(p.uid) == UNSCHEDULABLE
    handlers.on_node_update(other_taint, node_raw("n1", rv="3"))
    assert handlers.queue.where(p.uid) == BACKOFF


def test_uncordon_requeues_node_unschedulable_rejections(handlers):
    p = rejected(handlers, pod_raw("p"), "NodeUnschedulable")
    cordoned = node_raw("n1", rv="1")
    cordoned["spec"]["unschedulable"] = True
    handlers.cache.add_node(cordoned)
    handlers.on_node_update(cordoned, node_raw("n1", rv="2"))
    assert handlers.queue.where(p.uid) == BACKOFF


def test_node_delete_requeues_spread_rejections(handlers):
    raw = node_raw("n1")
    handlers.cache.add_node(raw)
    p = rejected(handlers, pod_raw("p"), "PodTopologySpread")
    q = rejected(handlers, pod_raw("q"), "NodeAffinity")
    handlers.on_node_delete(raw)
    assert handlers.queue.where(p.uid) == BACKOFF
    assert handlers.queue.where(q.uid) == UNSCHEDULABLE  # a node leaving never helps NodeAffinity


def test_nominated_pod_delete_requeues_lower_or_equal_priority_pods(handlers):
    low = rejected(handlers, pod_raw("low", priority=5), "NodeResourcesFit")
    high = rejected(handlers, pod_raw("high", priority=50), "NodeResourcesFit")
    nominated = pod_raw("nominated", priority=10)
    nominated["status"]["nominatedNodeName"] = "n1"
    handlers.on_pod_delete(nominated)
    assert handlers.queue.where(low.uid) == BACKOFF
    assert handlers.queue.where(high.uid) == UNSCHEDULABLE


def test_un_nomination_requeues_lower_or_equal_priority_pods(handlers):
    low = rejected(handlers, pod_raw("low", priority=10), "NodeResourcesFit")
    old = pod_raw("nominated", priority=10, uid="uid-nom")
    old["status"]["nominatedNodeName"] = "n1"
    handlers.on_pod_add(old)
    new = pod_raw("nominated", priority=10, uid="uid-nom")
    new["metadata"]["resourceVersion"] = "2"
    handlers.on_pod_update(old, new)
    assert handlers.queue.where(low.uid) == BACKOFF


def test_declared_features_change_is_a_node_update_event():
    old, new = node_raw("n1"), node_raw("n1")
    new["status"]["declaredFeatures"] = ["FeatureA"]
    assert node_scheduling_properties_change(old, new) & ActionType.UPDATE_NODE_DECLARED_FEATURE


def test_a_hint_that_raises_requeues(handlers):
    def broken(pod, old, new):
        raise RuntimeError("bug in a hint")

    handlers.queue.plugin_events["Broken"] = [ClusterEvent(EventResource.NODE, ActionType.ADD, hint=broken)]
    p = rejected(handlers, pod_raw("p"), "Broken")
    handlers.on_node_add(node_raw("n9"))
    assert handlers.queue.where(p.uid) == BACKOFF
