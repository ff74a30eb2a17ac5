"""No credential is written to disk: a kubeconfig's *-data, an extender's certData/keyData and
a self-signed serving key stay in memory (kubesched/transport.py), on success and on failure,
in every command (run, validate-config, explain) and in the API I/O child processes.

Each test points TMPDIR at a directory of its own and fails if anything appears there; the
credentials are real, and a TLS server that requires a client certificate proves they were
loaded."""

from __future__ import annotations

import base64
import datetime
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from kubesched import cli, transport
from kubesched.client import ApiClient, KubeconfigError, load_kubeconfig

ROOT = Path(__file__).resolve().parents[3]


def _pki():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def issue(common_name, key, issuer_name, issuer_key, ca=False, san=None):
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                                        common_name)]))
                   .issuer_name(issuer_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        if ca:
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)

    import ipaddress

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = issue("test-ca", ca_key, ca_name, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = issue("server", server_key, ca_name, ca_key, san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = issue("system:kube-scheduler", client_key, ca_name, ca_key)
    other_key = ec.generate_private_key(ec.SECP256R1())
    return {"ca": ca, "server": server, "server_key": pem_key(server_key), "client": client,
            "client_key": pem_key(client_key), "other_key": pem_key(other_key)}


@pytest.fixture(scope="module")
def pki():
    return _pki()


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """TMPDIR for this test (and the processes it starts): must still be empty at the end."""
    directory = tmp_path / "tmpdir"
    directory.mkdir()
    monkeypatch.setenv("TMPDIR", str(directory))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    yield directory
    left = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    assert left == [], f"files were left in TMPDIR: {left}"


@pytest.fixture
def tls_server(pki, tmp_path):
    """A TLS server on 127.0.0.1 that requires a client certificate signed by the test CA and
    answers with the client's common name. Yields its port."""
    (tmp_path / "server.crt").write_bytes(pki["server"])
    (tmp_path / "server.key").write_bytes(pki["server_key"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.load_verify_locations(cadata=pki["ca"].decode())
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                raw, _addr = listener.accept()
            except OSError:
                continue
            try:
                with context.wrap_socket(raw, server_side=True) as tls:
                    subject = dict(item[0] for item in tls.getpeercert()["subject"])
                    tls.recv(65536)
                    body = subject["commonName"].encode()
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                                + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            except (OSError, ssl.SSLError):
                raw.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(path: Path, server: str, pki: dict, key: bytes | None = None, key_b64: str | None = None) -> str:
    user = {"client-certificate-data": _b64(pki["client"]),
            "client-key-data": key_b64 if key_b64 is not None else _b64(key or pki["client_key"])}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": _b64(pki["ca"])}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


@pytest.fixture(params=["memfd", "private directory"])
def loading(request, monkeypatch):
    """Both ways a key reaches OpenSSL: a memory file, or (where memfd_create is refused) a
    private directory removed at once."""
    if request.param == "private directory":
        def refused(*_args):
            raise PermissionError(1, "Operation not permitted")  # as under a seccomp filter
        monkeypatch.setattr(os, "memfd_create", refused)
    return request.param


def test_embedded_credentials_stay_in_memory_and_authenticate(pki, tls_server, tmp_path, private_tmp, loading):
    kubeconfig = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{tls_server}", pki)
    creds = load_kubeconfig(kubeconfig)
    assert (creds.ca_file, creds.cert_file, creds.key_file) == (None, None, None)
    assert creds.key_data == pki["client_key"] and "BEGIN PRIVATE KEY" not in repr(creds)
    client = ApiClient(creds, qps=0, burst=0)
    status, body = client.perform("GET", "/", None, None, "application/json", 5.0)
    assert (status, body) == (200, b"system:kube-scheduler")  # the server saw our client certificate


@pytest.mark.parametrize("broken, words", [
    (dict(key_b64="@@@"), "client-key-data is not valid base64"),
    (dict(key=b"not a key"), "cannot be used"),
    (dict(key="other_key"), "cannot be used"),  # a key that does not match the certificate
])
def test_unusable_embedded_credentials_fail_at_load_and_leave_nothing(pki, tmp_path, private_tmp, loading,
                                                                      broken, words):
    if broken.get("key") == "other_key":
        broken = dict(key=pki["other_key"])
    kubeconfig = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", pki, **broken)
    with pytest.raises(KubeconfigError, match=words):
        load_kubeconfig(kubeconfig)


def test_a_key_in_memory_is_loaded_where_memfd_create_is_refused_too(pki, private_tmp, monkeypatch):
    """The fallback writes the key for an instant, and removes it even when OpenSSL refuses it."""
    def not_implemented(*_args):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", not_implemented)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    transport.load_cert_chain_data(context, pki["client"], pki["client_key"])
    with pytest.raises(ssl.SSLError):
        transport.load_cert_chain_data(context, pki["client"], pki["other_key"])


def test_extender_cert_data_stays_in_memory(pki, private_tmp, loading):
    from kubesched.config import parse_config
    from kubesched.extender import build_extenders

    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "extenders": [{"urlPrefix": "https://127.0.0.1:1", "filterVerb": "filter", "tlsConfig": {
                            "caData": _b64(pki["ca"]), "certData": _b64(pki["client"]),
                            "keyData": _b64(pki["client_key"])}}]}, source="test")
    extender = build_extenders(cfg.extenders)[0]
    assert extender.sends_client_cert


def test_a_self_signed_serving_pair_stays_in_memory(private_tmp):
    from cryptography import x509

    from kubesched.server import HealthServer

    server = HealthServer("127.0.0.1", 0)
    server.start()
    try:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, context.wrap_socket(raw) as tls:
            served = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        assert served.subject.rfc4514_string() == "CN=127.0.0.1@kubesched"
    finally:
        server.stop()


def _config(tmp_path: Path, kubeconfig: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                    "kind": "KubeSchedulerConfiguration",
                                    "clientConnection": {"kubeconfig": kubeconfig},
                                    "leaderElection": {"leaderElect": False}}))
    return str(path)


def test_validate_config_and_write_config_to_leave_nothing(pki, tmp_path, private_tmp, capsys):
    config = _config(tmp_path, write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", pki))
    assert cli.main(["validate-config", config]) == 0
    assert cli.main(["--config", config, "--write-config-to", str(tmp_path / "out.yaml")]) == 0
    broken = _config(tmp_path, write_kubeconfig(tmp_path / "broken", "https://127.0.0.1:1", pki,
                                                key=pki["other_key"]))
    assert cli.main(["validate-config", broken]) == 1
    assert "cannot be used" in capsys.readouterr().err


def test_explain_against_an_unreachable_server_leaves_nothing(pki, tmp_path, private_tmp, capsys):
    kubeconfig = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", pki)
    assert cli.main(["explain", "default/web", "--kubeconfig", kubeconfig]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot reach the API server https://127.0.0.1:1" in err


def test_the_scheduler_and_its_api_children_leave_nothing(pki, tmp_path, private_tmp):
    """`kubesched --config` serving (its watch and writer children load the key too) until SIGTERM."""
    config = _config(tmp_path, write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", pki))
    log = tmp_path / "kubesched.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubesched.cli", "--config", config, "--secure-port=0",
                                 "--bind-address=127.0.0.1", "-v=2"], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while "Serving securely" not in log.read_text() or _children(proc.pid) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # the children have built their clients (and their TLS contexts) by now
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0, log.read_text()


def _children(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return len(fh.read().split())
    except OSError:
        return 0
