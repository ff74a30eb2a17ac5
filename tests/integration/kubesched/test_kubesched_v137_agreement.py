"""Behaviours where kubesched used to differ from kube-scheduler v1.37, each run through both
kubesched and the pinned kube-scheduler on the same scenario against the lab, with the same
outcome asserted: a nomination cleared when preemption finds no candidate (and the
PodScheduled condition's observedGeneration), a node delete that unblocks a spreading pod,
QueueingHints, event series and in-place resize.

Overlapping PDBs in preemption are not here: v1.37.1 stops counting a victim at the first
violated PDB in its lister's order, which is a map's, so kube-scheduler itself picks either
node from run to run (tests/unit/kubesched/plugins/test_default_preemption.py holds the rule)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes import client
from kubesched_lab import pod_manifest, set_taints, wait_for

SCHEDULERS = ("kube-scheduler", "kubesched")


def read_pod(core_v1, namespace: str, name: str) -> dict:
    return json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)


def pause(name: str, cpu: str, **spec) -> dict:
    return pod_manifest(name, terminationGracePeriodSeconds=0, containers=[
        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}], **spec)


def unschedulable_message(core_v1, namespace: str, name: str) -> str | None:
    """The message of the pod's PodScheduled=False condition, None while there is none."""
    cond = next((c for c in read_pod(core_v1, namespace, name)["status"].get("conditions") or ()
                 if c["type"] == "PodScheduled" and c["status"] == "False"), None)
    return cond["message"] if cond else None


def test_nomination_is_cleared_when_preemption_finds_no_candidate(run_scheduler, nodes, core_v1, namespace):
    [node] = set_taints(core_v1, nodes(1, cpu="1", zones=0))
    outcomes = {}
    for kind in SCHEDULERS:
        holder, want = f"holder-{kind}", f"want-{kind}"
        core_v1.create_namespaced_pod(namespace, pause(holder, "900m", nodeName=node), _preload_content=False)
        scheduler = f"agree-{uuid.uuid4().hex[:6]}"
        core_v1.create_namespaced_pod(namespace, pause(want, "900m", schedulerName=scheduler),
                                      _preload_content=False)
        # An earlier preemption (by anyone) left a nomination; the holder has the same priority,
        # so this attempt finds no victim. The scheduler starts once the pod is in that state.
        core_v1.patch_namespaced_pod_status(want, namespace, {"status": {"nominatedNodeName": node}},
                                            _preload_content=False)
        run_scheduler(kind, scheduler)

        def decided(name=want):
            pod = read_pod(core_v1, namespace, name)
            cond = next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), None)
            return pod if cond and cond["status"] == "False" and not pod["status"].get("nominatedNodeName") else None

        pod = wait_for(decided, 30, what=f"{kind}: {want} unschedulable with its nomination cleared")
        cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        outcomes[kind] = {"nominated": pod["status"].get("nominatedNodeName", ""), "reason": cond["reason"],
                          "message": cond["message"],
                          "observedGeneration": cond.get("observedGeneration") == pod["metadata"]["generation"]}
        core_v1.delete_namespaced_pod(holder, namespace, grace_period_seconds=0, _preload_content=False)
        core_v1.delete_namespaced_pod(want, namespace, grace_period_seconds=0, _preload_content=False)
        wait_for(lambda h=holder: not any(p["metadata"]["name"] == h for p in json.loads(
            core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]), 30, what="holder gone")
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["observedGeneration"] is True


