"""The secure serving endpoint: /healthz, /livez, /readyz and /metrics over HTTPS.

Like kube-scheduler, it serves on --bind-address:--secure-port (default 0.0.0.0:10259) with
--tls-cert-file/--tls-private-key-file, else a self-signed pair kept in --cert-dir, else one
made at start-up. The pair is re-read when its files change (checked every second, where
upstream's dynamiccertificates gets fsnotify events) and every minute regardless, and a
new pair serves from the next handshake on; a pair that does not load keeps the one in use.
Every request is authenticated and authorized by kubesched.auth (delegated to the API server, as kube-scheduler's); health paths are always allowed by default.

No client can stall another: the accept loop only accepts; each connection's TLS handshake
and requests run in that connection's own thread, under timeouts, so idle, slow or half-open
clients hold a thread each and nothing else.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubesched import klog
from kubesched.auth import AuthenticationError, DelegatingAuthenticator, DelegatingAuthorizer, file_state
from kubesched.metrics import REGISTRY
from kubesched.transport import load_cert_chain_data

HealthCheck = Callable[[], "str | None"]  # None when healthy, else the reason


def self_signed_certificate(host: str) -> tuple[bytes, bytes]:
    """A self-signed serving certificate for host, localhost and 127.0.0.1: (cert PEM, key PEM).

    Uses the cryptography package, or the openssl command where it is not installed.
    """
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return _openssl_self_signed(host)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@kubesched")])
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        sans.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _openssl_self_signed(host: str) -> tuple[bytes, bytes]:
    san = "DNS:localhost,IP:127.0.0.1," + (f"IP:{host}" if _is_ip(host) else f"DNS:{host}")
    directory = tempfile.mkdtemp(prefix="kubesched-serving-")  # 0700, gone before we return
    cert_path = os.path.join(directory, "tls.crt")
    key_path = os.path.join(directory, "tls.key")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "365", "-subj", f"/CN={host}@kubesched", "-addext",
                        f"subjectAltName={san}", "-keyout", key_path, "-out", cert_path],
                       check=True, capture_output=True, timeout=30)
        with open(cert_path, "rb") as cert, open(key_path, "rb") as key:
            return cert.read(), key.read()
    except (OSError, subprocess.SubprocessError) as err:
        raise OSError("cannot make a self-signed serving certificate (install the cryptography package or "
                      f"openssl, or pass --tls-cert-file and --tls-private-key-file): {err}") from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _write_pair(cert_dir: str, pair_name: str, cert_pem: bytes, key_pem: bytes) -> tuple[str, str]:
    cert_path = os.path.join(cert_dir, f"{pair_name}.crt")
    key_path = os.path.join(cert_dir, f"{pair_name}.key")
    with open(cert_path, "wb") as fh:
        fh.write(cert_pem)
    with os.fdopen(os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(key_pem)
    return cert_path, key_path


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


# Go's names (--tls-cipher-suites) for OpenSSL's. TLS 1.3 suites are not configurable, in Go
# either: they are accepted and need nothing.
GO_CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
}
TLS13_CIPHER_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
TLS_VERSIONS = {"VersionTLS10": ssl.TLSVersion.TLSv1, "VersionTLS11": ssl.TLSVersion.TLSv1_1,
                "VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}
# A client must finish its handshake, and send each request line and header, within this long
# (k8s.io/apiserver secure serving: ReadHeaderTimeout 32s, which bounds Go's TLS handshake too,
# and IdleTimeout 90s);
# an open connection with no request is closed after the idle timeout.
HANDSHAKE_TIMEOUT_SECONDS = 32.0
IDLE_TIMEOUT_SECONDS = 90.0
LISTEN_BACKLOG = 1024  # socketserver's default of 5 drops connections under a burst of probes
# Upstream's dynamiccertificates.FileRefreshDuration, and a stat of the two files per second.
SERVING_REFRESH_SECONDS = 60.0
SERVING_POLL_SECONDS = 1.0


class ServingError(ValueError):
    """A serving flag is wrong (what to fix is in the message)."""


class ServingPair:
    """The serving certificate and key: files (--tls-cert-file, --cert-dir), or PEM kept in memory."""

    def __init__(self, cert_file: str = "", key_file: str = "", cert_pem: bytes = b"", key_pem: bytes = b""):
        self.cert_file, self.key_file = cert_file, key_file
        self.cert_pem, self.key_pem = cert_pem, key_pem

    def load_into(self, context: ssl.SSLContext) -> None:
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        else:
            load_cert_chain_data(context, self.cert_pem, self.key_pem)


def tls_context(pair: ServingPair, *, client_ca_pem: bytes = b"", min_version: str = "",
                cipher_suites: Sequence[str] = ()) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if min_version:
        if min_version not in TLS_VERSIONS:
            raise ServingError(f"--tls-min-version {min_version!r} is not one of {', '.join(TLS_VERSIONS)}")
        context.minimum_version = TLS_VERSIONS[min_version]
    if cipher_suites:
        unknown = [c for c in cipher_suites if c not in GO_CIPHER_SUITES and c not in TLS13_CIPHER_SUITES]
        if unknown:
            raise ServingError(f"--tls-cipher-suites: {', '.join(unknown)} not supported or does not exist "
                               f"(known: {', '.join(sorted(GO_CIPHER_SUITES))}, {', '.join(TLS13_CIPHER_SUITES)})")
        openssl_names = [GO_CIPHER_SUITES[c] for c in cipher_suites if c in GO_CIPHER_SUITES]
        if openssl_names:
            try:
                context.set_ciphers(":".join(openssl_names))
            except ssl.SSLError:
                raise ServingError(f"--tls-cipher-suites: this OpenSSL ({ssl.OPENSSL_VERSION}) supports none of "
                                   f"{', '.join(cipher_suites)}; choose TLS 1.2 AEAD suites") from None
    pair.load_into(context)
    if client_ca_pem:
        context.load_verify_locations(cadata=client_ca_pem.decode())
        context.verify_mode = ssl.CERT_OPTIONAL  # a certificate is one way in among others
    return context


def serving_certificate(cert_file: str, key_file: str, cert_dir: str, bind_address: str) -> ServingPair:
    """--tls-cert-file/--tls-private-key-file, else kube-scheduler.{crt,key} in --cert-dir (made
    once), else a pair made now and kept in memory (MaybeDefaultWithSelfSignedCerts)."""
    if cert_file or key_file:
        if not (cert_file and key_file):
            raise ServingError("--tls-cert-file and --tls-private-key-file go together: give both or neither")
        return ServingPair(cert_file, key_file)
    host = bind_address if bind_address not in ("0.0.0.0", "::", "") else socket.gethostname()
    if cert_dir:
        pair = os.path.join(cert_dir, "kube-scheduler.crt"), os.path.join(cert_dir, "kube-scheduler.key")
        if all(os.path.exists(p) for p in pair):
            return ServingPair(*pair)
        os.makedirs(cert_dir, mode=0o700, exist_ok=True)
        return ServingPair(*_write_pair(cert_dir, "kube-scheduler", *self_signed_certificate(host)))
    cert_pem, key_pem = self_signed_certificate(host)
    return ServingPair(cert_pem=cert_pem, key_pem=key_pem)


def _read_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes] | None:
    try:
        with open(cert_file, "rb") as cert, open(key_file, "rb") as key:
            return cert.read(), key.read()
    except OSError:
        return None


class HealthServer:
    def __init__(self, bind_address: str = "0.0.0.0", port: int = 10259, *, cert_file: str = "",
                 key_file: str = "", cert_dir: str = "", tls_min_version: str = "",
                 tls_cipher_suites: Sequence[str] = (), permit_port_sharing: bool = False,
                 authenticator: DelegatingAuthenticator | None = None,
                 authorizer: DelegatingAuthorizer | None = None,
                 livez_checks: dict[str, HealthCheck] | None = None,
                 readyz_checks: dict[str, HealthCheck] | None = None,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT_SECONDS, idle_timeout: float = IDLE_TIMEOUT_SECONDS):
        self.bind_address = bind_address
        self.port = port
        self.livez_checks = livez_checks or {}
        self.readyz_checks = readyz_checks or {}
        self.authenticator = authenticator or DelegatingAuthenticator()
        self.authorizer = authorizer or DelegatingAuthorizer()
        self.permit_port_sharing = permit_port_sharing
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self._tls_settings = dict(pair=serving_certificate(cert_file, key_file, cert_dir, bind_address),
                                  min_version=tls_min_version, cipher_suites=tls_cipher_suites)
        self.context = tls_context(client_ca_pem=self.authenticator.trusted_ca_pem(), **self._tls_settings)
        # Each connection reads self.context when it arrives: a reloaded CA or serving pair
        # applies to the next handshake.
        self.authenticator.add_listener(self._renew_tls_context)
        self._pair: ServingPair = self._tls_settings["pair"]
        self._serving_content = _read_pair(self._pair.cert_file, self._pair.key_file) if self._pair.cert_file else None
        self._stop = threading.Event()
        self.httpd: ThreadingHTTPServer | None = None

    def _renew_tls_context(self) -> bool:
        try:
            self.context = tls_context(client_ca_pem=self.authenticator.trusted_ca_pem(), **self._tls_settings)
        except (OSError, ssl.SSLError, ValueError) as err:
            klog.error("Cannot load the serving certificate and key; keeping the ones in use",
                       cert=self._pair.cert_file, key=self._pair.key_file, err=str(err))
            return False
        return True

    def check_serving_files(self) -> bool:
        """Serve the pair in the files when their content changed (DynamicCertKeyPairContent's
        loadCertKeyPair); True when a new pair now serves."""
        content = _read_pair(self._pair.cert_file, self._pair.key_file)
        if content is None or content == self._serving_content:
            return False
        if not self._renew_tls_context():
            return False  # a pair caught half-written: the next change or refresh tries again
        self._serving_content = content
        klog.info("Loaded a new serving certificate", cert=self._pair.cert_file)
        return True

    def _watch_serving_files(self) -> None:
        paths = (self._pair.cert_file, self._pair.key_file)
        seen, refreshed = [file_state(p) for p in paths], time.monotonic()
        while not self._stop.wait(SERVING_POLL_SECONDS):
            state = [file_state(p) for p in paths]
            if state != seen or time.monotonic() - refreshed >= SERVING_REFRESH_SECONDS:
                seen, refreshed = state, time.monotonic()
                self.check_serving_files()

    def trust_looked_up(self, client_ca_pem: bytes, request_header) -> None:
        """Take the CAs found in the cluster where the flags gave none (flags win where both are set)."""
        if self.authenticator.apply_looked_up(client_ca_pem, request_header):
            klog.info("Trusting client CAs from kube-system/extension-apiserver-authentication")

    def start(self) -> None:
        handler = _make_handler(self)
        outer = self

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET
            daemon_threads = True
            request_queue_size = LISTEN_BACKLOG

            def server_bind(self) -> None:
                if outer.permit_port_sharing:
                    self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                super().server_bind()

            def finish_request(self, request, client_address) -> None:
                # Runs in this connection's thread: the handshake can take its time without
                # holding up the accept loop or any other client.
                request.settimeout(outer.handshake_timeout)
                try:
                    connection = outer.context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as err:
                    if klog.V(4):
                        klog.info("TLS handshake failed", client=client_address[0], err=str(err))
                    return
                try:
                    self.RequestHandlerClass(connection, client_address, self)
                finally:
                    connection.close()

            def handle_error(self, request, client_address) -> None:  # a client that vanished is no error
                if klog.V(4):
                    klog.info("Connection ended with an error", client=client_address[0])

        self.httpd = Server((self.bind_address, self.port), handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, name="serving", daemon=True).start()
        if self._pair.cert_file:  # a pair made in memory has no files to watch
            threading.Thread(target=self._watch_serving_files, name="serving-cert-reloader", daemon=True).start()
        klog.info("Serving securely", address=f"{self.bind_address}:{self.port}")

    def stop(self) -> None:
        self._stop.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def check(self, checks: dict[str, HealthCheck], verbose: bool) -> tuple[int, str]:
        lines = ["[+]ping ok"]
        failed = False
        for name, check in checks.items():
            try:
                problem = check()
            except Exception as err:  # noqa: BLE001
                problem = repr(err)
            if problem:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld" if not verbose else f"[-]{name} failed: {problem}")
            else:
                lines.append(f"[+]{name} ok")
        if failed:
            return 500, "\n".join(lines) + "\nhealthz check failed\n"
        return 200, ("\n".join(lines) + "\nhealthz check passed\n") if verbose else "ok"


def _status_body(code: int, reason: str, message: str, pretty: bool) -> bytes:
    """A metav1 Status, as the API server machinery kube-scheduler serves with answers 401 and 403:
    compact with a newline, or indented for curl and Wget (as the apiserver's pretty printing)."""
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
              "reason": reason}
    if code == 403:
        status["details"] = {}
    status["code"] = code
    if pretty:
        return json.dumps(status, indent=2).encode()
    return json.dumps(status, separators=(",", ":")).encode() + b"\n"


