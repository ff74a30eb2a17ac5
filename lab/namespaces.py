"""Namespaces on the lab, as on any cluster with ServiceAccount admission: a pod is refused
until the serviceaccount controller (kube-controller-manager) has made its namespace's
`default` ServiceAccount, a moment after the namespace."""

from __future__ import annotations

import time


class NoDefaultServiceAccount(RuntimeError):
    """The namespace's `default` ServiceAccount did not appear in time."""


def wait_for_default_service_account(core_v1, namespace: str, timeout: float = 30.0) -> None:
    from kubernetes.client.rest import ApiException

    deadline = time.monotonic() + timeout
    while True:
        try:
            core_v1.read_namespaced_service_account("default", namespace, _preload_content=False)
            return
        except ApiException as err:
            if err.status != 404:
                raise
        if time.monotonic() > deadline:
            raise NoDefaultServiceAccount(
                f"namespace {namespace} has no 'default' ServiceAccount after {timeout:.0f} s: the serviceaccount "
                "controller does not run. Check 'make lab-status' and the lab's kube-controller-manager.log.")
        time.sleep(0.1)
