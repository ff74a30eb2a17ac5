"""The secure port's client CAs are reloaded when they change, as kube-scheduler's
dynamiccertificates reload theirs: a CA file rewritten in place, and the published configmap
kube-system/extension-apiserver-authentication changing. Each test serves real TLS and presents
real client certificates; only the configmap's API answers are canned (a lab API server keeps
rewriting that configmap itself, so it cannot be changed at will there)."""

import datetime
import os
import socket
import ssl
import time

import pytest
from kubesched_fakes import FakeClient

from kubesched.auth import AUTH_CONFIGMAP, CAReloader, DelegatingAuthenticator, DelegatingAuthorizer
from kubesched.client import WatchExpired
from kubesched.server import HealthServer


class Identity:
    """A CA and a client certificate it signed, as files."""

    def __init__(self, directory, common_name):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"ca-for-{common_name}")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(key.public_key())
                .serial_number(2).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                .sign(ca_key, hashes.SHA256()))
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        self.cert_file = os.path.join(directory, f"{common_name}.crt")
        self.key_file = os.path.join(directory, f"{common_name}.key")
        with open(self.cert_file, "wb") as fh:
            fh.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(self.key_file, "wb") as fh:
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def metrics_status(server: HealthServer, identity: Identity) -> int:
    """The status of GET /metrics with identity's client certificate (system:masters may read it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(identity.cert_file, identity.key_file)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
                context.wrap_socket(raw) as tls:
            tls.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
    except (ssl.SSLError, ConnectionResetError):
        return 0  # the handshake refused a certificate no trusted CA signed
    return int(reply.split(b" ", 2)[1])


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(authenticator):
        srv = HealthServer("127.0.0.1", 0, cert_dir=str(tmp_path / "serving"), authenticator=authenticator,
                           authorizer=DelegatingAuthorizer())
        srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_rewritten_client_ca_file_is_trusted_at_the_next_handshake(tmp_path, serve):
    old, new = Identity(str(tmp_path), "alice"), Identity(str(tmp_path), "bob")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(old.ca_pem)
    authenticator = DelegatingAuthenticator(client_ca_pem=ca_file.read_bytes())
    server = serve(authenticator)
    reloader = CAReloader(authenticator, client_ca_file=str(ca_file))
    reloader.start()
    try:
        assert metrics_status(server, old) == 200
        assert metrics_status(server, new) != 200

        # Rotated as an operator does: the new CA first, beside the old one, then alone.
        ca_file.write_bytes(old.ca_pem + new.ca_pem)
        assert wait_for(lambda: metrics_status(server, new) == 200), "the added CA was not reloaded within 10 s"
        assert metrics_status(server, old) == 200
        ca_file.write_bytes(new.ca_pem)
        assert wait_for(lambda: metrics_status(server, old) != 200), "the removed CA was still trusted after 10 s"
        assert metrics_status(server, new) == 200

        # Bad new content (empty, not PEM) keeps the CAs in use, as upstream does.
        ca_file.write_bytes(b"")
        assert not reloader.check_files()
        ca_file.write_bytes(b"-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
        assert not reloader.check_files()
        assert metrics_status(server, new) == 200
    finally:
        reloader.stop()


def test_an_unchanged_stat_waits_for_the_one_minute_recheck(tmp_path):
    old, new = Identity(str(tmp_path), "alice"), Identity(str(tmp_path), "bob")
    size = max(len(old.ca_pem), len(new.ca_pem))
    old_pem, new_pem = old.ca_pem.ljust(size, b"\n"), new.ca_pem.ljust(size, b"\n")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(old_pem)
    now = [1000.0]
    authenticator = DelegatingAuthenticator(client_ca_pem=old_pem)
    reloader = CAReloader(authenticator, client_ca_file=str(ca_file), clock=lambda: now[0])
    # New content with the same size, inode and mtime: no stat tells the change.
    stat = os.stat(ca_file)
    with open(ca_file, "r+b") as fh:
        fh.write(new_pem)
    os.utime(ca_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not reloader.check_files()
    assert authenticator.client_ca_pem == old_pem
    now[0] += 61  # upstream's FileRefreshDuration: read again regardless
    assert reloader.check_files()
    assert authenticator.client_ca_pem == new_pem


def published_configmap(ca_pem: bytes, resource_version: str = "10") -> FakeClient:
    """The configmap as the API server publishes it: its GET's answer; tests script its watch."""
    return FakeClient(answers={AUTH_CONFIGMAP: {
        "metadata": {"name": "extension-apiserver-authentication", "resourceVersion": resource_version},
        "data": {"client-ca-file": ca_pem.decode()}}})


