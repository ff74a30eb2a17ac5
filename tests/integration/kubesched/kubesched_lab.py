"""Helpers for running kubesched as a subprocess against the lab (see conftest.py).

``run_kubesched(config, *flags)`` (the fixture) starts ``.venv/bin/kubesched --config FILE`` and returns
once its /readyz answers 200; every instance is stopped after the test. ``config`` is a
dict (written to a temp file; clientConnection.kubeconfig defaults to the lab's and, unless
the dict says otherwise, leader election is off) or the path of a file used as is.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml

# One kubesched process class for every harness: the reliability suites' (which need no pytest).
from lab.private_lab import ROOT
from tests.reliability.instances import (
    API_VERSION,
    KUBESCHED,
    KubeschedInstance,
    KubeschedNotReady,
    free_port,
    wait_until,
)

__all__ = ["API_VERSION", "KUBESCHED", "ROOT", "ApiProxy", "KubeschedProcess", "events_for", "free_port", "node_of",
           "pod_manifest", "set_taints", "wait_for", "write_config", "write_unreachable_kubeconfig"]


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll predicate until it returns something truthy; fail the test with `what` on timeout."""
    value = wait_until(predicate, timeout, interval)
    if not value:
        pytest.fail(f"timed out after {timeout}s waiting for {what}", pytrace=False)
    return value


class KubeschedProcess(KubeschedInstance):
    """One running kubesched a test started: its process, port and log (KubeschedProcess(args, port, log_path)).

    Not getting ready fails the test with kubesched's log instead of raising.
    """

    def wait_ready(self, timeout: float = 30.0) -> None:
        try:
            super().wait_ready(timeout)
        except KubeschedNotReady as err:
            pytest.fail(str(err), pytrace=False)


def write_config(config: dict, directory: Path, kubeconfig: str) -> Path:
    doc = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration", **config}
    doc.setdefault("clientConnection", {}).setdefault("kubeconfig", kubeconfig)
    doc.setdefault("leaderElection", {"leaderElect": False})
    path = directory / f"kubesched-{len(list(directory.glob('kubesched-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def pod_manifest(name: str, **spec) -> dict:
    containers = spec.pop("containers", None) or [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]
    labels = spec.pop("labels", None) or {"app": name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": containers, **spec}}


def node_of(core_v1, namespace: str, name: str) -> str:
    return core_v1.read_namespaced_pod(name, namespace).spec.node_name or ""


def events_for(api_client, namespace: str, name: str) -> list[dict]:
    """events.k8s.io/v1 events regarding one pod, oldest first."""
    from kubernetes import client

    raw = client.EventsV1Api(api_client).list_namespaced_event(namespace, _preload_content=False)
    items = json.loads(raw.data)["items"]
    return sorted((e for e in items if (e.get("regarding") or {}).get("name") == name),
                  key=lambda e: e.get("eventTime") or "")


def set_taints(core_v1, names: list[str], taints: list[dict] | None = None) -> list[str]:
    """Give nodes exactly the taints asked for (none by default); returns the names."""
    for name in names:
        core_v1.patch_node(name, {"spec": {"taints": taints or None}})
    return names


class ApiProxy:
    """A plain-HTTP proxy to the lab API server, to break kubesched's watches on purpose.

    kubesched talks to it through a kubeconfig without credentials; the proxy adds the lab's
    admin client certificate. ``cut_watches()`` ends every open watch stream, ``expire_watches``
    makes new watches answer 410 Gone (as the API server does for a too-old resourceVersion),
    ``fail_binds = N`` answers the next N bindings with 500, and ``pause(seconds)`` refuses connections for a while (a lost API server).
    """

    def __init__(self, lab_kubeconfig: str, directory: Path):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import urllib3

        from kubesched.client import load_kubeconfig, tls_config_for

        creds = load_kubeconfig(lab_kubeconfig)
        self.upstream = creds.server
        self.pool = urllib3.PoolManager(ssl_context=tls_config_for(creds), maxsize=16)
        self.expire_watches = False
        self.fail_binds = 0  # answer this many pods/binding POSTs with 500, as an API server in trouble
        self.expired: list[str] = []
        self.watch_connections: set = set()
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
                watching = "watch=1" in self.path
                if self.command == "POST" and self.path.endswith("/binding") and proxy.fail_binds > 0:
                    proxy.fail_binds -= 1
                    failure = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": "InternalError", "code": 500,
                                          "message": "binding refused by the test proxy"}).encode()
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(failure)))
                    self.end_headers()
                    self.wfile.write(failure)
                    return
                if watching and proxy.expire_watches:
                    proxy.expired.append(self.path)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"type": "ERROR", "object": {
                        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
                        "code": 410, "message": "too old resource version"}}).encode() + b"\n")
                    return
                resp = proxy.pool.request(self.command, proxy.upstream + self.path, body=body, headers=headers,
                                          preload_content=not watching, timeout=urllib3.Timeout(connect=5, read=600))
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
                if not watching:
                    self.send_header("Content-Length", str(len(resp.data)))
                    self.end_headers()
                    self.wfile.write(resp.data)
                    return
                self.end_headers()
                with proxy.lock:
                    proxy.watch_connections.add(self.connection)
                try:
                    while True:
                        chunk = resp.read1(65536)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:
                    pass
                finally:
                    resp.close()  # never return a half-read watch connection to the pool
                    resp.release_conn()
                    with proxy.lock:
                        proxy.watch_connections.discard(self.connection)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self._handler = Handler
        self._server_class = ThreadingHTTPServer
        self.port = free_port()
        self.server = None
        self._start()
        self.kubeconfig = directory / "proxy.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "anonymous"}}]}))

    def _start(self) -> None:
        import threading

        self.server = self._server_class(("127.0.0.1", self.port), self._handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def cut_watches(self) -> int:
        with self.lock:
            connections = list(self.watch_connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(connections)

    def pause(self, seconds: float) -> None:
        """Stop listening and drop every watch; listen again after `seconds`."""
        self.server.shutdown()
        self.server.server_close()
        self.cut_watches()
        time.sleep(seconds)
        self._start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.cut_watches()


def write_unreachable_kubeconfig(path: Path) -> str:
    """A kubeconfig whose server never answers (port 1): proves nothing contacts the cluster."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)
