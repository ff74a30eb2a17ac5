"""The harnesses' one way to an API server: ``Cluster`` wraps one kubeconfig.

The benchmark creates and deletes tens of thousands of objects per run, so bulk work goes
as raw JSON over a pooled urllib3 connection, fanned out over threads (the kubernetes
client's model objects would make the harness itself the bottleneck). The reliability
suites make a few calls the kubernetes client already offers: `core`, `coordination`,
`events`, `authorization` and `api_client` are there for them. The private lab a harness
runs on is lab.private_lab.PrivateLab; lab.pod_watch.PodWatch follows the bindings.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable
from urllib.parse import urlencode

import urllib3

from lab.namespaces import wait_for_default_service_account

# The taint the API server's TaintNodesByCondition admission gives every new node; a kubelet
# lifts it once Ready, and fake nodes have none (kwok's, once Ready, do).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, text: str):
        super().__init__(f"{method} {path} failed: HTTP {status}: {text[:300]}")
        self.status = status


class Cluster:
    """One API server, reached with the credentials of a kubeconfig."""

    def __init__(self, kubeconfig: str | os.PathLike, pool_size: int = 96):
        from kubernetes import client, config

        kubeconfig = str(kubeconfig)
        if not os.path.exists(kubeconfig):
            raise FileNotFoundError(f"kubeconfig {kubeconfig} does not exist; run 'make lab-up' or pass --kubeconfig")
        configuration = client.Configuration()
        # load_kube_config writes embedded certificates to files that live until exit;
        # the raw binder reads the same files.
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = pool_size
        configuration.retries = False
        self.kubeconfig = kubeconfig
        self.configuration = configuration
        self.server = configuration.host
        self.ca_file = configuration.ssl_ca_cert
        self.cert_file = configuration.cert_file
        self.key_file = configuration.key_file
        self.token = (configuration.api_key or {}).get("authorization", "").removeprefix("Bearer ").strip()
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.events = client.EventsV1Api(self.api_client)
        self.authorization = client.AuthorizationV1Api(self.api_client)
        self._headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            self._headers["Authorization"] = f"Bearer {self.token}"
        self._pool = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, block=True, cert_reqs="CERT_REQUIRED",
            ca_certs=self.ca_file, cert_file=self.cert_file, key_file=self.key_file,
            retries=False)

    def close(self) -> None:
        self.api_client.close()
        self._pool.clear()

    # -- raw JSON ---------------------------------------------------------------------------

    def _url(self, path: str, query: dict | None) -> str:
        return f"{self.server}{path}" + (f"?{urlencode(query)}" if query else "")

    def request(self, method: str, path: str, body: dict | None = None, query: dict | None = None,
                ok: Iterable[int] = (200, 201), timeout: float = 60) -> dict:
        payload = json.dumps(body).encode() if body is not None else None
        headers = self._headers
        if method == "PATCH":
            headers = dict(headers, **{"Content-Type": "application/merge-patch+json"})
        resp = self._pool.request(method, self._url(path, query), body=payload, headers=headers,
                                  timeout=timeout)
        if resp.status not in ok:
            raise ApiError(method, path, resp.status, resp.data.decode(errors="replace"))
        return json.loads(resp.data) if resp.data else {}

    def stream(self, path: str, query: dict) -> urllib3.BaseHTTPResponse:
        """A long-lived GET (a watch); the caller reads lines and must release it."""
        resp = self._pool.request("GET", self._url(path, query), headers=self._headers,
                                  preload_content=False, timeout=urllib3.Timeout(connect=10, read=None))
        if resp.status != 200:
            text = resp.read().decode(errors="replace")
            resp.release_conn()
            raise ApiError("GET", path, resp.status, text)
        return resp

    def ready(self) -> bool:
        try:
            resp = self._pool.request("GET", self._url("/readyz", None), headers=self._headers, timeout=5)
        except urllib3.exceptions.HTTPError:
            return False
        return resp.status == 200

    def _retrying(self, call: Callable[[], None]) -> None:
        """Retry what the API server sheds under load (429, 5xx, a dropped connection)."""
        for attempt in range(6):
            try:
                call()
                return
            except ApiError as err:
                if err.status != 429 and err.status < 500 or attempt == 5:
                    raise
            except urllib3.exceptions.HTTPError:
                if attempt == 5:
                    raise
            time.sleep(0.2 * (attempt + 1))

    def fan_out(self, call: Callable, items: list, workers: int = 24,
                on_done: Callable[[int], None] | None = None) -> None:
        """call(item) for every item on a thread pool; on_done gets the running count."""
        done = 0
        lock = threading.Lock()

        def one(item) -> None:
            nonlocal done
            self._retrying(lambda: call(item))
            with lock:
                done += 1
                count = done
            if on_done:
                on_done(count)

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
            list(pool.map(one, items))

    def create_all(self, path: str, bodies: list[dict], workers: int = 24,
                   on_created: Callable[[int], None] | None = None) -> None:
        self.fan_out(lambda body: self.request("POST", path, body, ok=(201,)), bodies, workers, on_created)

    def delete_all(self, path: str, query: dict | None = None, workers: int = 24) -> int:
        """Delete every object of a collection one by one, concurrently: the API server's own
        deletecollection deletes serially and times out on 10,000 pods."""
        names = self.list_names(path, query)
        self.fan_out(lambda name: self.request("DELETE", f"{path}/{name}", query={"gracePeriodSeconds": 0},
                                               ok=(200, 202, 404)), names, workers)
        return len(names)

    def list_names(self, path: str, query: dict | None = None) -> list[str]:
        """Names only, as PartialObjectMetadata, so listing 10,000 pods stays cheap."""
        headers = dict(self._headers, Accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        names: list[str] = []
        query = dict(query or {}, limit=1000)
        while True:
            resp = self._pool.request("GET", self._url(path, query), headers=headers, timeout=120)
            if resp.status != 200:
                raise ApiError("GET", path, resp.status, resp.data.decode(errors="replace"))
            page = json.loads(resp.data)
            names.extend(item["metadata"]["name"] for item in page.get("items") or [])
            token = page["metadata"].get("continue")
            if not token:
                return names
            query["continue"] = token

    def list_all(self, path: str, query: dict | None = None) -> tuple[list[dict], str]:
        """Every item of a list, page by page; returns the items and the resourceVersion."""
        query = dict(query or {}, limit=1000)
        items: list[dict] = []
        resource_version = ""
        while True:
            page = self.request("GET", path, query=query)
            resource_version = resource_version or page["metadata"].get("resourceVersion", "")
            items.extend(page.get("items") or [])
            token = page["metadata"].get("continue")
            if not token:
                return items, resource_version
            query["continue"] = token

    # -- namespaces ---------------------------------------------------------------------------

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """The namespace, made when missing, once pods may be created in it: ServiceAccount
        admission refuses pods until the controller made its `default` ServiceAccount."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        self.request("POST", "/api/v1/namespaces", body, ok=(201, 409))
        wait_for_default_service_account(self.core, name)
        return name

    def create_namespace(self, prefix: str, labels: dict[str, str] | None = None) -> str:
        """A new namespace named prefix-<random>."""
        return self.ensure_namespace(f"{prefix}-{uuid.uuid4().hex[:6]}", labels)

    def delete_namespace(self, name: str, wait: bool = False) -> None:
        """Delete its pods with no grace period, then the namespace. Without wait, finalized
        here so the caller does not wait for the namespace controller; with wait, left to
        that controller (which empties what the namespace holds) and waited for, so a
        namespace of the same name is not recreated while the old one is being emptied."""
        self.request("DELETE", f"/api/v1/namespaces/{name}/pods", query={"gracePeriodSeconds": 0}, ok=(200, 404))
        self.request("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404, 409))
        if not wait:
            self.request("PUT", f"/api/v1/namespaces/{name}/finalize", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}},
                ok=(200, 404, 409))
            return
        deadline = time.monotonic() + 60
        while name in self.list_names("/api/v1/namespaces"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {name} still present 60 s after its deletion")
            time.sleep(0.2)

    # -- nodes -------------------------------------------------------------------------------

    def ensure_nodes(self, count: int, prefix: str = "rel-node-") -> list[str]:
        """count schedulable fake nodes named prefix0..: made when missing, without the
        not-ready taint."""
        from lab.fake_nodes import create_nodes

        wanted = [f"{prefix}{i}" for i in range(count)]
        if not set(wanted) <= set(self.list_names("/api/v1/nodes")):
            create_nodes(self.core, count, prefix=prefix)
        self.lift_not_ready_taint(set(wanted))
        return wanted

    def lift_not_ready_taint(self, names: set[str] | None = None, label_selector: str = "") -> None:
        """Take the not-ready taint off the nodes (those named, or those the selector picks),
        as a kubelet would once Ready: no kubelet will report a fake node Ready and no node
        controller will lift it. Their other taints stay."""
        nodes, _unused = self.list_all("/api/v1/nodes", {"labelSelector": label_selector} if label_selector else None)
        patches = []
        for node in nodes:
            name = node["metadata"]["name"]
            taints = (node.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if (names is None or name in names) and kept != taints:
                patches.append((name, kept or None))
        self.fan_out(lambda item: self.request("PATCH", f"/api/v1/nodes/{item[0]}", {"spec": {"taints": item[1]}}),
                     patches)

    # -- pods and what happened to them ------------------------------------------------------

    def pods(self, namespace: str) -> list[dict]:
        return self.list_all(f"/api/v1/namespaces/{namespace}/pods")[0]

    def pod(self, namespace: str, name: str) -> dict | None:
        found = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}", ok=(200, 404))
        return found if found.get("kind") == "Pod" else None

    def bind(self, namespace: str, name: str, node: str) -> int:
        """POST pods/binding as another scheduler would; returns the HTTP status."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body, ok=(201,))
        except ApiError as err:
            return err.status
        return 201

    def scheduled_events(self, namespace: str) -> dict[str, int]:
        """Pod name -> how many times a Scheduled event was recorded for it (series included)."""
        counts: dict[str, int] = {}
        for event in self.list_all(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")[0]:
            if event.get("reason") != "Scheduled":
                continue
            name = (event.get("regarding") or {}).get("name", "")
            counts[name] = counts.get(name, 0) + int((event.get("series") or {}).get("count") or 1)
        return counts

    def lease_holder(self, namespace: str, name: str) -> str | None:
        lease = self.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                             ok=(200, 404))
        if lease.get("kind") != "Lease":
            return None
        return (lease.get("spec") or {}).get("holderIdentity") or ""
