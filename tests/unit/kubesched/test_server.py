"""The HTTPS health and metrics server, with a self-signed certificate."""

import json
import ssl
import tempfile
import urllib.error
import urllib.request

import pytest

from kubesched.auth import DelegatingAuthorizer
from kubesched.server import HealthServer


def get(port, path):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=context, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def server():
    state = {"ready": False, "live": None}
    srv = HealthServer("127.0.0.1", 0, livez_checks={"leaderElection": lambda: state["live"]},
                       readyz_checks={"sched-handler-sync": lambda: None if state["ready"] else "not synced"})
    srv.start()
    yield srv, state
    srv.stop()


def test_readyz_follows_cache_sync_and_livez_the_watchdog(server):
    srv, state = server
    assert get(srv.port, "/healthz") == (200, "ok")
    code, text = get(srv.port, "/readyz?verbose")
    assert code == 500 and "[-]sched-handler-sync failed: not synced" in text
    state["ready"] = True
    assert get(srv.port, "/readyz") == (200, "ok")
    state["live"] = "failed election to renew leadership"
    assert get(srv.port, "/livez")[0] == 500
    assert get(srv.port, "/readyz")[0] == 500


def test_metrics_and_unknown_paths_are_authorized_first(server):
    srv, _unused = server
    code, text = get(srv.port, "/metrics")
    assert code == 403 and json.loads(text)["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    assert get(srv.port, "/nope")[0] == 403
    srv.authorizer = DelegatingAuthorizer(always_allow_paths=["/metrics", "/no*"])
    code, text = get(srv.port, "/metrics")
    assert code == 200 and "scheduler_pending_pods" in text
    assert get(srv.port, "/nope")[0] == 404


def test_openssl_fallback_makes_a_usable_certificate(tmp_path, monkeypatch):
    from kubesched.server import ServingPair, _openssl_self_signed

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    cert, key = _openssl_self_signed("127.0.0.1")
    assert list(tmp_path.iterdir()) == []  # openssl's files are gone, the pair is in memory
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ServingPair(cert_pem=cert, key_pem=key).load_into(context)
