"""Fast, raw access to the API server the benchmark runs on.

The harness creates and deletes tens of thousands of objects per run, so it talks JSON
over a pooled urllib3 connection and fans requests out over threads; the kubernetes
client's model objects would make the harness itself the bottleneck.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable
from urllib.parse import urlencode

import urllib3

from lab.fake_nodes import create_nodes

# Every object the benchmark creates carries this label, so cleanup finds exactly those.
BENCH_LABEL = "kubesched.io/bench"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, text: str):
        super().__init__(f"{method} {path} failed: HTTP {status}: {text[:300]}")
        self.status = status


class Cluster:
    """One API server, reached with the credentials of a kubeconfig."""

    def __init__(self, kubeconfig: str, pool_size: int = 96):
        from kubernetes import client, config

        if not os.path.exists(kubeconfig):
            raise FileNotFoundError(f"kubeconfig {kubeconfig} does not exist; run 'make lab-up' or pass --kubeconfig")
        configuration = client.Configuration()
        # load_kube_config writes embedded certificates to files that live until exit;
        # the raw binder reads the same files.
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = pool_size
        self.kubeconfig = kubeconfig
        self.server = configuration.host
        self.ca_file = configuration.ssl_ca_cert
        self.cert_file = configuration.cert_file
        self.key_file = configuration.key_file
        self.token = (configuration.api_key or {}).get("authorization", "").removeprefix("Bearer ").strip()
        self.core_v1 = client.CoreV1Api(client.ApiClient(configuration))
        self._headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            self._headers["Authorization"] = f"Bearer {self.token}"
        self._pool = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, block=True, cert_reqs="CERT_REQUIRED",
            ca_certs=self.ca_file, cert_file=self.cert_file, key_file=self.key_file,
            retries=False)

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

        with ThreadPoolExecutor(max_workers=workers) as pool:
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


@dataclass(frozen=True)
class NodeGroup:
    """Nodes that share one shape; a workload's node set is a tuple of groups."""

    count: int
    prefix: str = "bench-node-"
    cpu: str = "4"
    memory: str = "32Gi"  # scheduler_perf's node-default.yaml
    pods: int = 110
    zones: int = 3
    taints: tuple = ()


class NodeSet:
    """The benchmark's fake nodes. Reused when the next workload asks for the same set,
    because creating 5,000 nodes is the slowest step of a run.

    Static on the benchmark's own lab (no heartbeat load, docs/performance.md); kwok nodes
    on a full lab (--kubeconfig), whose node lifecycle controller would mark static nodes
    unreachable after 50 s."""

    def __init__(self, cluster: Cluster, static: bool = False):
        self.cluster = cluster
        self.static = static
        self.current: tuple[NodeGroup, ...] | None = None

    def ensure(self, groups: tuple[NodeGroup, ...], progress: Callable[[str], None]) -> None:
        # On a shared API server a test may have wiped every node meanwhile: count them again.
        if groups == self.current and len(self.cluster.list_names(
                "/api/v1/nodes", {"labelSelector": f"{BENCH_LABEL}=true"})) == sum(g.count for g in groups):
            return
        self.delete_all()
        total = sum(group.count for group in groups)
        start = time.monotonic()
        for group in groups:
            create_nodes(self.cluster.core_v1, group.count, prefix=group.prefix, cpu=group.cpu,
                         memory=group.memory, pods=group.pods, zones=group.zones,
                         labels={BENCH_LABEL: "true"},
                         taints=[dict(taint) for taint in group.taints] or None, workers=24, static=self.static)
        self._clear_not_ready_taint(groups)
        self.current = groups
        progress(f"created {total} nodes in {time.monotonic() - start:.1f} s")

    def _clear_not_ready_taint(self, groups: tuple[NodeGroup, ...]) -> None:
        """The API server's TaintNodesByCondition admission gives every new node the
        node.kubernetes.io/not-ready:NoSchedule taint, which a kubelet would clear once Ready.
        Fake nodes have no kubelet, so the harness sets each group's intended taints itself
        when the API server it runs on has that admission plugin enabled."""
        probe = self.cluster.request("GET", f"/api/v1/nodes/{groups[0].prefix}0")
        if not any(t.get("key") == NOT_READY_TAINT for t in probe["spec"].get("taints") or []):
            return
        patches = [(f"{group.prefix}{i}", [dict(taint) for taint in group.taints] or None)
                   for group in groups for i in range(group.count)]
        self.cluster.fan_out(lambda item: self.cluster.request(
            "PATCH", f"/api/v1/nodes/{item[0]}", {"spec": {"taints": item[1]}}), patches)

    def delete_all(self) -> None:
        self.cluster.delete_all("/api/v1/nodes", {"labelSelector": f"{BENCH_LABEL}=true"})
        self.current = None


