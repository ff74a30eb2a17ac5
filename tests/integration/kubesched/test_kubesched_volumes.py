"""Pods with PersistentVolumeClaims on the real lab, each scenario run once by kubesched and
once by the pinned kube-scheduler with the same assertions (placement, claim phase and the
FailedScheduling text). Binding needs kube-controller-manager (the PV, StatefulSet and
ephemeral-volume controllers), which the lab runs since the `lab` branch's LAB-READY.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
import yaml
from kubesched_lab import set_taints, wait_for
from placement_agreement import outcome
from volume_provisioner import LabProvisioner

from lab.binaries import binary

KUBE_SCHEDULER = binary("kube-scheduler")
PAUSE = "registry.k8s.io/pause:3.10"
PROVISIONER = "kubesched.io/lab-provisioner"
NOT_HELPFUL = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


@pytest.fixture(params=["kubesched", "kube-scheduler"])
def scheduler(request, run_kubesched, lab_kubeconfig, tmp_path):
    """The schedulerName of a running kubesched or kube-scheduler (one profile)."""
    name = f"vol-{request.param}-{uuid.uuid4().hex[:6]}"
    if request.param == "kubesched":
        run_kubesched({"profiles": [{"schedulerName": name}]})
        yield name
        return
    if not os.path.exists(KUBE_SCHEDULER):
        pytest.fail(f"{KUBE_SCHEDULER} is missing: run 'bash lab/k8s-binaries.sh'", pytrace=False)
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": lab_kubeconfig}, "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name}]}))
    log = open(tmp_path / "kube-scheduler.log", "w")
    proc = subprocess.Popen([KUBE_SCHEDULER, "--config", str(config), "--secure-port", "0", "-v=2"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield name
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Storage:
    """Cluster-scoped StorageClasses and PersistentVolumes of one test, deleted afterwards."""

    def __init__(self, api_client, core_v1):
        from kubernetes import client

        self.storage_v1 = client.StorageV1Api(api_client)
        self.core_v1 = core_v1
        self.tag = uuid.uuid4().hex[:6]
        self.classes: list[str] = []
        self.volumes: list[str] = []

    def storage_class(self, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
                      **extra) -> str:
        name = f"{mode.lower()[:4]}-{self.tag}-{len(self.classes)}"
        self.storage_v1.create_storage_class({"metadata": {"name": name}, "provisioner": provisioner,
                                              "volumeBindingMode": mode, **extra}, _preload_content=False)
        self.classes.append(name)
        return name

    def local_volume(self, storage_class: str, node: str, size: str = "1Gi") -> str:
        name = f"pv-{self.tag}-{len(self.volumes)}"
        self.core_v1.create_persistent_volume({"metadata": {"name": name}, "spec": {
            "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
            "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}},
            _preload_content=False)
        self.volumes.append(name)
        return name

    def cleanup(self) -> None:
        from kubernetes.client.rest import ApiException

        provisioned = [pv["metadata"]["name"] for pv in json.loads(
            self.core_v1.list_persistent_volume(_preload_content=False).data)["items"]
            if pv["spec"].get("storageClassName") in self.classes]
        for name in set(self.volumes) | set(provisioned):
            try:
                self.core_v1.delete_persistent_volume(name, _preload_content=False)
            except ApiException as err:
                if err.status != 404:
                    raise
        for name in self.classes:
            self.storage_v1.delete_storage_class(name, _preload_content=False)


@pytest.fixture
def storage(api_client, core_v1):
    made = Storage(api_client, core_v1)
    yield made
    made.cleanup()


def claim(name: str, storage_class: str, size: str = "1Gi") -> dict:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                                                 "resources": {"requests": {"storage": size}}}}


def claim_pod(name: str, scheduler: str, *claims: str, volumes: list | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": PAUSE}],
        "volumes": volumes or [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                               for i, c in enumerate(claims)]}}


def claim_phase(core_v1, namespace: str, name: str) -> str:
    pvc = json.loads(core_v1.read_namespaced_persistent_volume_claim(name, namespace, _preload_content=False).data)
    return (pvc.get("status") or {}).get("phase", "")


def wait_nodes(core_v1, namespace: str, pods: list[str], timeout: float = 90.0) -> dict[str, str]:
    """Each pod's node once all are bound (a pod may first be refused while its claim is made)."""
    def bound():
        nodes = {p: json.loads(core_v1.read_namespaced_pod(p, namespace, _preload_content=False).data)["spec"].get(
            "nodeName") for p in pods}
        return nodes if all(nodes.values()) else None

    return wait_for(bound, timeout, interval=0.5, what=f"pods {pods} to be bound")