def test_node_delete_unblocks_a_spreading_pod(run_scheduler, nodes, core_v1, namespace):
    bound = {}
    for kind in SCHEDULERS:
        blocked, open_ = nodes(2, cpu="4", zones=0, prefix=f"sp{kind[-5:]}-{uuid.uuid4().hex[:3]}-")
        set_taints(core_v1, [blocked], [{"key": "block", "value": "x", "effect": "NoSchedule"}])
        set_taints(core_v1, [open_])
        app = f"spread-{kind}"
        core_v1.create_namespaced_pod(namespace, pause(f"{app}-0", "100m", nodeName=open_, labels={"app": app}),
                                      _preload_content=False)
        scheduler = run_scheduler(kind)
        name = f"{app}-1"
        core_v1.create_namespaced_pod(namespace, pause(name, "100m", schedulerName=scheduler, labels={"app": app},
                                                       topologySpreadConstraints=[{
                                                           "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                           "whenUnsatisfiable": "DoNotSchedule",
                                                           "labelSelector": {"matchLabels": {"app": app}}}]),
                                      _preload_content=False)
        # The tainted node counts as an empty domain (nodeTaintsPolicy Ignore): skew 2 on the other.
        wait_for(lambda n=name: unschedulable_message(core_v1, namespace, n) is not None,
                 30, what=f"{kind}: {name} unschedulable")
        core_v1.delete_node(blocked, _preload_content=False)
        # Well before the 5-minute unschedulable flush: only the NodeDelete event can move it.
        bound[kind] = wait_for(lambda n=name: read_pod(core_v1, namespace, n)["spec"].get("nodeName"), 30,
                               what=f"{kind}: {name} bound after the node delete") == open_
        core_v1.delete_node(open_, _preload_content=False)  # the next run starts from its own nodes only
    assert bound == {"kube-scheduler": True, "kubesched": True}


def failed_scheduling_events(api_client, namespace: str, name: str) -> list[dict]:
    raw = client.EventsV1Api(api_client).list_namespaced_event(namespace, _preload_content=False)
    return [e for e in json.loads(raw.data)["items"]
            if (e.get("regarding") or {}).get("name") == name and e.get("reason") == "FailedScheduling"]


def test_a_node_the_pod_cannot_use_does_not_retry_it(run_scheduler, nodes, core_v1, namespace):
    """QueueingHints: NodeAffinity skips a new node whose labels do not match, so the pod's
    condition still counts one node; a matching node schedules it."""
    outcomes = {}
    for kind in SCHEDULERS:
        tag = uuid.uuid4().hex[:4]
        [first] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"hint{kind[-5:]}-{tag}-a-"))
        scheduler = run_scheduler(kind)
        name = f"ssd-{kind}"
        core_v1.create_namespaced_pod(namespace, pause(name, "100m", schedulerName=scheduler,
                                                       nodeSelector={"disk": f"ssd-{tag}"}), _preload_content=False)

        def message(n=name):
            return unschedulable_message(core_v1, namespace, n)

        before = wait_for(message, 30, what=f"{kind}: {name} unschedulable")
        [other] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"hint{kind[-5:]}-{tag}-b-"))
        time.sleep(4)  # past the pod's 1s backoff: a retry would have rewritten "0/1" as "0/2"
        after = message()
        [ssd] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"hint{kind[-5:]}-{tag}-c-",
                                          labels={"disk": f"ssd-{tag}"}))
        bound = wait_for(lambda n=name: read_pod(core_v1, namespace, n)["spec"].get("nodeName"), 30,
                         what=f"{kind}: {name} bound on the matching node")
        outcomes[kind] = (before.split(":")[0], after == before, bound == ssd)
        for node in (first, other, ssd):
            core_v1.delete_node(node, _preload_content=False)
    assert outcomes["kubesched"] == outcomes["kube-scheduler"] == ("0/1 nodes are available", True, True)


