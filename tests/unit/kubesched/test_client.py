"""The lean API client: kubeconfig loading and the token bucket."""

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from kubesched import client as client_module
from kubesched.client import ApiClient, ClusterCredentials, KubeconfigError, TokenBucket, load_kubeconfig


def write_kubeconfig(path, cluster=None, user=None, context="lab"):
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": context,
           "clusters": [{"name": "lab", "cluster": cluster or {"server": "https://127.0.0.1:6443"}}],
           "users": [{"name": "admin", "user": user or {}}],
           "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}}]}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_embedded_data_is_kept_in_memory(tmp_path):
    """Over plain HTTP the TLS material is not loaded; it is decoded and kept, never written
    (test_transport.py loads real credentials over TLS)."""
    data = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    path = write_kubeconfig(tmp_path / "kc", cluster={"server": "http://127.0.0.1:6443/",
                                                      "certificate-authority-data": data},
                            user={"client-certificate-data": data, "client-key-data": data})
    creds = load_kubeconfig(path)
    assert creds.server == "http://127.0.0.1:6443"
    assert creds.ca_data == creds.cert_data == creds.key_data == b"-----BEGIN CERTIFICATE-----\n"
    assert (creds.ca_file, creds.cert_file, creds.key_file) == (None, None, None)


def test_relative_files_and_token(tmp_path):
    (tmp_path / "ca.crt").write_text("x")
    path = write_kubeconfig(tmp_path / "kc", cluster={"server": "http://127.0.0.1:6443",
                                                      "certificate-authority": "ca.crt"},
                            user={"token": "abc"})
    creds = load_kubeconfig(path)
    assert creds.ca_file == str(tmp_path / "ca.crt") and creds.token == "abc"


@pytest.mark.parametrize("setup, words", [
    (lambda p: None, "cannot read kubeconfig"),
    (lambda p: p.write_text("[: bad"), "not valid YAML"),
    (lambda p: write_kubeconfig(p, context="missing"), "context 'missing' not found"),
    (lambda p: write_kubeconfig(p, cluster={"certificate-authority": "ca.crt"}), "has no server"),
    (lambda p: write_kubeconfig(p, cluster={"server": "https://x", "certificate-authority": "nope.crt"}),
     "not readable"),
    (lambda p: write_kubeconfig(p, user={"client-key-data": "@@@"}), "not valid base64"),
])
def test_bad_kubeconfig_says_what_is_wrong(tmp_path, setup, words):
    path = tmp_path / "kc"
    setup(path)
    with pytest.raises(KubeconfigError, match=words):
        load_kubeconfig(str(path))


def test_token_bucket_allows_burst_then_paces_at_qps():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=10, burst=5, clock=lambda: now[0], sleep=sleep)
    for _unused in range(5):
        bucket.accept()
    assert slept == []
    for _unused in range(10):
        bucket.accept()
    assert sum(slept) == pytest.approx(1.0)


@pytest.mark.parametrize("qps", [0, -1, 10_000, 50_000])
def test_zero_or_huge_qps_is_unthrottled(qps):
    bucket = TokenBucket(qps=qps, burst=1, sleep=lambda s: pytest.fail("should not sleep"))
    for _unused in range(100):
        bucket.accept()


class _KeepAlive(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; each answer waits until the test lets it go (release)."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()
    arrived = threading.Semaphore(0)

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).arrived.release()
        type(self).release.wait(10)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def keepalive_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _open_connections(client):
    (pool,) = client.pool.pools._container.values()
    return [conn for conn in pool.pool.queue if conn is not None and conn.sock is not None]


def _at_once(client, requests):
    """requests GETs in flight together (the server holds each until all have arrived)."""
    _KeepAlive.release.clear()
    burst = [threading.Thread(target=client.get, args=("/x",)) for _unused in range(requests)]
    for thread in burst:
        thread.start()
    for _thread in burst:
        assert _KeepAlive.arrived.acquire(timeout=10)
    _KeepAlive.release.set()
    for thread in burst:
        thread.join(10)


def test_connections_a_burst_opened_close_once_idle_and_the_busy_one_stays(keepalive_server, monkeypatch):
    """As Go's transport (IdleConnTimeout): five requests at once open five connections; once
    traffic is back to one at a time, the four that only wait are closed after the timeout,
    and the one that serves stays open."""
    clock = [1000.0]
    monkeypatch.setattr(client_module.time, "monotonic", lambda: clock[0])
    client = ApiClient(ClusterCredentials(server=keepalive_server), qps=0, burst=0, pool_size=8)
    _at_once(client, 5)
    assert len(_open_connections(client)) == 5
    for _round in range(3):  # one request at a time, past the timeout: always the same connection
        clock[0] += client_module.IDLE_CONN_TIMEOUT_S / 2
        assert client.get("/x") == {}
        assert _KeepAlive.arrived.acquire(timeout=10)
    assert len(_open_connections(client)) == 1
    _at_once(client, 3)  # the concurrency comes back: new connections in the closed ones' places
    assert len(_open_connections(client)) == 3