def wait_bound_claims(core_v1, namespace: str, names: list[str], timeout: float = 60.0) -> None:
    wait_for(lambda: all(claim_phase(core_v1, namespace, n) == "Bound" for n in names), timeout,
             interval=0.5, what=f"claims {names} to be Bound (is kube-controller-manager running?)")


def test_statefulset_lands_one_replica_per_node_that_holds_a_pv(scheduler, nodes, core_v1, api_client, namespace,
                                                                storage):
    from kubernetes import client

    names = set_taints(core_v1, nodes(4, zones=0))
    local = storage.storage_class()
    for node in names[:3]:
        storage.local_volume(local, node)
    client.AppsV1Api(api_client).create_namespaced_stateful_set(namespace, {
        "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                     "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": PAUSE,
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                 "volumeClaimTemplates": [claim("data", local)]}}, _preload_content=False)

    def placed():
        pods = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
        return bound if len(bound) == 3 else None

    where = wait_for(placed, 90, interval=0.5, what="3 StatefulSet replicas to be bound")
    assert sorted(where.values()) == sorted(names[:3]), where  # one per node holding a PV, never the 4th
    wait_bound_claims(core_v1, namespace, [f"data-db-{i}" for i in range(3)])
    for i in range(3):
        pvc = json.loads(core_v1.read_namespaced_persistent_volume_claim(f"data-db-{i}", namespace,
                                                                         _preload_content=False).data)
        pv = json.loads(core_v1.read_persistent_volume(pvc["spec"]["volumeName"], _preload_content=False).data)
        pv_node = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
        assert pv_node == where[f"db-{i}"]


def test_claim_that_no_pv_satisfies_stays_pending_with_upstreams_reason(
        scheduler, nodes, core_v1, namespace, storage):
    names = set_taints(core_v1, nodes(3, zones=0))
    local = storage.storage_class()
    for node in names:
        storage.local_volume(local, node, size="1Gi")
    core_v1.create_namespaced_persistent_volume_claim(namespace, claim("big", local, size="10Gi"),
                                                      _preload_content=False)
    core_v1.create_namespaced_pod(namespace, claim_pod("wants-big", scheduler, "big"), _preload_content=False)
    result = outcome(core_v1, namespace, ["wants-big"], only="wants-big", timeout=60)
    assert result["wants-big"] == {"node": "", "message": (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. "
        + NOT_HELPFUL.format(n=3))}
    assert claim_phase(core_v1, namespace, "big") == "Pending"


