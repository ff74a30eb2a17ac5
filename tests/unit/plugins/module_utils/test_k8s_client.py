import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from ansible_collections.kubesched.scheduler.plugins.module_utils import k8s_client
from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "lab", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}},
                 {"name": "prod", "cluster": {"server": "https://10.0.0.1:6443"}}],
    "users": [{"name": "admin", "user": {"token": "secret-token"}}],
    "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}},
                 {"name": "prod", "context": {"cluster": "prod", "user": "admin"}}],
    "current-context": "lab",
}


def connection(**params):
    base = dict((name, None) for name in k8s_client.AUTH_ARG_SPEC)
    base.update(params)
    return base


class TestConfiguration:
    def test_kubeconfig_dict_and_context(self):
        assert k8s_client.build_configuration(connection(kubeconfig=KUBECONFIG)).host == "https://127.0.0.1:6443"
        configuration = k8s_client.build_configuration(connection(kubeconfig=KUBECONFIG, context="prod"))
        assert configuration.host == "https://10.0.0.1:6443"
        assert configuration.api_key["BearerToken"] == "Bearer secret-token"

    def test_kubeconfig_path(self, tmp_path):
        path = tmp_path / "config"
        path.write_text(json.dumps(KUBECONFIG))
        configuration = k8s_client.build_configuration(connection(kubeconfig=str(path)))
        assert configuration.host == "https://127.0.0.1:6443" and configuration.verify_ssl is False

    def test_options_override_the_kubeconfig(self, tmp_path):
        ca = tmp_path / "ca.crt"
        ca.write_text("x")
        configuration = k8s_client.build_configuration(connection(
            kubeconfig=KUBECONFIG, host="https://127.0.0.2:6443", api_key="other", ca_cert=str(ca),
            validate_certs=True))
        assert configuration.host == "https://127.0.0.2:6443"
        assert configuration.api_key == {"BearerToken": "Bearer other"}
        assert configuration.get_api_key_with_prefix("BearerToken") == "Bearer other"
        assert configuration.ssl_ca_cert == str(ca) and configuration.verify_ssl is True

    def test_host_alone_needs_no_kubeconfig(self):
        assert k8s_client.build_configuration(connection(host="https://127.0.0.1:1")).host == "https://127.0.0.1:1"

    @pytest.mark.parametrize("params, fragment", [
        (dict(kubeconfig="/nonexistent/config"), "kubeconfig: file /nonexistent/config does not exist"),
        (dict(kubeconfig=KUBECONFIG, context="staging"),
         "context: 'staging' is not a context in the kubeconfig dict; available contexts: lab, prod"),
        (dict(kubeconfig=["a"]), "kubeconfig must be a path or a dict, got list"),
        (dict(host="https://127.0.0.1:1", ca_cert="/nonexistent/ca.crt"), "ca_cert: file /nonexistent/ca.crt does not exist"),
        (dict(kubeconfig={"apiVersion": "v1", "kind": "Config"}), "kubeconfig: cannot use the kubeconfig dict"),
    ])
    def test_bad_connection_options(self, params, fragment):
        with pytest.raises(ModuleFailure) as failure:
            k8s_client.build_configuration(connection(**params))
        assert fragment in failure.value.message, failure.value.message

    def test_nothing_to_connect_with(self, monkeypatch, tmp_path):
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with pytest.raises(ModuleFailure) as failure:
            k8s_client.build_configuration(connection())
        assert "no connection details: set kubeconfig (or K8S_AUTH_KUBECONFIG)" in failure.value.message


def test_env_fallbacks_use_kubernetes_core_names():
    fallbacks = dict((name, spec["fallback"][1][0]) for name, spec in k8s_client.AUTH_ARG_SPEC.items())
    assert fallbacks == {
        "kubeconfig": "K8S_AUTH_KUBECONFIG", "context": "K8S_AUTH_CONTEXT", "host": "K8S_AUTH_HOST",
        "api_key": "K8S_AUTH_API_KEY", "ca_cert": "K8S_AUTH_SSL_CA_CERT", "client_cert": "K8S_AUTH_CERT_FILE",
        "client_key": "K8S_AUTH_KEY_FILE", "validate_certs": "K8S_AUTH_VERIFY_SSL",
    }


class FailingMethod(object):
    def __init__(self, error):
        self.error = error

    def __call__(self, *args, **kwargs):
        raise self.error


def api_error(status, reason, message):
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


class TestErrors:
    @pytest.fixture
    def api(self):
        return k8s_client.connect(connection(host="https://127.0.0.1:6443"))

    def test_forbidden_names_user_verb_and_resource(self, api):
        message = 'nodes "n1" is forbidden: User "jane" cannot patch resource "nodes" in API group "" at the cluster scope'
        error = api_error(403, "Forbidden", message)
        with pytest.raises(ModuleFailure) as failure:
            api._call("patch", "nodes", "n1", FailingMethod(error))
        assert failure.value.message.startswith(
            "forbidden (HTTP 403): user 'jane' may not patch nodes 'n1' on https://127.0.0.1:6443. "
            "Grant it RBAC permission (verb 'patch' on resource 'nodes')")

    def test_unauthorized_points_at_credentials(self, api):
        with pytest.raises(ModuleFailure) as failure:
            api._call("get", "nodes", "n1", FailingMethod(api_error(401, "Unauthorized", "Unauthorized")))
        assert "rejected the credentials (HTTP 401 Unauthorized)" in failure.value.message
        assert "Check api_key, client_cert/client_key" in failure.value.message

    def test_not_found_reads_as_none(self, api):
        assert api._call("get", "nodes", "n1", FailingMethod(api_error(404, "Not Found", "not found"))) is None

    def test_conflict_on_write_is_retryable(self, api):
        with pytest.raises(k8s_client.Conflict):
            api._call("patch", "nodes", "n1", FailingMethod(api_error(409, "Conflict", "the object has been modified")))

    def test_unreachable_server_names_the_url(self, api):
        refused = urllib3.exceptions.MaxRetryError(None, "/api/v1/nodes", reason=urllib3.exceptions.NewConnectionError(
            None, "Failed to establish a new connection: [Errno 111] Connection refused"))
        with pytest.raises(ModuleFailure) as failure:
            api._call("get", "nodes", "n1", FailingMethod(refused))
        assert failure.value.message == (
            "cannot reach the Kubernetes API server at https://127.0.0.1:6443 ([Errno 111] Connection refused). "
            "Check that it is running and that kubeconfig/context or host (K8S_AUTH_HOST) point to it")

    def test_certificate_failure_points_at_ca_cert(self, api):
        bad_tls = urllib3.exceptions.MaxRetryError(None, "/", reason=urllib3.exceptions.SSLError(
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
        with pytest.raises(ModuleFailure) as failure:
            api._call("get", "nodes", "n1", FailingMethod(bad_tls))
        assert "TLS verification of the API server at https://127.0.0.1:6443 failed" in failure.value.message
        assert "Set ca_cert (or K8S_AUTH_SSL_CA_CERT)" in failure.value.message
