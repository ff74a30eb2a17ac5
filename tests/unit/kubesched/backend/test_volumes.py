"""The storage objects: informers only for enabled volume plugins, the assume cache, the PV
class index, and storage events requeueing only the pods whose QueueingHint agrees."""

import random

from kubesched.backend.informers import InformerRegistry
from kubesched.backend.volumes import STORAGE_RESOURCES, OutOfSync, VolumeObjects
from kubesched.config import parse_config
from kubesched.framework.types import PodInfo
from kubesched.scheduler import Scheduler

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
VOLUME_PLUGINS = ["VolumeBinding", "VolumeZone", "NodeVolumeLimits", "VolumeRestrictions"]


def pv(name, rv, storage_class="fast", **spec):
    return {"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": {"storageClassName": storage_class, **spec}}


def test_pvs_are_indexed_by_class_and_follow_updates():
    informers = InformerRegistry()
    objects = VolumeObjects(informers)
    informers.put("persistentvolumes", pv("a", 1))
    informers.put("persistentvolumes", pv("b", 2, storage_class="slow"))
    assert [p["metadata"]["name"] for p in objects.pvs_of_class("fast")] == ["a"]
    informers.put("persistentvolumes", pv("a", 3, storage_class="slow"))
    assert objects.pvs_of_class("fast") == []
    assert sorted(p["metadata"]["name"] for p in objects.pvs_of_class("slow")) == ["a", "b"]
    informers.remove("persistentvolumes", pv("b", 2))
    assert [p["metadata"]["name"] for p in objects.pvs_of_class("slow")] == ["a"]


def test_assume_restore_and_expiry():
    informers = InformerRegistry()
    objects = VolumeObjects(informers)
    informers.put("persistentvolumes", pv("a", 1))
    assumed = pv("a", 1, claimRef={"name": "c"})
    objects.assume("persistentvolumes", assumed)
    assert objects.pv("a") is assumed and objects.pvs_of_class("fast") == [assumed]
    assert "claimRef" not in objects.get("persistentvolumes", "a")["spec"]  # the API object
    objects.restore("persistentvolumes", assumed)
    assert objects.pv("a")["spec"] == {"storageClassName": "fast"}
    objects.assume("persistentvolumes", assumed)
    informers.put("persistentvolumes", pv("a", 2))  # a newer object replaces the assumed one
    assert objects.pv("a")["metadata"]["resourceVersion"] == "2"
    try:
        objects.assume("persistentvolumes", assumed)
    except OutOfSync as err:
        assert "out of sync (stored: 2, assume: 1)" in str(err)
    else:
        raise AssertionError("assume of a stale version must fail")


def scheduler(plugins_disabled=()):
    profile = {"plugins": {"multiPoint": {"disabled": [{"name": n} for n in plugins_disabled]}}}
    return Scheduler(parse_config({**BASE, "profiles": [profile]}), None, rng=random.Random(1))


def storage_informers(sched):
    return {r for r in sched.informers.requested if r in STORAGE_RESOURCES}


def test_storage_informers_only_for_enabled_volume_plugins():
    assert storage_informers(scheduler()) == set(STORAGE_RESOURCES)
    assert storage_informers(scheduler(["VolumeBinding", "NodeVolumeLimits", "VolumeZone"])) == \
        {"persistentvolumeclaims"}
    assert storage_informers(scheduler(VOLUME_PLUGINS)) == set()


def claim_pod(name, claim):
    return PodInfo({"metadata": {"name": name, "namespace": "default", "uid": name},
                    "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}})


def test_claim_event_requeues_only_the_pod_that_uses_the_claim():
    sched = scheduler()
    waiting = {}
    for name, claim in (("uses", "data"), ("other", "elsewhere")):
        pod = claim_pod(name, claim)
        sched.queue.add(pod)
        popped = sched.queue.pop(timeout=0)
        popped.unschedulable_plugins = {"VolumeBinding"}
        sched.queue.add_unschedulable_if_not_present(popped)
        waiting[name] = popped
    claim = {"metadata": {"name": "data", "namespace": "default", "resourceVersion": "5"}, "spec": {}}
    sched.informers.put("persistentvolumeclaims", claim)
    moved = set()
    while (pod := sched.queue.pop(timeout=0.05)) is not None:
        moved.add(pod.name)
    assert moved == {"uses"}