def test_unbound_immediate_claim_keeps_the_pod_waiting(scheduler, nodes, core_v1, namespace, storage):
    set_taints(core_v1, nodes(2, zones=0))
    immediate = storage.storage_class("Immediate")
    core_v1.create_namespaced_persistent_volume_claim(namespace, claim("nothing-to-bind", immediate),
                                                      _preload_content=False)
    core_v1.create_namespaced_pod(namespace, claim_pod("waits", scheduler, "nothing-to-bind"), _preload_content=False)
    result = outcome(core_v1, namespace, ["waits"], only="waits", timeout=60)
    # kube-scheduler 1.37's own words: VolumeBinding rejects in PreFilter, so DynamicResources'
    # PreFilter never runs and its PostFilter fails reading its state ("not found"), before
    # DefaultPreemption could run.
    assert result["waits"] == {"node": "", "message": (
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found")}


def test_immediate_claim_bound_to_a_pv_on_one_node_keeps_its_pod_there(
        scheduler, nodes, core_v1, namespace, storage):
    names = set_taints(core_v1, nodes(3, zones=0))
    immediate = storage.storage_class("Immediate")
    storage.local_volume(immediate, names[1])
    core_v1.create_namespaced_persistent_volume_claim(namespace, claim("pinned", immediate), _preload_content=False)
    wait_bound_claims(core_v1, namespace, ["pinned"])
    pods = [f"user-{i}" for i in range(3)]
    for pod in pods:  # three pods share the RWO claim on the same node: the volume pins them all
        core_v1.create_namespaced_pod(namespace, claim_pod(pod, scheduler, "pinned"), _preload_content=False)
    where = wait_nodes(core_v1, namespace, pods)
    assert set(where.values()) == {names[1]}, where


def test_dynamic_provisioning_through_the_selected_node(scheduler, nodes, core_v1, namespace, storage):
    names = set_taints(core_v1, nodes(3, zones=0))
    zone_of = {names[0]: "a", names[1]: "b", names[2]: "b"}
    for node, zone in zone_of.items():
        core_v1.patch_node(node, {"metadata": {"labels": {"lab.kubesched.io/zone": zone}}})
    dynamic = storage.storage_class(provisioner=PROVISIONER, allowedTopologies=[
        {"matchLabelExpressions": [{"key": "lab.kubesched.io/zone", "values": ["a"]}]}])
    with LabProvisioner(core_v1, PROVISIONER, dynamic) as provisioner:
        core_v1.create_namespaced_persistent_volume_claim(namespace, claim("fresh", dynamic), _preload_content=False)
        core_v1.create_namespaced_pod(namespace, claim_pod("needs-fresh", scheduler, "fresh"),
                                      _preload_content=False)
        where = wait_nodes(core_v1, namespace, ["needs-fresh"])
        wait_bound_claims(core_v1, namespace, ["fresh"])
        assert provisioner.errors == []
    assert where["needs-fresh"] == names[0]  # the only node in the class's allowed topology
    assert provisioner.created == {f"{namespace}/fresh": names[0]}


def test_generic_ephemeral_volume_is_provisioned_for_its_pod(scheduler, nodes, core_v1, namespace, storage):
    names = set_taints(core_v1, nodes(2, zones=0))
    dynamic = storage.storage_class(provisioner=PROVISIONER)
    with LabProvisioner(core_v1, PROVISIONER, dynamic) as provisioner:
        template = {"spec": claim("unused", dynamic)["spec"]}
        core_v1.create_namespaced_pod(namespace, claim_pod("scratch-user", scheduler, volumes=[
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]), _preload_content=False)
        where = wait_nodes(core_v1, namespace, ["scratch-user"])
        wait_bound_claims(core_v1, namespace, ["scratch-user-scratch"])
    assert where["scratch-user"] in names
    assert provisioner.created == {f"{namespace}/scratch-user-scratch": where["scratch-user"]}


def test_in_tree_inline_volumes_count_against_the_migrated_csi_drivers_limit(
        scheduler, nodes, core_v1, api_client, namespace):
    """An awsElasticBlockStore inline volume counts as ebs.csi.aws.com's (csi-translation-lib):
    the node's CSINode allows one such volume, which a running pod holds, and the other node's
    allows none. A pod with another EBS volume fits nowhere; one with the very volume the
    running pod holds fits beside it (the same CSI handle counts once)."""
    from kubernetes import client

    storage_v1 = client.StorageV1Api(api_client)
    full, none = set_taints(core_v1, nodes(2, zones=0))
    made = []
    try:
        for node, count in ((full, 1), (none, 0)):
            storage_v1.create_csi_node({"metadata": {"name": node}, "spec": {"drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": node, "allocatable": {"count": count}}]}},
                _preload_content=False)
            made.append(node)

        def ebs_pod(name: str, volume_id: str, **spec) -> dict:
            return {"metadata": {"name": name}, "spec": {
                "schedulerName": scheduler, "terminationGracePeriodSeconds": 0, **spec,
                "containers": [{"name": "c", "image": PAUSE}],
                "volumes": [{"name": "disk", "awsElasticBlockStore": {"volumeID": volume_id}}]}}

        core_v1.create_namespaced_pod(namespace, ebs_pod("holder", "aws://us-east-1a/vol-0000000000000000a",
                                                         nodeName=full), _preload_content=False)
        core_v1.create_namespaced_pod(namespace, ebs_pod("another-disk", "vol-0000000000000000b"),
                                      _preload_content=False)
        core_v1.create_namespaced_pod(namespace, ebs_pod("same-disk", "vol-0000000000000000a"),
                                      _preload_content=False)
        result = outcome(core_v1, namespace, ["holder", "another-disk", "same-disk"], timeout=30)
        assert result["same-disk"]["node"] == full
        assert result["another-disk"]["node"] == ""
        assert result["another-disk"]["message"] == (
            "0/2 nodes are available: 2 node(s) exceed max volume count. preemption: 0/2 nodes are available: "
            "2 No preemption victims found for incoming pod.")
    finally:
        for node in made:
            storage_v1.delete_csi_node(node, _preload_content=False)
