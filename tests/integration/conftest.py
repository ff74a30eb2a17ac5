"""Fixtures for tests against the lab cluster (`make lab-up`: etcd, kube-apiserver,
kube-controller-manager and kwok).

Tests run serially against one cluster. A test that needs a known node set asks for the
`nodes` factory, which owns the cluster's nodes for the length of that test; its nodes are
kwok nodes, returned once Ready and untainted. A test's `namespace` is ready for pods (its
`default` ServiceAccount exists) and is deleted afterwards by the namespace controller, as
on any cluster.
"""

from __future__ import annotations

import os
import re
import uuid

import pytest

from lab.fake_nodes import DEFAULT_KUBECONFIG, create_nodes, delete_nodes
from lab.namespaces import NoDefaultServiceAccount, wait_for_default_service_account


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


@pytest.fixture
def namespace(core_v1, request):
    """A fresh namespace for this test, ready for pods; deleted afterwards."""
    from kubernetes.client.rest import ApiException

    slug = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"kubesched.io/test": "true"}}},
                             _preload_content=False)
    try:
        wait_for_default_service_account(core_v1, name)
    except NoDefaultServiceAccount as err:
        pytest.fail(str(err), pytrace=False)
    yield name
    try:
        core_v1.delete_namespace(name, _preload_content=False)
    except ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def nodes(core_v1):
    """Factory: nodes(count, **create_nodes_kwargs) -> names.

    The first call in a test deletes every node in the cluster so that the test owns the
    node set; every node created is deleted after the test. Nodes are kwok nodes unless
    static=True, returned once Ready and carrying only the taints asked for.
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
