"""Scheduling on a cluster whose controllers act: graceful preemption, ReplicaSets that
recreate their preempted pods, PodDisruptionBudgets the disruption controller computes,
Deployments and DaemonSets, and NoExecute eviction by the taint-eviction controller.

Every test runs twice through `either_scheduler`: once with kubesched, once with the pinned
kube-scheduler, with the same assertions (upstream is the oracle). Pods run on kwok nodes:
bound pods become Running, deleted pods stay Terminating for their grace period.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import pytest
from kubesched_lab import pod_manifest, wait_for

from lab.fake_nodes import ZONE_LABEL

PAUSE = "registry.k8s.io/pause:3.10"


def read(call, *args, **kwargs) -> dict:
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def pods_in(core_v1, namespace: str, selector: str = "") -> list[dict]:
    return read(core_v1.list_namespaced_pod, namespace, label_selector=selector)["items"]


def pod_or_none(core_v1, namespace: str, name: str) -> dict | None:
    from kubernetes.client.rest import ApiException

    try:
        return read(core_v1.read_namespaced_pod, name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def container(cpu: str = "", **extended: str) -> dict:
    """A pause container requesting cpu and extended resources (whose limits must equal requests)."""
    resources: dict = {"requests": {**({"cpu": cpu} if cpu else {}), **extended}}
    if extended:
        resources["limits"] = dict(extended)
    return {"name": "c", "image": PAUSE, "resources": resources}


@pytest.fixture
def priority_classes(api_client):
    """Factory: priority_classes(low=10, high=1000) -> {"low": "<unique name>", ...}; deleted afterwards."""
    from kubernetes import client

    scheduling = client.SchedulingV1Api(api_client)
    made: list[str] = []

    def make(**values: int) -> dict[str, str]:
        tag = uuid.uuid4().hex[:5]
        names = {}
        for level, value in values.items():
            name = f"it-{tag}-{level}"
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value}, _preload_content=False)
            made.append(name)
            names[level] = name
        return names

    yield make
    for name in made:
        scheduling.delete_priority_class(name, _preload_content=False)


@pytest.fixture
def apps_v1(api_client):
    from kubernetes import client

    return client.AppsV1Api(api_client)


def replica_set(name: str, replicas: int, scheduler: str, node: str, priority_class: str, cpu: str = "",
                grace: int = 30, **resources) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"schedulerName": scheduler, "priorityClassName": priority_class,
                                           "terminationGracePeriodSeconds": grace,
                                           "nodeSelector": {"kubernetes.io/hostname": node},
                                           "containers": [container(cpu, **resources)]}}}}


def running(core_v1, namespace: str, selector: str, count: int) -> list[dict] | None:
    pods = [p for p in pods_in(core_v1, namespace, selector)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return pods if len(pods) == count else None


class PodCreations:
    """Counts pod ADDED events per name prefix, as upstream's e2e informer does."""

    def __init__(self, core_v1, namespace: str):
        from kubernetes import watch

        self.seen: Counter = Counter()
        self._stopped = False
        self._watch = watch.Watch()
        self._names: set[str] = set()
        start = read(core_v1.list_namespaced_pod, namespace)
        self._version = start["metadata"]["resourceVersion"]
        for pod in start["items"]:
            self._count(pod["metadata"]["name"])
        self._thread = threading.Thread(target=self._run, args=(core_v1, namespace), daemon=True)
        self._thread.start()

    def _count(self, name: str) -> None:
        if name not in self._names:
            self._names.add(name)
            self.seen[name.rsplit("-", 1)[0]] += 1

    def _run(self, core_v1, namespace: str) -> None:
        try:
            for event in self._watch.stream(core_v1.list_namespaced_pod, namespace,
                                            resource_version=self._version, timeout_seconds=300):
                if event["type"] == "ADDED":
                    self._count(event["object"].metadata.name)
        except Exception:  # noqa: BLE001 - the stream cut by stop(); anything else shows in the counts
            if not self._stopped:
                raise

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()


