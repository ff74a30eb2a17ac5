"""The secure serving endpoint: /healthz, /livez, /readyz and /metrics over HTTPS.

Like kube-scheduler, it serves on --bind-address:--secure-port (default 0.0.0.0:10259) with
--tls-cert-file/--tls-private-key-file, or a self-signed certificate made at start-up when
none is given. With --client-ca-file, /metrics requires a client certificate signed by that
CA (health endpoints stay open, as upstream's always-allowed paths).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubesched import klog
from kubesched.metrics import REGISTRY

HealthCheck = Callable[[], "str | None"]  # None when healthy, else the reason


def self_signed_certificate(host: str, directory: str) -> tuple[str, str]:
    """Write a self-signed serving certificate for host, localhost and 127.0.0.1.

    Uses the cryptography package, or the openssl command where it is not installed.
    """
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return _openssl_self_signed(host, directory)
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
    cert_path = os.path.join(directory, "kubesched.crt")
    key_path = os.path.join(directory, "kubesched.key")
    with open(cert_path, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return cert_path, key_path


def _openssl_self_signed(host: str, directory: str) -> tuple[str, str]:
    cert_path = os.path.join(directory, "kubesched.crt")
    key_path = os.path.join(directory, "kubesched.key")
    san = "DNS:localhost,IP:127.0.0.1," + (f"IP:{host}" if _is_ip(host) else f"DNS:{host}")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "365", "-subj", f"/CN={host}@kubesched", "-addext",
                        f"subjectAltName={san}", "-keyout", key_path, "-out", cert_path],
                       check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise OSError("cannot make a self-signed serving certificate (install the cryptography package or "
                      f"openssl, or pass --tls-cert-file and --tls-private-key-file): {err}") from None
    return cert_path, key_path


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


class HealthServer:
    def __init__(self, bind_address: str = "0.0.0.0", port: int = 10259, *, cert_file: str = "",
                 key_file: str = "", client_ca_file: str = "",
                 livez_checks: dict[str, HealthCheck] | None = None,
                 readyz_checks: dict[str, HealthCheck] | None = None):
        self.bind_address = bind_address
        self.port = port
        self.livez_checks = livez_checks or {}
        self.readyz_checks = readyz_checks or {}
        self.client_ca_file = client_ca_file
        if not cert_file:
            self._temp = tempfile.mkdtemp(prefix="kubesched-serving-")
            host = bind_address if bind_address not in ("0.0.0.0", "::", "") else socket.gethostname()
            cert_file, key_file = self_signed_certificate(host, self._temp)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        if client_ca_file:
            context.load_verify_locations(client_ca_file)
            context.verify_mode = ssl.CERT_OPTIONAL
        self.context = context
        self.httpd: ThreadingHTTPServer | None = None

    def start(self) -> None:
        handler = _make_handler(self)
        family = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET

        class Server(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self.httpd = Server((self.bind_address, self.port), handler)
        self.httpd.socket = self.context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, name="serving", daemon=True).start()
        klog.info("Serving securely", address=f"{self.bind_address}:{self.port}")

    def stop(self) -> None:
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


def _make_handler(server: HealthServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args) -> None:  # quiet: probes would flood the log
            if klog.V(5):
                klog.info("HTTP request", request=fmt % args)

        def _reply(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path, _unused, query = self.path.partition("?")
            verbose = "verbose" in query
            if path in ("/healthz", "/livez"):
                code, text = server.check(server.livez_checks, verbose)
                self._reply(code, text.encode())
            elif path == "/readyz":
                code, text = server.check({**server.livez_checks, **server.readyz_checks}, verbose)
                self._reply(code, text.encode())
            elif path == "/metrics":
                if server.client_ca_file and not self.connection.getpeercert():
                    self._reply(401, b"Unauthorized: /metrics needs a client certificate signed by --client-ca-file\n")
                    return
                self._reply(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._reply(404, b"404 page not found\n")

    return Handler
