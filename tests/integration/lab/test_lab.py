"""The lab itself: a real cluster (API server with RBAC and default admission,
kube-controller-manager, kwok) whose kwok nodes live and whose pods run and terminate."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from lab.fake_nodes import FAKE_NODE_LABEL, KWOK_NODE_ANNOTATION, ZONE_LABEL, make_ready

ROOT = Path(__file__).resolve().parents[3]


def poll(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}", pytrace=False)


def read(call, *args) -> dict:
    return json.loads(call(*args, _preload_content=False).data)


def test_pod_is_created_and_read_back(core_v1, namespace):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
           "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m"}}}]}}
    core_v1.create_namespaced_pod(namespace, pod, _preload_content=False)
    read = json.loads(core_v1.read_namespaced_pod("probe", namespace, _preload_content=False).data)
    assert read["metadata"]["uid"]
    assert read["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    assert read["status"]["phase"] == "Pending"
    assert "nodeName" not in read["spec"]


def test_kwok_nodes_have_capacity_labels_ready_a_lease_and_no_taint(core_v1, api_client, nodes):
    names = nodes(4, cpu="8", memory="32Gi", pods=50, zones=2)
    listed = json.loads(core_v1.list_node(label_selector=f"{FAKE_NODE_LABEL}=true",
                                          _preload_content=False).data)["items"]
    by_name = {n["metadata"]["name"]: n for n in listed}
    assert sorted(by_name) == sorted(names)
    first = by_name[names[0]]
    assert first["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "50",
                                              "ephemeral-storage": "100Gi"}
    assert first["metadata"]["labels"]["kubernetes.io/hostname"] == names[0]
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in listed} == {"zone-0", "zone-1"}
    ready = [c for c in first["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True" and ready[0]["reason"] == "KubeletReady"  # kwok's words
    assert first["metadata"]["annotations"][KWOK_NODE_ANNOTATION[0]] == KWOK_NODE_ANNOTATION[1]
    # The admission taint was lifted by the node lifecycle controller, not by the test.
    assert all(not n["spec"].get("taints") for n in listed)
    from kubernetes import client

    coordination = client.CoordinationV1Api(api_client)
    lease = poll(lambda: _lease(coordination, names[0]), 15, "the node's Lease")
    renewed = lease["spec"]["renewTime"]
    poll(lambda: (_lease(coordination, names[0]) or {}).get("spec", {}).get("renewTime") != renewed, 25,
         "kwok to renew the node's Lease (the heartbeat the node lifecycle controller reads)")


def _lease(coordination, name: str) -> dict | None:
    from kubernetes.client.rest import ApiException

    try:
        return read(coordination.read_namespaced_lease, name, "kube-node-lease")
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def test_static_nodes_are_ready_untainted_and_have_no_lease(core_v1, api_client, nodes):
    from kubernetes import client

    names = nodes(2, static=True)
    for name in names:
        node = read(core_v1.read_node, name)
        assert KWOK_NODE_ANNOTATION[0] not in (node["metadata"].get("annotations") or {})
        assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
        assert not node["spec"].get("taints")
        assert _lease(client.CoordinationV1Api(api_client), name) is None


def test_a_node_that_never_becomes_ready_is_tainted_by_the_node_lifecycle_controller(core_v1, nodes):
    """Admission taints a new node not-ready:NoSchedule; NoExecute comes only from the
    controller, which reads the node's Ready=False condition (its kubelet, kwok, is alive and
    renews the Lease, but reports NotReady). A Ready node in another zone: with every zone
    down, the controller suspects itself and taints nothing."""
    nodes(1, zones=0, labels={ZONE_LABEL: "zone-up"})
    [name] = nodes(1, ready=False, zones=0, labels={ZONE_LABEL: "zone-down"})

    def not_ready_taints():
        taints = read(core_v1.read_node, name)["spec"].get("taints") or []
        effects = {t["effect"] for t in taints if t["key"] == "node.kubernetes.io/not-ready"}
        return effects if "NoExecute" in effects else None

    assert poll(not_ready_taints, 30, "the controller's not-ready:NoExecute taint") == {"NoSchedule", "NoExecute"}
    # The kubelet recovers: the controller lifts both taints.
    make_ready(core_v1, name)
    assert not read(core_v1.read_node, name)["spec"].get("taints")


def test_a_bound_pod_runs_and_a_deleted_one_terminates_for_its_grace_period(core_v1, namespace, nodes):
    (node,) = nodes(1)
    core_v1.create_namespaced_pod(namespace, {"metadata": {"name": "p"},
                                              "spec": {"terminationGracePeriodSeconds": 3,
                                                       "containers": [{"name": "c", "image": "x"}]}},
                                  _preload_content=False)
    pod = read(core_v1.read_namespaced_pod, "p", namespace)
    # ServiceAccount admission gave it the namespace's default account and its token volume.
    assert pod["spec"]["serviceAccountName"] == "default"
    assert any(v["name"].startswith("kube-api-access-") for v in pod["spec"]["volumes"])
    core_v1.create_namespaced_pod_binding("p", namespace, {"metadata": {"name": "p"},
                                                           "target": {"kind": "Node", "name": node}},
                                          _preload_content=False)

    def pod_if_running():
        pod = read(core_v1.read_namespaced_pod, "p", namespace)
        return pod if pod["status"].get("phase") == "Running" else None

    running = poll(pod_if_running, 20, "kwok to run the bound pod")
    assert running["spec"]["nodeName"] == node
    assert running["status"]["containerStatuses"][0]["state"]["running"]
    assert [c["status"] for c in running["status"]["conditions"] if c["type"] == "Ready"] == ["True"]

    deleted_at = time.monotonic()
    core_v1.delete_namespaced_pod("p", namespace, _preload_content=False)
    terminating = read(core_v1.read_namespaced_pod, "p", namespace)
    assert terminating["metadata"]["deletionTimestamp"] and terminating["metadata"]["deletionGracePeriodSeconds"] == 3

    def gone():
        from kubernetes.client.rest import ApiException

        try:
            core_v1.read_namespaced_pod("p", namespace, _preload_content=False)
        except ApiException as err:
            return err.status == 404
        return False

    poll(gone, 20, "kwok to delete the pod once its grace period ran out")
    # deletionTimestamp (deletion + grace period), from which kwok times the removal, has a
    # resolution of one second.
    assert time.monotonic() - deleted_at >= 2.0, "the pod stayed Terminating for its grace period"


def test_a_deleted_namespace_is_emptied_and_removed_by_the_namespace_controller(core_v1, namespace):
    from kubernetes.client.rest import ApiException

    name = namespace
    core_v1.create_namespaced_config_map(name, {"metadata": {"name": "cm"}}, _preload_content=False)
    core_v1.delete_namespace(name, _preload_content=False)

    def gone():
        try:
            core_v1.read_namespace(name, _preload_content=False)
        except ApiException as err:
            return err.status == 404
        return False

    poll(gone, 60, "the namespace controller to finalize the namespace")


def test_each_component_acts_with_its_own_identity(api_client):
    from kubernetes import client

    def allowed(user: str, verb: str, resource: str, subresource: str = "", namespace: str = "",
                group: str = "") -> bool:
        attributes = {"verb": verb, "resource": resource, "subresource": subresource, "namespace": namespace,
                      "group": group}
        review = client.AuthorizationV1Api(api_client).create_subject_access_review(
            {"spec": {"user": user, "resourceAttributes": attributes}}, _preload_content=False)
        return json.loads(review.data)["status"]["allowed"]

    # kube-controller-manager's bootstrap role: make the controllers' service accounts and tokens.
    assert allowed("system:kube-controller-manager", "create", "serviceaccounts", "token", "kube-system")
    assert not allowed("system:kube-controller-manager", "delete", "pods", namespace="default")
    # The controllers act as their own service accounts (--use-service-account-credentials).
    assert allowed("system:serviceaccount:kube-system:namespace-controller", "delete", "pods", namespace="default")
    # kwok: node status and Leases, pod status and deletion, nothing more.
    assert allowed("kwok-controller", "patch", "nodes", "status")
    assert allowed("kwok-controller", "update", "leases", namespace="kube-node-lease", group="coordination.k8s.io")
    assert allowed("kwok-controller", "delete", "pods", namespace="default")
    assert not allowed("kwok-controller", "get", "secrets", namespace="kube-system")
    assert not allowed("kwok-controller", "patch", "nodes")


def test_rbac_denies_an_unbound_identity(core_v1, api_client):
    from kubernetes import client

    review = client.AuthorizationV1Api(api_client).create_subject_access_review(
        {"spec": {"user": "system:kube-scheduler", "resourceAttributes": {
            "verb": "get", "resource": "secrets", "namespace": "kube-system"}}},
        _preload_content=False)
    status = json.loads(review.data)["status"]
    assert status["allowed"] is False
    bind = client.AuthorizationV1Api(api_client).create_subject_access_review(
        {"spec": {"user": "system:kube-scheduler", "resourceAttributes": {
            "verb": "create", "resource": "pods", "subresource": "binding", "namespace": "default"}}},
        _preload_content=False)
    assert json.loads(bind.data)["status"]["allowed"] is True


def test_kubectl_shows_the_pinned_server_version(lab_kubeconfig):
    bin_dir = subprocess.run(["bash", str(ROOT / "lab" / "k8s-binaries.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    out = subprocess.run([f"{bin_dir}/kubectl", "--kubeconfig", lab_kubeconfig, "version", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    version = json.loads(out)
    pinned = Path(bin_dir).parent.name
    assert version["serverVersion"]["gitVersion"] == pinned
    assert version["clientVersion"]["gitVersion"] == pinned