def test_preemptor_waits_on_its_nominated_node_while_victims_terminate(either_scheduler, nodes, core_v1, namespace,
                                                                       priority_classes):
    """Victims with a 5 s grace period: the preemptor is nominated at once, binds only once
    they are gone, and a lower-priority pod created meanwhile does not take their room."""
    scheduler = either_scheduler.name
    [node] = nodes(1, cpu="2")
    classes = priority_classes(low=10, high=1000)
    for name in ("victim-a", "victim-b"):
        core_v1.create_namespaced_pod(namespace, pod_manifest(
            name, schedulerName=scheduler, priorityClassName=classes["low"], terminationGracePeriodSeconds=5,
            containers=[container("900m")]), _preload_content=False)
    wait_for(lambda: running(core_v1, namespace, "", 2), 30, what="both victims Running")

    core_v1.create_namespaced_pod(namespace, pod_manifest(
        "preemptor", schedulerName=scheduler, priorityClassName=classes["high"], containers=[container("1500m")]),
        _preload_content=False)

    def preemptor_if_nominated():
        pod = read(core_v1.read_namespaced_pod, "preemptor", namespace)
        return pod if pod["status"].get("nominatedNodeName") else None

    nominated = wait_for(preemptor_if_nominated, 20, what="the preemptor's nominatedNodeName")
    assert nominated["status"]["nominatedNodeName"] == node
    assert not nominated["spec"].get("nodeName"), "bound while both victims still terminate"
    # kube-scheduler's preemption is asynchronous (v1.37): the nomination can be visible a
    # moment before the victims' deletions are, so the deletions are waited for.

    def victims_deleting():
        victims = [read(core_v1.read_namespaced_pod, name, namespace) for name in ("victim-a", "victim-b")]
        return victims if all(v["metadata"].get("deletionTimestamp") for v in victims) else None

    victims = wait_for(victims_deleting, 10, what="both victims being deleted")
    assert all(v["metadata"]["deletionGracePeriodSeconds"] == 5 for v in victims), "with their own grace period"
    for victim in victims:
        disruption = [c for c in victim["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
        assert [(c["status"], c["reason"]) for c in disruption] == [("True", "PreemptionByScheduler")]

    # A lower-priority pod that would fit in the victims' room once they are gone.
    core_v1.create_namespaced_pod(namespace, pod_manifest(
        "latecomer", schedulerName=scheduler, priorityClassName=classes["low"], containers=[container("1")]),
        _preload_content=False)

    observations = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        preemptor = read(core_v1.read_namespaced_pod, "preemptor", namespace)
        left = [name for name in ("victim-a", "victim-b") if pod_or_none(core_v1, namespace, name)]
        observations.append((bool(preemptor["spec"].get("nodeName")), left))
        if preemptor["spec"].get("nodeName"):
            break
        time.sleep(0.1)
    bound_while_victims_left = [left for bound, left in observations if bound and left]
    assert observations[-1][0], "the preemptor was never bound"
    assert not bound_while_victims_left, f"bound while {bound_while_victims_left[0]} still terminated"
    assert preemptor["spec"]["nodeName"] == node
    assert sum(1 for bound, left in observations if left) >= 20, "the victims took their grace period (> 2 s)"
    time.sleep(2)  # the latecomer had its chances to take the freed room
    latecomer = read(core_v1.read_namespaced_pod, "latecomer", namespace)
    assert not latecomer["spec"].get("nodeName"), "the lower-priority latecomer took the preemptor's room"


def test_replicaset_pods_are_preempted_exactly_once(either_scheduler, nodes, core_v1, apps_v1, namespace,
                                                    priority_classes):
    """Upstream e2e preemption.go, PreemptionExecutionPath: three ReplicaSets fill 950 of a
    node's 1000 fake CPUs; a priority-4 pod of 500 preempts the pods of p1 and p2 once, and
    their replacements (which fit nowhere) do not start a second round."""
    scheduler = either_scheduler.name
    fake_cpu = "example.com/fakecpu"
    [node] = nodes(1, extended={fake_cpu: "1000"})
    classes = priority_classes(p1=1, p2=2, p3=3, p4=4)
    creations = PodCreations(core_v1, namespace)
    try:
        for index, amount in ((1, "200"), (2, "300"), (3, "450")):
            apps_v1.create_namespaced_replica_set(namespace, replica_set(
                f"rs-pod{index}", 1, scheduler, node, classes[f"p{index}"], grace=2, **{fake_cpu: amount}),
                _preload_content=False)
        wait_for(lambda: running(core_v1, namespace, "", 3), 30, what="the three ReplicaSets' pods Running")

        core_v1.create_namespaced_pod(namespace, pod_manifest(
            "pod4", schedulerName=scheduler, priorityClassName=classes["p4"],
            nodeSelector={"kubernetes.io/hostname": node},
            containers=[container(**{fake_cpu: "500"})]), _preload_content=False)
        assert wait_for(lambda: read(core_v1.read_namespaced_pod, "pod4", namespace)["spec"].get("nodeName"), 60,
                        what="the preemptor bound") == node

        expected = {"rs-pod1": 2, "rs-pod2": 2, "rs-pod3": 1}

        def counts() -> dict:
            return {prefix: creations.seen[prefix] for prefix in expected}

        wait_for(lambda: counts() == expected or any(counts()[k] > v for k, v in expected.items()), 60,
                 what=f"pod creations {expected}")
        time.sleep(5)  # as upstream: the state must hold, or pods were over-preempted
        assert counts() == expected, "pod creations per ReplicaSet (1 = never preempted, 2 = preempted once)"
        survivors = {p["metadata"]["labels"]["app"] for p in pods_in(core_v1, namespace)
                     if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")}
        assert survivors == {"rs-pod3", "pod4"}
    finally:
        creations.stop()


def test_preemption_spares_the_node_whose_pods_a_disruption_budget_guards(either_scheduler, nodes, core_v1,
                                                                          apps_v1, api_client, namespace,
                                                                          priority_classes):
    """Two full nodes of equal victims; a PodDisruptionBudget (status from the disruption
    controller: 0 disruptions allowed) guards one node's pods: the preemptor takes the other."""
    from kubernetes import client

    scheduler = either_scheduler.name
    guarded_node, free_node = nodes(2, cpu="2", zones=0)
    classes = priority_classes(low=10, high=1000)
    for name, node in (("guarded", guarded_node), ("unguarded", free_node)):
        apps_v1.create_namespaced_replica_set(namespace, replica_set(name, 2, scheduler, node, classes["low"],
                                                                     cpu="900m", grace=2), _preload_content=False)
    policy = client.PolicyV1Api(api_client)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}}, _preload_content=False)
    wait_for(lambda: running(core_v1, namespace, "", 4), 30, what="four low-priority pods Running")

    def budget_status():
        status = read(policy.read_namespaced_pod_disruption_budget, "guard", namespace).get("status") or {}
        return status if status.get("currentHealthy") == 2 and status.get("observedGeneration") else None

    status = wait_for(budget_status, 30, what="the disruption controller's PodDisruptionBudget status")
    assert status["disruptionsAllowed"] == 0 and status["desiredHealthy"] == 2
    guarded = {p["metadata"]["uid"] for p in pods_in(core_v1, namespace, "app=guarded")}

    core_v1.create_namespaced_pod(namespace, pod_manifest(
        "preemptor", schedulerName=scheduler, priorityClassName=classes["high"], containers=[container("1500m")]),
        _preload_content=False)
    assert wait_for(lambda: read(core_v1.read_namespaced_pod, "preemptor", namespace)["spec"].get("nodeName"), 60,
                    what="the preemptor bound") == free_node
    still = pods_in(core_v1, namespace, "app=guarded")
    assert {p["metadata"]["uid"] for p in still} == guarded
    assert not [p for p in still if p["metadata"].get("deletionTimestamp")], "a guarded pod was preempted"


