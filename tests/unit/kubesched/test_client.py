"""The lean API client: kubeconfig loading and the token bucket."""

import base64

import pytest
import yaml

from kubesched.client import KubeconfigError, TokenBucket, load_kubeconfig


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