def test_repeated_failures_fold_into_one_event_series(run_scheduler, nodes, core_v1, api_client, namespace):
    """client-go's series: the first repeat patches count 2; later repeats (same pod version,
    same key) count in memory until the 30-minute refresh or the 6-minute finish."""
    outcomes = {}
    for kind in SCHEDULERS:
        [node] = set_taints(core_v1, nodes(1, cpu="2", zones=0, prefix=f"ev{kind[-5:]}-{uuid.uuid4().hex[:3]}-"))
        holder, want = f"hold-{kind}", f"want-{kind}"
        core_v1.create_namespaced_pod(namespace, pause(holder, "1500m", nodeName=node), _preload_content=False)
        scheduler = run_scheduler(kind)
        core_v1.create_namespaced_pod(namespace, pause(want, "1", schedulerName=scheduler), _preload_content=False)
        wait_for(lambda n=want: failed_scheduling_events(api_client, namespace, n), 30, what=f"{kind}: first event")
        # Both schedulers patch the pod's condition after the event and asynchronously (upstream's
        # APICacher): wait for it, so the second attempt starts from the patched pod under any load.
        wait_for(lambda n=want: unschedulable_message(core_v1, namespace, n) is not None, 30,
                 what=f"{kind}: first condition")
        # Time for the scheduler's pod watch to deliver the patched pod. 1 s was not enough once on a
        # CI machine running Molecule beside this suite (kubesched's attempt 2 used the unpatched
        # pod: [2, 2]); nothing either scheduler exposes tells the test when its watch has it.
        time.sleep(5)
        # More allocatable each time (NodeResourcesFit's hint: worth a retry), never enough:
        # three more attempts with the same message, so the pod's status and version stay.
        for milli in (2100, 2200, 2300):
            core_v1.patch_node_status(node, {"status": {"allocatable": {"cpu": f"{milli}m"}}}, _preload_content=False)
            time.sleep(5)
        events = sorted(failed_scheduling_events(api_client, namespace, want), key=lambda e: e["eventTime"])
        outcomes[kind] = [(e.get("series") or {}).get("count") for e in events]
        core_v1.delete_namespaced_pod(want, namespace, grace_period_seconds=0, _preload_content=False)
        core_v1.delete_namespaced_pod(holder, namespace, grace_period_seconds=0, _preload_content=False)
        core_v1.delete_node(node, _preload_content=False)
    # The first attempt's condition patch gives the pod a new resourceVersion, which is part of
    # the key: attempt 2 starts a second event, attempt 3 makes it a series (count 2), attempt 4
    # is counted in memory only.
    assert outcomes["kubesched"] == outcomes["kube-scheduler"], outcomes
    assert outcomes["kube-scheduler"] == [None, 2], outcomes


def test_a_resized_pod_counts_what_it_was_allocated(run_scheduler, nodes, core_v1, namespace):
    """In-place resize: a running pod whose allocated and actual requests (status) exceed its
    spec counts the larger amount, so a pod that would fit beside the spec does not."""
    outcomes = {}
    for kind in SCHEDULERS:
        [node] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"rs{kind[-5:]}-{uuid.uuid4().hex[:3]}-"))
        grown, want = f"grown-{kind}", f"want-{kind}"
        core_v1.create_namespaced_pod(namespace, pause(grown, "1", nodeName=node), _preload_content=False)
        # kwok writes the pod's status once, when it starts it: patching before that raced with
        # kwok's own containerStatuses, which then replaced the resized ones.
        wait_for(lambda n=grown: read_pod(core_v1, namespace, n)["status"].get("phase") == "Running", 30,
                 what=f"kwok to start {grown}")
        # What a kubelet reports after resizing the container to 3 cpu (the spec still says 1).
        core_v1.patch_namespaced_pod_status(grown, namespace, {"status": {"containerStatuses": [{
            "name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": True, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3"}}}]}},
            _preload_content=False)
        wait_for(lambda n=grown: [s.get("allocatedResources") for s in read_pod(core_v1, namespace, n)["status"]
                                  .get("containerStatuses") or ()] == [{"cpu": "3"}], 10,
                 what=f"{grown}'s resized status to stay")
        scheduler = run_scheduler(kind)
        core_v1.create_namespaced_pod(namespace, pause(want, "2", schedulerName=scheduler), _preload_content=False)

        def decided(n=want):
            pod = read_pod(core_v1, namespace, n)
            cond = next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), {})
            if pod["spec"].get("nodeName"):
                return "bound"
            return cond.get("message") if cond.get("status") == "False" else None

        outcomes[kind] = wait_for(decided, 30, what=f"{kind}: {want} decided")
        for pod_name in (want, grown):
            core_v1.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0, _preload_content=False)
        core_v1.delete_node(node, _preload_content=False)
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


def _affinity_scenario(tag: str) -> tuple[dict, dict]:
    """InterPodAffinity: the pod needs a db pod in its zone. A node without the zone key
    cannot help (skip); a db pod placed in the zone can (queue), and the pod then fits."""
    key = f"hint-zone-{tag}"
    pending = {"labels": {"app": f"web-{tag}"}, "affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": f"db-{tag}"}}, "topologyKey": key}]}}}
    return {key: "a"}, {"pending": pending, "placed_labels": {"app": f"db-{tag}"}, "relevant": "add"}


