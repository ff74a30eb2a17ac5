"""Fixtures for tests against the lab API server (`make lab-up`).

Tests run serially against one API server. A test that needs a known node set asks for
the `nodes` factory, which owns the cluster's nodes for the length of that test.
"""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from lab.fake_nodes import DEFAULT_KUBECONFIG, create_nodes, delete_nodes


def _lab_ready(api_client) -> bool:
    try:
        response = api_client.call_api("GET", api_client.configuration.host + "/readyz", _request_timeout=5)
        return response.status == 200
    except Exception:  # noqa: BLE001 - any failure means "not ready"; the caller says what to do
        return False


@pytest.fixture(scope="session")
def lab_kubeconfig() -> str:
    path = os.environ.get("KUBESCHED_LAB_KUBECONFIG", DEFAULT_KUBECONFIG)
    if not os.path.exists(path):
        pytest.fail(f"{path} does not exist: the lab API server is not up. Run 'make lab-up' first.",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def api_client(lab_kubeconfig):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=lab_kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = 32
    api = client.ApiClient(configuration)
    if not _lab_ready(api):
        pytest.fail(f"the lab API server at {configuration.host} does not answer /readyz. "
                    "Run 'make lab-status' and 'make lab-up'.", pytrace=False)
    yield api
    api.close()


@pytest.fixture(scope="session")
def core_v1(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


def _remove_namespace(core_v1, name: str) -> None:
    """Delete a namespace and finalize it: the lab has no controller-manager to do it."""
    from kubernetes.client.rest import ApiException

    pods = json.loads(core_v1.list_namespaced_pod(name, _preload_content=False).data)["items"]
    for pod in pods:
        try:
            core_v1.delete_namespaced_pod(pod["metadata"]["name"], name, grace_period_seconds=0,
                                          _preload_content=False)
        except ApiException as err:
            if err.status != 404:
                raise
    try:
        core_v1.delete_namespace(name, _preload_content=False)
        core_v1.replace_namespace_finalize(
            name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                   "spec": {"finalizers": []}}, _preload_content=False)
    except ApiException as err:
        if err.status not in (404, 409):
            raise


@pytest.fixture
def namespace(core_v1, request):
    """A fresh namespace for this test, removed afterwards."""
    slug = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"kubesched.io/test": "true"}}},
                             _preload_content=False)
    yield name
    _remove_namespace(core_v1, name)


@pytest.fixture
def nodes(core_v1):
    """Factory: nodes(count, **create_nodes_kwargs) -> names.

    The first call in a test deletes every node in the cluster so that the test owns the
    node set; every node created is deleted after the test.
    """
    created: list[str] = []
    wiped = False

    def make(count: int, **kwargs) -> list[str]:
        nonlocal wiped
        if not wiped:
            delete_nodes(core_v1)
            wiped = True
        kwargs.setdefault("prefix", f"n{uuid.uuid4().hex[:4]}-")
        names = create_nodes(core_v1, count, **kwargs)
        created.extend(names)
        return names

    yield make
    if created:
        delete_nodes(core_v1, created)
