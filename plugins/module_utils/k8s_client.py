# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Connection options shared by every module, and the one place that talks to the API server.

`KubeApi` speaks plain dicts (the API's JSON) rather than the client's models, so fields the
client does not know survive a round trip, and turns every client or transport error into a
ModuleFailure that says which option to check.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import traceback

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

# Environment variable names are kubernetes.core's, so existing setups keep working.
AUTH_ARG_SPEC = dict(
    kubeconfig=dict(type="raw", no_log=True, fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"], fallback=(env_fallback, ["K8S_AUTH_SSL_CA_CERT"])),
    client_cert=dict(type="path", aliases=["cert_file"], fallback=(env_fallback, ["K8S_AUTH_CERT_FILE"])),
    client_key=dict(
        type="path", aliases=["key_file"], no_log=False, fallback=(env_fallback, ["K8S_AUTH_KEY_FILE"])
    ),
    validate_certs=dict(type="bool", aliases=["verify_ssl"], fallback=(env_fallback, ["K8S_AUTH_VERIFY_SSL"])),
)

# (connect, read) seconds: a firewalled address fails in seconds instead of hanging the play.
REQUEST_TIMEOUT = (10, 60)
FIELD_MANAGER = "kubesched-ansible"

_FORBIDDEN_USER_RE = re.compile(r'User "([^"]*)"')
_ERRNO_RE = re.compile(r"\[Errno -?\d+\][^\"')]*")


def _strings_in(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_in(item)
    elif isinstance(value, str) and value:
        yield value


def prepare_module(module):
    """What every module does first: require the kubernetes client, and narrow kubeconfig's masking.

    kubeconfig is no_log because a dict holds credentials, but masking all of its strings
    would also blank out a file path, or words such as 'v1' or a cluster name, wherever they
    appear in messages. Only the credentials (the `user` of each entry in `users`) stay masked.
    """
    if not HAS_KUBERNETES:
        module.fail_json(
            msg=missing_required_lib("kubernetes", url="https://pypi.org/project/kubernetes/"),
            exception=KUBERNETES_IMPORT_ERROR,
        )
    kubeconfig = module.params.get("kubeconfig")
    secrets = set()
    if isinstance(kubeconfig, dict):
        for entry in kubeconfig.get("users") or []:
            secrets.update(_strings_in(entry.get("user") if isinstance(entry, dict) else entry))
    module.no_log_values.difference_update(set(_strings_in(kubeconfig)) - secrets)


def _kubeconfig_paths(kubeconfig):
    return [os.path.expanduser(path) for path in kubeconfig.split(os.pathsep) if path]


def _contexts_of(kubeconfig):
    if isinstance(kubeconfig, dict):
        return [entry.get("name") for entry in kubeconfig.get("contexts") or []]
    try:
        contexts, _active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # the caller is already reporting a broken file; listing is best effort
        return []
    return [entry.get("name") for entry in contexts]


def _load_kubeconfig(configuration, kubeconfig, context):
    source = "the kubeconfig dict" if isinstance(kubeconfig, dict) else "kubeconfig file %s" % kubeconfig
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(
                kubeconfig, context=context, client_configuration=configuration, persist_config=False
            )
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration, persist_config=False
            )
    except ConfigException as error:
        if context and "context" in str(error):
            raise ModuleFailure(
                "context: %r is not a context in %s; available contexts: %s. Fix context (or K8S_AUTH_CONTEXT)"
                % (context, source, ", ".join(name for name in _contexts_of(kubeconfig) if name) or "none")
            ) from None
        raise ModuleFailure(
            "kubeconfig: cannot use %s: %s. Fix kubeconfig (or K8S_AUTH_KUBECONFIG)" % (source, error)
        ) from None
    except (IOError, OSError, ValueError) as error:
        raise ModuleFailure(
            "kubeconfig: cannot read %s: %s. Fix kubeconfig (or K8S_AUTH_KUBECONFIG)" % (source, error)
        ) from None


def build_configuration(params):
    """A kubernetes client Configuration from the connection options (after env fallbacks).

    kubeconfig (a path, several joined by os.pathsep, or a dict) or the default kubeconfig
    supplies the base; host, api_key, ca_cert, client_cert, client_key and validate_certs
    override it. With neither a kubeconfig nor host, the in-cluster service account is used.
    """
    configuration = k8s_client.Configuration()
    kubeconfig = params.get("kubeconfig")
    context = params.get("context")
    if kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
        raise ModuleFailure("kubeconfig must be a path or a dict, got %s" % type(kubeconfig).__name__)
    if isinstance(kubeconfig, str):
        missing = [path for path in _kubeconfig_paths(kubeconfig) if not os.path.exists(path)]
        if missing or not _kubeconfig_paths(kubeconfig):
            raise ModuleFailure(
                "kubeconfig: file %s does not exist. Fix kubeconfig (or K8S_AUTH_KUBECONFIG) to point to a "
                "kubeconfig file" % ", ".join(missing or [repr(kubeconfig)])
            )
        kubeconfig = os.pathsep.join(_kubeconfig_paths(kubeconfig))
    if kubeconfig is not None:
        _load_kubeconfig(configuration, kubeconfig, context)
    elif not params.get("host"):
        default_path = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
        if os.path.exists(default_path):
            _load_kubeconfig(configuration, default_path, context)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except ConfigException:
                raise ModuleFailure(
                    "no connection details: set kubeconfig (or K8S_AUTH_KUBECONFIG) to a kubeconfig file, or host "
                    "(or K8S_AUTH_HOST) to the API server URL; %s does not exist and this is not a pod"
                    % default_path
                ) from None
    if params.get("host"):
        configuration.host = params["host"]
    if params.get("api_key"):
        configuration.api_key = {"BearerToken": "Bearer " + params["api_key"]}
        # The kubeconfig loader's hook would put its own token back before every request.
        configuration.refresh_api_key_hook = None
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    if params.get("client_cert"):
        configuration.cert_file = params["client_cert"]
    if params.get("client_key"):
        configuration.key_file = params["client_key"]
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    for option, path in (("ca_cert", configuration.ssl_ca_cert), ("client_cert", configuration.cert_file),
                         ("client_key", configuration.key_file)):
        if params.get(option) and not os.path.isfile(path):
            raise ModuleFailure("%s: file %s does not exist. Fix %s" % (option, path, option))
    return configuration


def connect(params):
    """A KubeApi for the module's connection options."""
    return KubeApi(k8s_client.ApiClient(build_configuration(params)))


def _server_message(error):
    try:
        return json.loads(error.body).get("message") or error.reason
    except (TypeError, ValueError, AttributeError):
        return error.body or error.reason


def resource_version_guard(obj):
    """The JSON patch operation that makes the API server refuse (409) a write based on a stale read of obj."""
    return {"op": "replace", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]}


class Conflict(Exception):
    """HTTP 409 on a write made with a resourceVersion: the object changed since it was read."""


class KubeApi(object):
    """The API calls the modules make, with dict bodies and user-facing errors.

    Reads return None for a missing object; every other failure raises ModuleFailure, except
    a 409 on a write, which raises Conflict so the caller can re-read and retry.
    """

    def __init__(self, api_client):
        self.api_client = api_client
        self.host = api_client.configuration.host

    # Each generated API class is imported on first use: CoreV1Api alone takes about a second
    # to import, which priority_class never needs.

    @property
    def core(self):
        return k8s_client.CoreV1Api(self.api_client)

    @property
    def scheduling(self):
        return k8s_client.SchedulingV1Api(self.api_client)

    @property
    def authorization(self):
        return k8s_client.AuthorizationV1Api(self.api_client)

    def _call(self, verb, resource, name, method, *args, **kwargs):
        kwargs.update(_preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        try:
            response = method(*args, **kwargs)
        except ApiException as error:
            if error.status == 404 and verb in ("get", "delete"):
                return None
            raise self._api_failure(error, verb, resource, name) from None
        except urllib3.exceptions.HTTPError as error:
            raise self._transport_failure(error) from None
        data = response.data
        return json.loads(data) if data else {}

    def _api_failure(self, error, verb, resource, name):
        message = _server_message(error)
        target = "%s %r" % (resource, name) if name else resource
        if error.status == 409 and verb != "create":
            return Conflict(message)
        if error.status == 401:
            return ModuleFailure(
                "the API server at %s rejected the credentials (HTTP 401 Unauthorized) when trying to %s %s. "
                "Check api_key, client_cert/client_key or the user of kubeconfig/context" % (self.host, verb, target)
            )
        if error.status == 403:
            user = _FORBIDDEN_USER_RE.search(message or "")
            who = ("user %r" % user.group(1)) if user else "the identity from kubeconfig/context"
            return ModuleFailure(
                "forbidden (HTTP 403): %s may not %s %s on %s. Grant it RBAC permission (verb %r on resource %r), "
                "or connect as a user who has it through kubeconfig/context/api_key. Server said: %s"
                % (who, verb, target, self.host, verb, resource, message)
            )
        return ModuleFailure(
            "the API server at %s refused to %s %s (HTTP %s %s): %s"
            % (self.host, verb, target, error.status, error.reason, message)
        )

    def _transport_failure(self, error):
        reason = str(getattr(error, "reason", None) or error)
        if "CERTIFICATE_VERIFY_FAILED" in reason or isinstance(getattr(error, "reason", None), urllib3.exceptions.SSLError):
            return ModuleFailure(
                "TLS verification of the API server at %s failed: %s. Set ca_cert (or K8S_AUTH_SSL_CA_CERT) to the "
                "CA that signed its certificate, or fix host/kubeconfig" % (self.host, reason)
            )
        errno = _ERRNO_RE.search(reason)
        return ModuleFailure(
            "cannot reach the Kubernetes API server at %s (%s). Check that it is running and that kubeconfig/context "
            "or host (K8S_AUTH_HOST) point to it" % (self.host, errno.group(0) if errno else reason)
        )

    # Nodes

    def read_node(self, name):
        return self._read("nodes", name, self.core.read_node, name)

    def list_nodes(self, label_selector=None):
        return self._call("list", "nodes", None, self.core.list_node, label_selector=label_selector)["items"]

    # Patches are JSON patches (a list body), which every client version sends as
    # application/json-patch+json; the caller includes the resourceVersion guard.

    def patch_node(self, name, operations, dry_run=False):
        return self._call(
            "patch", "nodes", name, self.core.patch_node, name, operations,
            dry_run="All" if dry_run else None, field_manager=FIELD_MANAGER,
        )

    def list_pods_on_node(self, node_name):
        return self._call(
            "list", "pods", None, self.core.list_pod_for_all_namespaces, field_selector="spec.nodeName=" + node_name
        )["items"]

    # PriorityClasses

    def read_priority_class(self, name):
        return self._read("priorityclasses", name, self.scheduling.read_priority_class, name)

    def list_priority_classes(self):
        return self._call("list", "priorityclasses", None, self.scheduling.list_priority_class)["items"]

    def create_priority_class(self, body, dry_run=False):
        return self._call(
            "create", "priorityclasses", body["metadata"]["name"], self.scheduling.create_priority_class, body,
            dry_run="All" if dry_run else None, field_manager=FIELD_MANAGER,
        )

    def patch_priority_class(self, name, operations, dry_run=False):
        return self._call(
            "patch", "priorityclasses", name, self.scheduling.patch_priority_class, name, operations,
            dry_run="All" if dry_run else None, field_manager=FIELD_MANAGER,
        )

    def delete_priority_class(self, name, resource_version, dry_run=False):
        """Delete only the version that was read, so a concurrent change is not lost silently."""
        body = {"preconditions": {"resourceVersion": resource_version}}
        if dry_run:
            # With a DeleteOptions body the API server reads the options from the body alone and
            # ignores the dryRun query parameter; a dry run must say so in the body.
            body["dryRun"] = ["All"]
        return self._call(
            "delete", "priorityclasses", name, self.scheduling.delete_priority_class, name, body=body,
        )

    def can_i(self, verb, group, resource):
        """Whether the connecting identity may verb resource (a SelfSubjectAccessReview)."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource}},
        }
        answer = self._call("create", "selfsubjectaccessreviews", None,
                            self.authorization.create_self_subject_access_review, review)
        return bool(answer.get("status", {}).get("allowed"))

    def _read(self, resource, name, method, *args):
        return self._call("get", resource, name, method, *args)
