"""The informer registry: which informers a configuration starts, the order their handlers run
in, the one dispatcher to the queue, a cluster loaded once without watching, and resources the
API server does not serve."""

import io
import random
import sys
import threading
import time

import pytest
from kubesched_fakes import CatchUpProbe, FakeClient, node_raw, pod_raw

from kubesched import klog
from kubesched.backend.informers import RESOURCES, InformerRegistry
from kubesched.backend.queue import ACTIVE, BACKOFF, GATED
from kubesched.backend.volumes import STORAGE_RESOURCES
from kubesched.client import ApiError
from kubesched.config import parse_config
from kubesched.framework.interface import EventResource
from kubesched.framework.types import PodInfo
from kubesched.scheduler import Scheduler

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
POD_AND_NODE_EVENTS = (EventResource.POD, EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD,
                       EventResource.NODE, EventResource.WILDCARD)
DRA = ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules")


def scheduler(disabled=(), client=None):
    profile = {"plugins": {"multiPoint": {"disabled": [{"name": n} for n in disabled]}}}
    return Scheduler(parse_config({**BASE, "profiles": [profile]}), client, rng=random.Random(1))


def test_the_default_profile_watches_what_its_plugins_read():
    assert set(scheduler().informers.requested) == {
        "nodes", "pods", "namespaces", "services", "replicationcontrollers", "replicasets", "statefulsets",
        "poddisruptionbudgets", *STORAGE_RESOURCES, *DRA}


@pytest.mark.parametrize("plugin, resources", [
    ("DefaultPreemption", {"poddisruptionbudgets"}),
    ("InterPodAffinity", {"namespaces"}),
    ("PodTopologySpread", {"services", "replicationcontrollers", "replicasets", "statefulsets"}),
    ("DynamicResources", set(DRA)),
])
def test_a_disabled_plugins_informers_are_not_started(plugin, resources):
    requested = set(scheduler().informers.requested) - set(scheduler([plugin]).informers.requested)
    assert requested == resources


def test_every_cluster_event_resource_has_an_informer():
    """Whatever a plugin registers events for can be watched (upstream's addAllEventHandlers):
    each EventResource but the pod and node ones has its entry in RESOURCES."""
    for resource in EventResource:
        if resource not in POD_AND_NODE_EVENTS:
            assert [name for name, spec in RESOURCES.items() if spec.event == resource and not spec.as_update], resource


def moves(sched):
    """The labels of the cluster events the queue is told of, from now on."""
    labels = []
    move = sched.queue.move_all_to_active_or_backoff
    sched.queue.move_all_to_active_or_backoff = lambda event, **kw: labels.append(event.label) or move(event, **kw)
    return labels


def test_only_the_changes_plugins_registered_reach_the_queue():
    sched = scheduler()
    labels = moves(sched)
    sched.informers.put("namespaces", {"metadata": {"name": "team", "resourceVersion": "1"}})
    driver = {"metadata": {"name": "csi.example.com", "resourceVersion": "1"}, "spec": {}}
    sched.informers.put("csidrivers", driver)  # VolumeBinding registers CSIDriver updates only
    assert labels == []
    sched.informers.put("csidrivers", {**driver, "metadata": {**driver["metadata"], "resourceVersion": "2"}})
    sched.informers.put("persistentvolumeclaims", {"metadata": {"name": "c", "namespace": "default",
                                                                "resourceVersion": "1"}})
    assert labels == ["CSIDriverUpdate", "PersistentVolumeClaimAdd"]


def unschedulable(sched, raw, *plugins):
    sched.on_pod_add(raw)
    popped = sched.queue.pop(timeout=0)
    assert popped is not None
    popped.unschedulable_plugins = set(plugins)
    sched.queue.add_unschedulable_if_not_present(popped)
    return popped


def claim(name, rv="1"):
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": rv},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def test_the_dra_manager_sees_a_claim_before_the_queue_asks_the_plugins_hint():
    """A pod held in PreEnqueue for its missing claim is let through by the claim's add: the
    hint reads the claim from the manager, which the registry updates first."""
    sched = scheduler()
    raw = pod_raw("gpu-user")
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    sched.on_pod_add(raw)
    uid = raw["metadata"]["uid"]
    assert sched.queue.where(uid) == GATED  # by DynamicResources' PreEnqueue
    sched.informers.put("resourceclaims", claim("someone-elses"))
    assert sched.queue.where(uid) == GATED
    sched.informers.put("resourceclaims", claim("mine"))
    assert sched.queue.where(uid) == ACTIVE