def _make_handler(server: HealthServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = server.idle_timeout  # StreamRequestHandler applies it to every read

        def log_message(self, fmt: str, *args) -> None:  # quiet: probes would flood the log
            if klog.V(5):
                klog.info("HTTP request", request=fmt % args)

        def _reply(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _pretty(self) -> bool:
            return self.headers.get("User-Agent", "").startswith(("curl", "Wget"))

        def _admitted(self, path: str) -> bool:
            """Authenticate, then authorize `get` on the path; reply 401/403 and return False when refused."""
            try:
                user = server.authenticator.authenticate(self.connection.getpeercert(binary_form=True), self.headers)
            except AuthenticationError as err:
                if klog.V(2):
                    klog.info("Unable to authenticate the request", path=path, err=str(err))
                self._reply(401, _status_body(401, "Unauthorized", "Unauthorized", self._pretty()), "application/json")
                return False
            allowed, reason = server.authorizer.authorize(user, "get", path)
            if not allowed:
                if klog.V(2):
                    klog.info("Forbidden", user=user.name, path=path, reason=reason)
                message = f'forbidden: User "{user.name}" cannot get path "{path}"'
                self._reply(403, _status_body(403, "Forbidden", message, self._pretty()), "application/json")
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path, _unused, query = self.path.partition("?")
            if not self._admitted(path):
                return
            verbose = "verbose" in query
            if path in ("/healthz", "/livez"):
                code, text = server.check(server.livez_checks, verbose)
                self._reply(code, text.encode())
            elif path == "/readyz":
                code, text = server.check({**server.livez_checks, **server.readyz_checks}, verbose)
                self._reply(code, text.encode())
            elif path == "/metrics":
                self._reply(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._reply(404, b"404 page not found\n")

    return Handler