# How long kwok may still act on pods that are gone. On a full lab kwok runs the pods bound
# to its nodes, and its delete of a pod it saw terminating is by name: one that lands after
# the next run created a pod of the same name deleted that new pod (seen: a whole run of 50
# pods deleted as they were created). Waiting out kwok's queue after the old pods are gone
# keeps a run's pods its own.
KWOK_SETTLE_S = 3.0


def delete_pods(cluster: Cluster, namespace: str) -> None:
    """Delete every pod of the namespace, wait until none is left and kwok has settled."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    if cluster.delete_all(path):
        deadline = time.monotonic() + 60
        while cluster.list_names(path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path}: pods still present 60 s after their deletion")
            time.sleep(0.2)
        time.sleep(KWOK_SETTLE_S)
    # Events pile up at one or two per pod; dropping them keeps etcd small between runs.
    cluster.delete_all(f"/api/v1/namespaces/{namespace}/events")


def ensure_namespace(cluster: Cluster, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {BENCH_LABEL: "true"}}}
    cluster.request("POST", "/api/v1/namespaces", body, ok=(201, 409))


def ensure_priority_class(cluster: Cluster, name: str, value: int) -> None:
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {BENCH_LABEL: "true"}}, "value": value,
            "description": "kubesched benchmark"}
    cluster.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body, ok=(201, 409))


def remove_storage_objects(cluster: Cluster, namespace: str) -> None:
    """The storage objects a workload made: its claims, PersistentVolumes and CSINodes.

    The API server gives claims and volumes protection finalizers that only
    kube-controller-manager lifts, and only once nothing uses them; the benchmark's objects
    are fakes, so their finalizers are dropped and each deletion waits until it is done.
    """
    selector = {"labelSelector": f"{BENCH_LABEL}=true"}
    for path in (f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", "/api/v1/persistentvolumes"):
        names = cluster.list_names(path, selector)
        cluster.fan_out(lambda name, path=path: cluster.request(
            "PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}}, ok=(200, 404)), names)
        cluster.delete_all(path, selector)
        deadline = time.monotonic() + 60
        while cluster.list_names(path, selector):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path}: bench objects still present 60 s after their deletion")
            time.sleep(0.2)
    cluster.delete_all("/apis/storage.k8s.io/v1/csinodes", selector)


def remove_cluster_objects(cluster: Cluster, namespace: str) -> None:
    """Everything the benchmark created: pods, events, nodes, priority classes, namespace."""
    delete_pods(cluster, namespace)
    selector = {"labelSelector": f"{BENCH_LABEL}=true"}
    cluster.delete_all("/api/v1/nodes", selector)
    cluster.delete_all("/apis/scheduling.k8s.io/v1/priorityclasses", selector)
    remove_storage_objects(cluster, namespace)
    # The namespace controller finalizes it; a bench started right after must not recreate it
    # while that controller is still emptying the old one.
    cluster.request("DELETE", f"/api/v1/namespaces/{namespace}", ok=(200, 202, 404))
    deadline = time.monotonic() + 60
    while namespace in cluster.list_names("/api/v1/namespaces"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {namespace} still present 60 s after its deletion")
        time.sleep(0.2)