def test_a_device_taint_rule_is_a_resource_slice_update_to_the_queue():
    sched = scheduler()
    pod = unschedulable(sched, pod_raw("p"), "DynamicResources")
    labels = moves(sched)
    rule = {"metadata": {"name": "r", "resourceVersion": "1"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    sched.informers.put("devicetaintrules", rule)
    assert labels == ["ResourceSliceUpdate"] and sched.queue.where(pod.uid) == BACKOFF
    sched.informers.remove("devicetaintrules", rule)  # a rule removed frees devices too
    assert labels == ["ResourceSliceUpdate", "ResourceSliceUpdate"]


def test_load_lists_each_requested_resource_once_nodes_and_pods_last():
    node, pod = node_raw("n1"), pod_raw("p")
    client = FakeClient(listings={"/api/v1/nodes": {"metadata": {"resourceVersion": "5"}, "items": [node]},
                                  "/api/v1/pods": {"metadata": {"resourceVersion": "5"}, "items": [pod]}})
    sched = scheduler(client=client)
    sched.informers.load()
    listed = [path for verb, path, _body in client.calls if verb == "list"]
    assert sorted(listed) == sorted(RESOURCES[r].path for r in sched.informers.requested)
    assert listed[-2:] == ["/api/v1/nodes", "/api/v1/pods"]
    assert not [verb for verb, _path, _body in client.calls if verb == "watch"]
    assert sched.cache.node_count() == 1 and "n1" in sched.cache.nodes
    assert sched.informers.get("pods", "default/p")["metadata"]["name"] == "p"
    assert sched.queue.where(PodInfo(pod).uid) == ACTIVE
    assert sched.caches_synced()


def test_a_resource_the_api_server_does_not_serve_is_skipped_and_not_waited_for():
    client = FakeClient()
    client.fail("GET", ApiError(404, "NotFound", "the server could not find the requested resource"),
                match="devicetaintrules")
    informers = InformerRegistry(client)
    informers.request("devicetaintrules")
    informers.request("nodes")
    informers.load()
    assert informers.unserved == {"devicetaintrules"}
    assert "/apis/resource.k8s.io/v1/devicetaintrules" not in [path for verb, path, _b in client.calls if verb == "list"]
    assert informers.synced()


def test_an_unknown_resource_is_refused_by_name():
    with pytest.raises(KeyError, match="no informer for 'widgets'"):
        InformerRegistry().informer("widgets")


def behind_by_one_change():
    informers = InformerRegistry(FakeClient())
    for name in ("nodes", "pods"):
        informers.request(name).resource_version = "30"
    change = {"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": "35"}}}
    return informers, CatchUpProbe("40", {RESOURCES["pods"].path: [change]})


def test_a_new_leader_waits_until_each_informer_applied_what_it_owes():
    informers, probe = behind_by_one_change()
    pods = informers.informer("pods")
    threading.Timer(0.2, pods.apply_event, ("MODIFIED", pod_raw("p"), "35")).start()
    started = time.monotonic()
    assert informers.catch_up(probe, threading.Event(), timeout=5) == []
    assert time.monotonic() - started >= 0.2 and pods.resource_version == "35"


def test_an_informer_behind_is_told_to_retry_now_and_one_that_is_not_is_left_alone():
    informers, probe = behind_by_one_change()
    informers.catch_up(probe, threading.Event(), timeout=0.1)
    assert informers.informer("pods").wake.is_set() and not informers.informer("nodes").wake.is_set()


def test_an_informer_still_behind_at_the_deadline_is_named_and_the_wait_ends():
    informers, probe = behind_by_one_change()
    started = time.monotonic()
    assert informers.catch_up(probe, threading.Event(), timeout=0.3) == ["pods"]
    assert time.monotonic() - started < 2


def test_a_resource_the_probe_cannot_read_is_not_waited_for():
    informers, probe = behind_by_one_change()
    probe.broken = ("pods",)
    log, before = io.StringIO(), klog.verbosity()
    klog.set_verbosity(0, log)
    try:
        assert informers.catch_up(probe, threading.Event(), timeout=5) == []
    finally:
        klog.set_verbosity(before, sys.stderr)
    assert 'Cannot tell what the cache still lacks; going on" resource="pods"' in log.getvalue()
    assert "connection refused" in log.getvalue()


def test_a_new_leader_logs_what_it_waited_for_and_what_is_still_behind():
    sched = scheduler(client=FakeClient())
    for name in sched.informers.requested:
        sched.informers.informer(name).resource_version = "40"
    sched.informers.informer("pods").resource_version = "30"
    change = {"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": "35"}}}
    probe = CatchUpProbe("40", {RESOURCES["pods"].path: [change]})
    log, before = io.StringIO(), klog.verbosity()
    klog.set_verbosity(0, log)
    try:
        sched.catch_up(probe, threading.Event(), timeout=0.2)
        stopping = threading.Event()
        stopping.set()
        sched.catch_up(probe, stopping, timeout=5)  # shutting down: nothing to say
        sched.informers.informer("pods").resource_version = "35"
        sched.catch_up(probe, threading.Event(), timeout=5)
    finally:
        klog.set_verbosity(before, sys.stderr)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert 'Caches still behind the API server; scheduling from them" resources="pods"' in lines[0]
    assert '"Caches caught up with the API server"' in lines[1]
