"""The API server the suites run against, and what they observe on it.

``PrivateLab`` is a second lab control plane (lab/lab.sh with its own directory and ports),
so a suite may stop and start its kube-apiserver without touching the shared lab on :6443.
``Cluster`` wraps one kubeconfig with the few calls the suites need, as raw JSON.
``PodWatch`` follows the pods of one namespace through API server restarts and counts, per
pod, every change of spec.nodeName: a second change would be a double bind.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete pods with no grace period, then the namespace; the lab has no
        controller-manager, so the namespace is finalized here."""
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


def node_of(pod: dict | None) -> str:
    return ((pod or {}).get("spec") or {}).get("nodeName") or ""


# ---------------------------------------------------------------------------------------------
# A private lab control plane
# ---------------------------------------------------------------------------------------------

@dataclass
class PrivateLab:
    """lab/lab.sh with its own directory and ports. Only this lab's kube-apiserver is ever
    stopped, by the pid in its own pid file."""

    directory: str = "/tmp/rel-lab"
    api_port: int = 16643
    etcd_port: int = 12579
    etcd_peer_port: int = 12580
    env: dict = field(init=False)

    def __post_init__(self) -> None:
        self.env = {**os.environ, "LAB_DIR": self.directory, "LAB_API_PORT": str(self.api_port),
                    "LAB_ETCD_PORT": str(self.etcd_port), "LAB_ETCD_PEER_PORT": str(self.etcd_peer_port)}

    @classmethod
    def from_env(cls, suffix: str = "") -> "PrivateLab":
        """Defaults, overridable with RELIABILITY_LAB_DIR / _API_PORT / _ETCD_PORT / _ETCD_PEER_PORT."""
        base = cls()
        return cls(os.environ.get("RELIABILITY_LAB_DIR", base.directory + suffix),
                   int(os.environ.get("RELIABILITY_LAB_API_PORT", base.api_port + (100 if suffix else 0))),
                   int(os.environ.get("RELIABILITY_LAB_ETCD_PORT", base.etcd_port + (100 if suffix else 0))),
                   int(os.environ.get("RELIABILITY_LAB_ETCD_PEER_PORT", base.etcd_peer_port + (100 if suffix else 0))))

    @property
    def kubeconfig(self) -> str:
        return os.path.join(self.directory, "admin.kubeconfig")

    @property
    def ca_cert(self) -> str:
        return os.path.join(self.directory, "ca.crt")

    @property
    def ca_key(self) -> str:
        return os.path.join(self.directory, "ca.key")

    def _lab(self, action: str, timeout: float = 180) -> None:
        done = subprocess.run(["bash", str(ROOT / "lab" / "lab.sh"), action], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"lab.sh {action} (LAB_DIR={self.directory}) failed: "
                               f"{(done.stderr or done.stdout).strip()[-600:]}")

    def up(self) -> None:
        self._lab("up")

    def down(self) -> None:
        self._lab("down")

    def apiserver_pid(self) -> int | None:
        try:
            with open(os.path.join(self.directory, "kube-apiserver.pid"), encoding="utf-8") as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        return pid

    def stop_apiserver(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        pid = self.apiserver_pid()
        if pid is None:
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        os.unlink(os.path.join(self.directory, "kube-apiserver.pid"))

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision, so every older resourceVersion is gone and a
        watch resumed from one is answered 410 Gone. Call it while the API server is down."""
        import urllib.request

        def post(path: str, body: dict) -> dict:
            req = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())

        # A few writes outside the API server first: a watch resumes from the revision after the
        # last one it saw, which the compaction must have removed too.
        bump = base64.b64encode(b"/reliability/compaction-bump").decode()
        for i in range(3):
            post("/v3/kv/put", {"key": bump, "value": base64.b64encode(str(i).encode()).decode()})
        revision = int(post("/v3/kv/range", {"key": bump})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def start_apiserver(self) -> None:
        """lab.sh up starts whatever is not running: here only the kube-apiserver."""
        self.up()


# ---------------------------------------------------------------------------------------------
# Watching bindings
# ---------------------------------------------------------------------------------------------

class PodWatch:
    """Follows spec.nodeName of every pod in a namespace, across disconnects and 410s.

    ``bound_at[name]`` is the monotonic time the binding was first seen; ``rebinds[name]``
    counts nodeName changes after the first (a double bind). A relist after a lost watch
    also compares nodeName, so a change made while disconnected is still counted.
    """

    def __init__(self, cluster: Cluster, namespace: str):
        self.cluster = cluster
        self.namespace = namespace
        self.node: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.rebinds: dict[str, int] = {}
        self.deleted: set[str] = set()
        self.reconnects = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.changed = threading.Condition(self.lock)
        self.thread = threading.Thread(target=self._run, name=f"podwatch-{namespace}", daemon=True)

    def start(self) -> "PodWatch":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def _see(self, pod: dict, deleted: bool = False) -> None:
        name = pod["metadata"]["name"]
        node = node_of(pod)
        with self.lock:
            if deleted:
                self.deleted.add(name)
            previous = self.node.get(name, "")
            if node and node != previous:
                if previous:
                    self.rebinds[name] = self.rebinds.get(name, 0) + 1
                else:
                    self.bound_at.setdefault(name, time.monotonic())
                self.node[name] = node
            elif name not in self.node:
                self.node[name] = ""
            self.changed.notify_all()

    def _run(self) -> None:
        resource_version = ""
        while not self.stop.is_set():
            try:
                if not resource_version:
                    listing = json.loads(self.cluster.core.list_namespaced_pod(
                        self.namespace, _preload_content=False, _request_timeout=10).data)
                    for pod in listing["items"]:
                        self._see(pod)
                    resource_version = listing["metadata"]["resourceVersion"]
                resp = self.cluster.core.list_namespaced_pod(
                    self.namespace, watch=True, resource_version=resource_version, timeout_seconds=60,
                    allow_watch_bookmarks=True, _preload_content=False, _request_timeout=(5, 90))
                for line in resp:
                    if self.stop.is_set():
                        resp.release_conn()
                        return
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        resource_version = ""  # 410 Gone or similar: relist
                        break
                    resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._see(obj, deleted=event["type"] == "DELETED")
            except Exception:  # noqa: BLE001 - the API server may be down on purpose; relist
                resource_version = ""
                self.reconnects += 1
                self.stop.wait(0.5)

    def bound(self) -> int:
        with self.lock:
            return len(self.bound_at)

    def wait_bound(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.bound_at) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 1.0))
        return True

    def first_bound_after(self, moment: float) -> float | None:
        with self.lock:
            later = [t for t in self.bound_at.values() if t > moment]
        return min(later) if later else None

    def double_binds(self) -> int:
        with self.lock:
            return sum(self.rebinds.values())
