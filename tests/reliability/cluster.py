"""The API server the suites run against: ``Cluster`` wraps one kubeconfig with the few
calls the suites need, as raw JSON. The private lab it runs on is lab.private_lab.PrivateLab;
lab.pod_watch.PodWatch follows the bindings.
"""

from __future__ import annotations

import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from lab.namespaces import wait_for_default_service_account

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class Cluster:
    def __init__(self, kubeconfig: str | os.PathLike):
        from kubernetes import client, config

        self.kubeconfig = str(kubeconfig)
        configuration = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 32
        configuration.retries = False
        self.configuration = configuration
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.events = client.EventsV1Api(self.api_client)
        self.authorization = client.AuthorizationV1Api(self.api_client)

    @property
    def server(self) -> str:
        return self.configuration.host

    def close(self) -> None:
        self.api_client.close()

    def ready(self) -> bool:
        try:
            resp = self.api_client.call_api("GET", self.server + "/readyz", _request_timeout=3,
                                            _preload_content=False)
            return resp[0].status == 200 if isinstance(resp, tuple) else resp.status == 200
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return False

    # -- namespaces ---------------------------------------------------------------------

    def create_namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": {"kubesched.io/reliability": "true"}}},
                                   _preload_content=False)
        # ServiceAccount admission refuses pods until the controller made the namespace's
        # `default` ServiceAccount; a busy machine once made the first pod lose that race.
        wait_for_default_service_account(self.core, name)
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete pods with no grace period, then the namespace, finalized here so the
        suite does not wait for the namespace controller."""
        from kubernetes.client.rest import ApiException

        try:
            self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0, _preload_content=False)
            self.core.delete_namespace(name, _preload_content=False)
            self.core.replace_namespace_finalize(name, {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": name}, "spec": {"finalizers": []}},
                                                 _preload_content=False)
        except ApiException as err:
            if err.status not in (404, 409):
                raise

    # -- nodes --------------------------------------------------------------------------

    def ensure_nodes(self, count: int, prefix: str = "rel-node-") -> list[str]:
        """count schedulable fake nodes named prefix0..: created when missing, and without the
        not-ready taint that the TaintNodesByCondition admission plugin puts on every new
        node (no kubelet will ever report Ready and no node controller will lift it)."""
        from lab.fake_nodes import create_nodes

        have = {n["metadata"]["name"]: n for n in
                json.loads(self.core.list_node(_preload_content=False).data)["items"]}
        wanted = [f"{prefix}{i}" for i in range(count)]
        if any(name not in have for name in wanted):
            create_nodes(self.core, count, prefix=prefix)
            have = {n["metadata"]["name"]: n for n in
                    json.loads(self.core.list_node(_preload_content=False).data)["items"]}
        for name in wanted:
            taints = (have[name].get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if kept != taints:
                self.core.patch_node(name, {"spec": {"taints": kept or None}}, _preload_content=False)
        return wanted

    # -- pods ---------------------------------------------------------------------------

    def create_pods(self, namespace: str, count: int, scheduler_name: str, prefix: str = "p",
                    workers: int = 16, **spec) -> list[str]:
        names = [f"{prefix}-{i:05d}" for i in range(count)]

        def create(name: str) -> None:
            self.core.create_namespaced_pod(namespace, pod_manifest(name, scheduler_name, **spec),
                                            _preload_content=False)

        with ThreadPoolExecutor(max_workers=min(workers, max(1, count))) as pool:
            list(pool.map(create, names))
        return names

    def pods(self, namespace: str) -> list[dict]:
        return json.loads(self.core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]

    def pod(self, namespace: str, name: str) -> dict | None:
        from kubernetes.client.rest import ApiException

        try:
            return json.loads(self.core.read_namespaced_pod(name, namespace, _preload_content=False).data)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def bind(self, namespace: str, name: str, node: str) -> int:
        """POST pods/binding as another scheduler would; returns the HTTP status."""
        from kubernetes.client.rest import ApiException

        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self.core.create_namespaced_binding(namespace, body, _preload_content=False)
            return 201
        except ApiException as err:
            return err.status

    def scheduled_events(self, namespace: str) -> dict[str, int]:
        """Pod name -> how many times a Scheduled event was recorded for it (series included)."""
        items = json.loads(self.events.list_namespaced_event(namespace, _preload_content=False).data)["items"]
        counts: dict[str, int] = {}
        for event in items:
            if event.get("reason") != "Scheduled":
                continue
            name = (event.get("regarding") or {}).get("name", "")
            counts[name] = counts.get(name, 0) + int((event.get("series") or {}).get("count") or 1)
        return counts

    def lease_holder(self, namespace: str, name: str) -> str | None:
        from kubernetes.client.rest import ApiException

        try:
            lease = json.loads(self.coordination.read_namespaced_lease(name, namespace, _preload_content=False).data)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return (lease.get("spec") or {}).get("holderIdentity") or ""


def pod_manifest(name: str, scheduler_name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "reliability"}},
            "spec": {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": PAUSE_IMAGE,
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                     **spec}}