def test_deployment_spreads_over_three_zones_and_runs(either_scheduler, nodes, core_v1, apps_v1, namespace):
    scheduler = either_scheduler.name
    names = nodes(6, cpu="4", zones=3)
    labels = {"app": "spread"}
    apps_v1.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "spread"},
        "spec": {"replicas": 9, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "schedulerName": scheduler, "containers": [container("100m")],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE_LABEL,
                                                    "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": labels}}]}}}},
        _preload_content=False)
    pods = wait_for(lambda: running(core_v1, namespace, "app=spread", 9), 60, what="9 Deployment pods Running")
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE_LABEL]
               for n in read(core_v1.list_node)["items"] if n["metadata"]["name"] in names}
    assert Counter(zone_of[p["spec"]["nodeName"]] for p in pods) == {"zone-0": 3, "zone-1": 3, "zone-2": 3}
    wait_for(lambda: read(apps_v1.read_namespaced_deployment, "spread", namespace)["status"].get(
        "availableReplicas") == 9, 30, what="the Deployment controller to count 9 available replicas")


def test_daemonset_runs_one_pod_per_node(either_scheduler, nodes, core_v1, apps_v1, namespace):
    scheduler = either_scheduler.name
    tag = uuid.uuid4().hex[:5]
    names = nodes(3, labels={"kubesched.io/ds-test": tag})
    labels = {"app": "agent"}
    apps_v1.create_namespaced_daemon_set(namespace, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "schedulerName": scheduler, "nodeSelector": {"kubesched.io/ds-test": tag},
                     "containers": [container("50m")]}}}}, _preload_content=False)
    pods = wait_for(lambda: running(core_v1, namespace, "app=agent", 3), 60, what="3 DaemonSet pods Running")
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(names)
    assert all(p["spec"]["schedulerName"] == scheduler for p in pods)
    wait_for(lambda: read(apps_v1.read_namespaced_daemon_set, "agent", namespace)["status"].get("numberReady") == 3,
             30, what="the DaemonSet controller to count 3 ready pods")


