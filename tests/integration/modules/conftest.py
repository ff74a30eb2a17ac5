"""Fixtures for the module integration tests (helpers.py runs the modules)."""

import os
import uuid

import pytest

from .helpers import read_json, run_in_process, start_at_gate


@pytest.fixture
def run_module(lab_kubeconfig):
    """run_module(name, check_mode=False, diff=True, env=None, **args) -> the module's JSON result.

    kubeconfig defaults to the lab's admin kubeconfig; pass kubeconfig=None to leave it out.
    """
    def run(module, check_mode=False, diff=True, env=None, **args):
        args.setdefault("kubeconfig", lab_kubeconfig)
        args = {key: value for key, value in args.items() if value is not None}
        return run_in_process(module, args, check_mode=check_mode, diff=diff, env=env)
    return run


@pytest.fixture
def start_module(lab_kubeconfig, tmp_path):
    """start_module(name, **args) -> a module process headed for the starting gate (helpers.wait_at_gate, release)."""
    def start(module, **args):
        args.setdefault("kubeconfig", lab_kubeconfig)
        return start_at_gate(module, args, tmp_path)
    return start


KUBELET_BETA_LABELS = {"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}


@pytest.fixture
def bare_nodes(nodes):
    """Factory like `nodes`: Ready kwok nodes that carry exactly the given taints (default none).

    They carry the beta os and arch labels as a kubelet's node does: otherwise
    kube-controller-manager adds them a moment after creation, and a test that compares a
    node's labels before and after a module run would see them appear."""
    def make(count, taints=None, labels=None, **kwargs):
        return nodes(count, taints=taints, labels={**KUBELET_BETA_LABELS, **(labels or {})}, **kwargs)
    return make


@pytest.fixture(scope="session")
def scheduling_v1(api_client):
    from kubernetes import client

    return client.SchedulingV1Api(api_client)


@pytest.fixture
def cluster_snapshot(core_v1, scheduling_v1):
    """snapshot(names) -> the named nodes and PriorityClasses with their resourceVersions.

    Equal snapshots prove nothing was written to them. Names that do not exist are recorded
    as absent, so a snapshot also proves nothing was created. (Other suites share the lab and
    create their own nodes meanwhile, so the snapshot covers only the names a test owns.)
    """
    def snapshot(names):  # names: ("node" | "priorityclass", name) pairs
        names = set(names)
        nodes = read_json(core_v1.list_node)["items"]
        classes = read_json(scheduling_v1.list_priority_class)["items"]
        state = dict.fromkeys(names)
        state.update({
            ("node", node["metadata"]["name"]): (node["metadata"]["resourceVersion"], node["spec"].get("taints"),
                                                 node["metadata"].get("labels"), node["spec"].get("unschedulable"))
            for node in nodes if ("node", node["metadata"]["name"]) in names})
        state.update({
            ("priorityclass", pc["metadata"]["name"]): (pc["metadata"]["resourceVersion"], pc.get("value"),
                                                        pc.get("globalDefault"), pc.get("preemptionPolicy"))
            for pc in classes if ("priorityclass", pc["metadata"]["name"]) in names})
        return state
    return snapshot


@pytest.fixture
def priority_classes(scheduling_v1):
    """Factory: a unique PriorityClass name for this test; every class named is deleted afterwards."""
    from kubernetes.client.exceptions import ApiException

    names = []

    def make(prefix="pc"):
        name = "%s-%s" % (prefix, uuid.uuid4().hex[:6])
        names.append(name)
        return name

    yield make
    for name in names:
        try:
            scheduling_v1.delete_priority_class(name, _preload_content=False)
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def limited_identity(api_client, core_v1, namespace, lab_kubeconfig):
    """A service account that may read nodes, pods and PriorityClasses but change nothing.

    Returns connection options (host, api_key, ca_cert) for it, through which the modules
    meet a real RBAC 403.
    """
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(api_client)
    name = "reader-%s" % uuid.uuid4().hex[:6]
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": name}}, _preload_content=False)
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]},
    ]}, _preload_content=False)
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }, _preload_content=False)
    token = read_json(core_v1.create_namespaced_service_account_token, name, namespace,
                      {"spec": {"expirationSeconds": 3600}})["status"]["token"]
    yield {
        "user": "system:serviceaccount:%s:%s" % (namespace, name),
        "options": {"host": api_client.configuration.host, "api_key": token,
                    "ca_cert": os.path.join(os.path.dirname(lab_kubeconfig), "ca.crt")},
    }
    rbac.delete_cluster_role_binding(name, _preload_content=False)
    rbac.delete_cluster_role(name, _preload_content=False)