def watched(published: FakeClient) -> list[tuple]:
    return [(path, body["resourceVersion"], body["timeoutSeconds"]) for path, body in published.made("watch")]


def _followed(tmp_path, serve):
    """Two identities (old, new), the configmap publishing old's CA, a server trusting what the
    reloader takes from it, and the reloader."""
    old, new = Identity(str(tmp_path), "alice"), Identity(str(tmp_path), "bob")
    published = published_configmap(old.ca_pem)
    authenticator = DelegatingAuthenticator()
    return old, new, published, serve(authenticator), CAReloader(authenticator, lookup_client=published)


def test_the_published_client_ca_is_followed_through_its_watch(tmp_path, serve):
    old, new, published, server, reloader = _followed(tmp_path, serve)
    modified = {"metadata": {"resourceVersion": "12"}, "data": {"client-ca-file": new.ca_pem.decode()}}
    published.watches = [[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}},
                          {"type": "MODIFIED", "object": modified}]]
    # The GET's CA first: the handshake trusts it.
    reloader.apply_configmap(published.get(AUTH_CONFIGMAP))
    assert metrics_status(server, old) == 200 and metrics_status(server, new) != 200
    reloader.watch_configmap_once()
    assert watched(published) == [("/api/v1/watch/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                                  "10", 60)]
    assert metrics_status(server, new) == 200
    assert metrics_status(server, old) != 200


def test_a_ca_given_by_flag_is_never_replaced_by_the_published_one(tmp_path):
    flag, published = Identity(str(tmp_path), "alice"), Identity(str(tmp_path), "bob")
    authenticator = DelegatingAuthenticator(client_ca_pem=flag.ca_pem)
    configmap = published_configmap(published.ca_pem)
    reloader = CAReloader(authenticator, lookup_client=configmap)
    assert not reloader.apply_configmap(configmap.get(AUTH_CONFIGMAP))
    assert authenticator.client_ca_pem == flag.ca_pem
    assert not reloader.apply_configmap({"data": {"client-ca-file": "not a certificate"}})


def test_a_configmap_older_than_the_watch_window_is_still_followed(tmp_path, serve):
    """Found in a bench log: the GET's resourceVersion was older than the watch cache, the
    watch raised WatchExpired and the reloader's thread died, so no later CA was taken."""
    old, new, published, server, reloader = _followed(tmp_path, serve)
    current = {"metadata": {"resourceVersion": "3300"}, "data": {"client-ca-file": new.ca_pem.decode()}}
    # The API server's watch window starts after the configmap's last change: a watch from its
    # resourceVersion is 410 Gone; one without a resourceVersion starts with the object.
    published.watches = [WatchExpired("too old resource version: 10 (3221)"), [{"type": "ADDED", "object": current}]]
    reloader.watch_configmap_once()
    assert [rv for _path, rv, _timeout in watched(published)] == ["10", ""]
    assert metrics_status(server, new) == 200
    assert metrics_status(server, old) != 200


def served_certificate(server: HealthServer) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
            context.wrap_socket(raw) as tls:
        return tls.getpeercert(binary_form=True)


def test_a_rotated_serving_pair_serves_from_the_next_handshake_without_a_ca_change(tmp_path):
    """The soak's CA rotation found this: only a client CA reload re-read the serving files, so a
    serving certificate rotated alone was never served until a restart (kube-scheduler serves it
    at once). The client CA stays as it was here."""
    from kubesched.server import _write_pair, self_signed_certificate

    def pair_in(directory, name):
        directory.mkdir(exist_ok=True)
        return _write_pair(str(directory), name, *self_signed_certificate("127.0.0.1"))

    cert_file, key_file = pair_in(tmp_path, "serving")
    server = HealthServer("127.0.0.1", 0, cert_file=cert_file, key_file=key_file,
                          authenticator=DelegatingAuthenticator(), authorizer=DelegatingAuthorizer())
    server.start()
    try:
        first = served_certificate(server)
        new_cert, new_key = pair_in(tmp_path / "rotated", "serving")
        # As a rotation writes them: each file replaced whole, the key first.
        os.replace(new_key, key_file)
        os.replace(new_cert, cert_file)
        new = ssl.PEM_cert_to_DER_cert(open(cert_file).read())
        assert new != first
        assert wait_for(lambda: served_certificate(server) == new), "the rotated pair was not served within 10 s"

        # A pair that does not load (a key from another pair) keeps the one in use.
        _other_cert, other_key = pair_in(tmp_path / "rotated", "other")
        os.replace(other_key, key_file)
        assert not server.check_serving_files()
        assert served_certificate(server) == new
    finally:
        server.stop()
