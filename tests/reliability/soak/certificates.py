"""The schedulers' serving certificate and client CA bundle, and their rotation.

The serving pair is signed by the cluster CA for 127.0.0.1, as the certificates role issues
it; the client CA bundle holds the cluster CA (the harness scrapes /metrics with the admin
identity it signed) and one more CA that rotation replaces, as a site that rotates the CA it
gives its metrics scrapers would. ``rotate_client_ca`` writes a new CA into the bundle and
``rotate_serving`` a new serving pair over the files the flags name (each file replaced by a
rename, so a reader never sees half a file); the waits ask every instance what it serves and
whom it accepts. kube-scheduler reloads both files while it runs (k8s.io/apiserver
dynamiccertificates).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import ssl
import time
from pathlib import Path

from lab.private_lab import PrivateLab
from tests.reliability.instances import https_get
from tests.reliability.security import _load_ca, issue

SCRAPER = "prometheus"  # the user tests.reliability.security.grant_metrics_to_scraper lets read /metrics
# Upstream re-reads both files at least once a minute (dynamiccertificates' FileRefreshDuration),
# and at once on an fsnotify event.
ROTATION_TIMEOUT_S = 75.0


class Certificates:
    def __init__(self, lab: PrivateLab, directory: Path):
        self.lab = lab
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cluster_ca = _load_ca(lab)
        self.serving = (str(self.directory / "serving.crt"), str(self.directory / "serving.key"))
        self.client_ca_file = str(self.directory / "client-ca.crt")
        self.serving_generation = self.client_ca_generation = -1
        self.scrapers: list[tuple[str, str]] = []  # a client certificate per generation of the rotating CA
        self.rotate_serving()
        self.rotate_client_ca()

    def _issue(self, name: str, common_name: str, **kwargs) -> tuple[str, str]:
        return issue(self.directory, name, common_name, **kwargs)

    def rotate_serving(self) -> dict:
        """A new serving pair (a new key) over the files --tls-cert-file and --tls-private-key-file name."""
        self.serving_generation += 1
        cert, key = self._issue(f"serving-{self.serving_generation}", "soak-scheduler", ca=self.cluster_ca,
                                server_ip="127.0.0.1")
        # The key first: a reader that sees the new certificate finds its key already there.
        _replace(key, self.serving[1])
        _replace(cert, self.serving[0])
        return {"generation": self.serving_generation, "sha256": fingerprint_of(self.serving[0])}

    def rotate_client_ca(self) -> dict:
        """A new rotating CA in the bundle --client-ca-file names; the previous one leaves it."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        self.client_ca_generation += 1
        gen = self.client_ca_generation
        ca_cert, ca_key = self._issue(f"rotating-ca-{gen}", f"soak-rotating-ca-{gen}", authority=True)
        rotating = (x509.load_pem_x509_certificate(Path(ca_cert).read_bytes()),
                    serialization.load_pem_private_key(Path(ca_key).read_bytes(), password=None))
        self.scrapers.append(self._issue(f"scraper-{gen}", SCRAPER, ca=rotating))
        bundle = self.directory / f"client-ca-{gen}.crt"
        bundle.write_bytes(Path(self.lab.ca_cert).read_bytes() + Path(ca_cert).read_bytes())
        _replace(str(bundle), self.client_ca_file)
        return {"generation": gen}

    def serves_current(self, port: int) -> bool:
        return served_fingerprint(port) == fingerprint_of(self.serving[0])

    def accepts_current_ca_only(self, port: int) -> bool:
        """/metrics answers the current rotating CA's client and refuses the previous one's."""
        base = f"https://127.0.0.1:{port}/metrics"
        current = https_get(base, self.lab.ca_cert, self.scrapers[-1])[0]
        previous = https_get(base, self.lab.ca_cert, self.scrapers[-2])[0] if len(self.scrapers) > 1 else None
        return current == 200 and previous in (None, 401, 403, "tls-error")

    def wait_serving(self, ports: dict[int, int], timeout: float = ROTATION_TIMEOUT_S) -> dict:
        return _wait_each(ports, self.serves_current, timeout)

    def wait_client_ca(self, ports: dict[int, int], timeout: float = ROTATION_TIMEOUT_S) -> dict:
        return _wait_each(ports, self.accepts_current_ca_only, timeout)


def _wait_each(ports: dict[int, int], done, timeout: float) -> dict:
    """Per slot: seconds until done(port) held, or None when it did not within timeout."""
    began = time.monotonic()
    outcome: dict[int, float | None] = {slot: None for slot in ports}
    while time.monotonic() - began < timeout and any(v is None for v in outcome.values()):
        for slot, port in ports.items():
            if outcome[slot] is None:
                try:
                    if done(port):
                        outcome[slot] = round(time.monotonic() - began, 1)
                except OSError:
                    continue
        time.sleep(1.0)
    return outcome


def _replace(source: str, target: str) -> None:
    temporary = f"{target}.new"
    shutil.copyfile(source, temporary)
    os.chmod(temporary, 0o600)
    os.replace(temporary, target)


def fingerprint_of(pem_path: str) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(Path(pem_path).read_text())).hexdigest()[:16]


def served_fingerprint(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()[:16]
