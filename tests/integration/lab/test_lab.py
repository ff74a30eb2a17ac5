"""The lab itself: a real API server with RBAC, and fake nodes that take a bound pod."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lab.fake_nodes import FAKE_NODE_LABEL

ROOT = Path(__file__).resolve().parents[3]


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


def test_fake_nodes_have_capacity_labels_and_ready(core_v1, nodes):
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
    assert ready and ready[0]["status"] == "True"


def test_a_bound_pod_counts_as_scheduled(core_v1, namespace, nodes):
    (node,) = nodes(1)
    core_v1.create_namespaced_pod(namespace, {"metadata": {"name": "p"},
                                              "spec": {"containers": [{"name": "c", "image": "x"}]}},
                                  _preload_content=False)
    core_v1.create_namespaced_pod_binding("p", namespace, {"metadata": {"name": "p"},
                                                           "target": {"kind": "Node", "name": node}},
                                          _preload_content=False)
    read = json.loads(core_v1.read_namespaced_pod("p", namespace, _preload_content=False).data)
    assert read["spec"]["nodeName"] == node


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