def _spread_scenario(tag: str) -> tuple[dict, dict]:
    """PodTopologySpread: minDomains 2 over one zone that already holds a matching pod rejects
    the pod. A node without the zone key cannot help (skip); deleting the matching pod can
    (queue), and the pod then fits."""
    key = f"hint-zone-{tag}"
    labels = {"app": f"web-{tag}"}
    pending = {"labels": labels, "topologySpreadConstraints": [{
        "maxSkew": 1, "minDomains": 2, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": labels}}]}
    return {key: "a"}, {"pending": pending, "placed_labels": labels, "relevant": "delete"}


@pytest.mark.parametrize("scenario", [_affinity_scenario, _spread_scenario],
                         ids=["InterPodAffinity", "PodTopologySpread"])
def test_queueing_hints_skip_an_unrelated_node_and_queue_the_relevant_pod_event(scenario, run_scheduler, nodes,
                                                                                core_v1, namespace):
    """The plugin that rejected the pod gets a node added without its topology key: its
    QueueingHint skips the event, so the pod is not retried and its condition still counts one
    node. Then the event that can help (an assigned pod added or deleted) schedules it."""
    outcomes = {}
    for kind in SCHEDULERS:
        tag = f"{kind[-5:]}{uuid.uuid4().hex[:4]}"
        zone_labels, plan = scenario(tag)
        [zoned] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"qh-{tag}-a-", labels=zone_labels))
        placed = pod_manifest(f"placed-{tag}", nodeName=zoned, terminationGracePeriodSeconds=0,
                              labels=plan["placed_labels"])
        if plan["relevant"] == "delete":
            core_v1.create_namespaced_pod(namespace, placed, _preload_content=False)
        scheduler = run_scheduler(kind)
        name = f"pending-{tag}"
        core_v1.create_namespaced_pod(namespace, pod_manifest(name, schedulerName=scheduler,
                                                              terminationGracePeriodSeconds=0, **plan["pending"]),
                                      _preload_content=False)

        def message(n=name):
            return unschedulable_message(core_v1, namespace, n)

        before = wait_for(message, 30, what=f"{kind}: {name} unschedulable")
        [unrelated] = set_taints(core_v1, nodes(1, cpu="4", zones=0, prefix=f"qh-{tag}-b-"))
        time.sleep(4)  # past the pod's 1s backoff: a retry would have rewritten "0/1" as "0/2"
        after = message()
        if plan["relevant"] == "add":
            core_v1.create_namespaced_pod(namespace, placed, _preload_content=False)
        else:
            core_v1.delete_namespaced_pod(placed["metadata"]["name"], namespace, grace_period_seconds=0,
                                          _preload_content=False)
        bound = wait_for(lambda n=name: read_pod(core_v1, namespace, n)["spec"].get("nodeName"), 20,
                         what=f"{kind}: {name} bound once the relevant pod event came")
        outcomes[kind] = (before.split(":")[0], after == before, bound == zoned)
        for node in (zoned, unrelated):
            core_v1.delete_node(node, _preload_content=False)
    assert outcomes["kubesched"] == outcomes["kube-scheduler"] == ("0/1 nodes are available", True, True), outcomes
