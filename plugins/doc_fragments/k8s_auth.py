# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Connection options shared by every module (module_utils.k8s_client.AUTH_ARG_SPEC)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, several paths joined by C(:), or the kubeconfig itself as a dictionary.
      - If neither O(kubeconfig) nor O(host) is given, the file named by the E(KUBECONFIG) environment variable
        or C(~/.kube/config) is used, and inside a pod its service account.
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: raw
  context:
    description:
      - The kubeconfig context to use instead of its current context.
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the API server, for example C(https://127.0.0.1:6443). Overrides the server of the kubeconfig.
      - Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token to authenticate with. Overrides the credentials of the kubeconfig.
      - Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  ca_cert:
    description:
      - Path to the CA certificate that signed the API server's certificate. Overrides the kubeconfig's.
      - Can also be set with the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate to authenticate with. Overrides the kubeconfig's.
      - Can also be set with the E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the private key of O(client_cert). Overrides the kubeconfig's.
      - Can also be set with the E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
  validate_certs:
    description:
      - Whether to verify the API server's certificate. Overrides the kubeconfig's C(insecure-skip-tls-verify).
      - Can also be set with the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [verify_ssl]
requirements:
  - kubernetes (the official Kubernetes Python client)
notes:
  - The environment variable names are those of the C(kubernetes.core) collection, so existing setups keep working.
  - Errors name the option to fix. An unreachable API server, a missing kubeconfig or context, a certificate that
    does not verify and an RBAC denial (with the verb, resource and user) are each reported in one line.
"""