MAINTENANCE = {"key": "maintenance", "value": "now", "effect": "NoExecute"}


def test_node_taint_eviction_preview_matches_the_taint_eviction_controller(either_scheduler, nodes, core_v1,
                                                                           namespace, lab_kubeconfig):
    """node_taint's check mode lists the pods a new NoExecute taint would evict, with their
    delays; the taint eviction controller then evicts exactly those, when it said."""
    from tests.integration.modules.helpers import run_in_process

    scheduler = either_scheduler.name
    node, other = nodes(2, zones=0)
    forever = {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}
    pods = {
        "plain": ([], node),
        "wrong-value": ([{"key": "maintenance", "operator": "Equal", "value": "later"}], node),
        "tolerates-forever": ([forever], node),
        "tolerates-4s": ([{**MAINTENANCE, "operator": "Equal", "tolerationSeconds": 4}], node),
        # The first toleration that matches is the one the controller uses.
        "4s-then-forever": ([{**forever, "tolerationSeconds": 4}, {"operator": "Exists"}], node),
        "forever-then-2s": ([{"operator": "Exists"}, {**forever, "tolerationSeconds": 2}], node),
        "8s-then-2s": ([{**forever, "tolerationSeconds": 8},
                        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}], node),
        "finished": ([], node),
        "elsewhere": ([], other),
    }
    for name, (tolerations, target) in pods.items():
        core_v1.create_namespaced_pod(namespace, pod_manifest(
            name, schedulerName=scheduler, tolerations=tolerations, terminationGracePeriodSeconds=30,
            nodeSelector={"kubernetes.io/hostname": target}, containers=[container("100m")]), _preload_content=False)
    wait_for(lambda: running(core_v1, namespace, "", len(pods)), 40, what="every pod Running")
    core_v1.patch_namespaced_pod_status("finished", namespace, {"status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "c", "image": PAUSE, "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}, _preload_content=False)

    args = {"name": node, "taints": [f"{MAINTENANCE['key']}={MAINTENANCE['value']}:NoExecute"],
            "kubeconfig": lab_kubeconfig}
    preview = run_in_process("node_taint", args, check_mode=True)
    assert preview["changed"] is True, preview
    [entry] = preview["evictions"]
    predicted = {p["name"]: p["evicted_after_seconds"] for p in entry["pods"]}

    tainted_at = time.monotonic()
    applied = run_in_process("node_taint", args)
    assert applied["changed"] is True, applied
    evicted_after: dict[str, float] = {}
    longest = max([0, *predicted.values()])
    while time.monotonic() - tainted_at < longest + 6:
        current = {p["metadata"]["name"]: p for p in pods_in(core_v1, namespace)}
        for name in pods:
            if name not in evicted_after and (name not in current or current[name]["metadata"].get("deletionTimestamp")):
                evicted_after[name] = time.monotonic() - tainted_at
        time.sleep(0.2)

    assert sorted(evicted_after) == sorted(predicted), (
        f"preview {sorted(predicted)} vs evicted by the controller {sorted(evicted_after)}")
    late = {name: (round(evicted_after[name], 1), predicted[name]) for name in predicted
            if not predicted[name] - 0.5 <= evicted_after[name] <= predicted[name] + 3}
    assert not late, f"evicted at (seconds after tainting, predicted): {late}"
    assert predicted == {"plain": 0, "wrong-value": 0, "finished": 0, "tolerates-4s": 4, "4s-then-forever": 4,
                         "8s-then-2s": 8}
