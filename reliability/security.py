"""Suite 7: security of kubesched and of what the roles install.

Against the private lab, with kubesched subprocesses:
- the secure port listens on the configured address only;
- with --client-ca-file, /metrics answers only a client certificate signed by the cluster
  CA (none: 401; another CA's: refused), while /healthz stays open; the serving certificate
  verifies against the cluster CA with hostname checking on;
- the scheduler identity (system:kube-scheduler) may not read Secrets, shown with
  SubjectAccessReviews, while it may do what scheduling needs (positive controls);
- TLS is verified by default: kubesched with a kubeconfig that names no CA, and a module
  given a host but no ca_cert, both refuse the lab API server's certificate; no shipped
  role, playbook or module turns verification off by default;
- no key material in any log this harness collected.

On a container master installed by the role (when the roles suite ran): key files 0600
owned by the service user, the service non-root with its sandbox, and the unit's
`systemd-analyze security` exposure score.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import yaml

from reliability.cluster import ROOT, Cluster, PrivateLab
from reliability.instances import scheduler_config, start_instance, wait_until
from reliability.result import SuiteResult

SCHEDULER_USER = "system:kube-scheduler"
KEY_MARKERS = ("PRIVATE KEY-----", "client-key-data")


# ---------------------------------------------------------------------------------------------
# Certificates for the tests
# ---------------------------------------------------------------------------------------------

def _load_ca(lab: PrivateLab):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    with open(lab.ca_cert, "rb") as fh:
        cert = x509.load_pem_x509_certificate(fh.read())
    with open(lab.ca_key, "rb") as fh:
        key = serialization.load_pem_private_key(fh.read(), password=None)
    return cert, key


def issue(directory: Path, name: str, common_name: str, *, ca=None, server_ip: str | None = None,
          organizations: tuple[str, ...] = ()) -> tuple[str, str]:
    """A key and certificate signed by ca (cert, key), or self-signed as a rogue CA would."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject = x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer_cert, issuer_key = ca if ca is not None else (None, key)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer_cert.subject if issuer_cert is not None else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if server_ip:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(server_ip)), x509.DNSName("localhost")]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def https_get(url: str, ca_file: str, client: tuple[str, str] | None = None) -> tuple[int | str, str]:
    """GET with the server verified against ca_file (hostname checked); (status, body) or
    ("tls-error", why) when the handshake fails."""
    context = ssl.create_default_context(cafile=ca_file)
    if client:
        context.load_cert_chain(*client)
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (ssl.SSLError, urllib.error.URLError, ConnectionError) as err:
        return "tls-error", str(getattr(err, "reason", err))


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------

def check_bind_address(result: SuiteResult, cluster: Cluster, workdir: str) -> None:
    address = "127.0.0.2"
    inst = start_instance(scheduler_config(cluster.kubeconfig, f"rel-sec-{uuid.uuid4().hex[:6]}"), workdir,
                          "security-bind", bind_address=address)
    try:
        inst.wait_ready()
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{inst.port}"], capture_output=True, text=True,
                                   check=False).stdout.split()
        local = [field for field in listening if field.endswith(f":{inst.port}")]
        refused = False
        with socket.socket() as sock:
            sock.settimeout(2)
            refused = sock.connect_ex(("127.0.0.1", inst.port)) != 0
        result.check("the secure port listens on the configured address only",
                     local == [f"{address}:{inst.port}"] and refused and inst.get("/healthz")[0] == 200,
                     f"--bind-address {address}: listening on {local}; 127.0.0.1:{inst.port} refused: {refused}")
    finally:
        inst.stop()


def check_metrics_client_ca(result: SuiteResult, lab: PrivateLab, cluster: Cluster, workdir: str) -> None:
    directory = Path(workdir) / "security-pki"
    directory.mkdir(parents=True, exist_ok=True)
    ca = _load_ca(lab)
    serving = issue(directory, "serving", "kubesched-serving", ca=ca, server_ip="127.0.0.1")
    trusted = issue(directory, "prometheus", "prometheus", ca=ca)
    rogue = issue(directory, "rogue", "prometheus")
    inst = start_instance(scheduler_config(cluster.kubeconfig, f"rel-sec-{uuid.uuid4().hex[:6]}"), workdir,
                          "security-metrics", "--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
                          "--client-ca-file", lab.ca_cert)
    try:
        inst.wait_ready()
        base = f"https://127.0.0.1:{inst.port}"
        health = https_get(base + "/healthz", lab.ca_cert)
        anonymous = https_get(base + "/metrics", lab.ca_cert)
        other_ca = https_get(base + "/metrics", lab.ca_cert, rogue)
        signed = https_get(base + "/metrics", lab.ca_cert, trusted)
        result.check("the serving certificate verifies against the cluster CA, hostname checked",
                     health[0] == 200, f"/healthz: {health[0]}")
        result.check("/metrics without a client certificate is refused", anonymous[0] == 401, f"{anonymous[0]}")
        result.check("/metrics with a certificate from another CA is refused",
                     other_ca[0] in (401, "tls-error"), f"{other_ca[0]} {str(other_ca[1])[:120]}")
        result.check("/metrics with a certificate signed by the cluster CA answers",
                     signed[0] == 200 and "scheduler_schedule_attempts_total" in signed[1], f"{signed[0]}")
        result.figures["metrics_client_ca"] = {"no_cert": anonymous[0], "other_ca": other_ca[0],
                                               "cluster_ca": signed[0], "healthz_open": health[0]}
    finally:
        inst.stop()


SAR_DENIED = [  # (verb, resource, namespace)
    ("get", "secrets", "kube-system"), ("list", "secrets", ""), ("watch", "secrets", ""),
    ("get", "secrets", "default"), ("create", "secrets", "kube-system"),
]
SAR_ALLOWED = [  # what scheduling needs
    ("create", "pods/binding", "default"), ("list", "nodes", ""), ("watch", "pods", ""),
    ("update", "leases", "kube-system"), ("create", "events", "default"),
]


def subject_access(cluster: Cluster, user: str, groups: list[str], verb: str, resource: str, namespace: str) -> dict:
    resource_name, _sep, subresource = resource.partition("/")
    api_group = {"leases": "coordination.k8s.io"}.get(resource_name, "")
    attrs = {"verb": verb, "resource": resource_name, "group": api_group}
    if subresource:
        attrs["subresource"] = subresource
    if namespace:
        attrs["namespace"] = namespace
    if resource_name == "leases":
        attrs["name"] = "kube-scheduler"
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attrs}}
    resp = cluster.authorization.create_subject_access_review(body, _preload_content=False)
    return json.loads(resp.data)["status"]


def check_secrets_denied(result: SuiteResult, cluster: Cluster) -> None:
    groups = [SCHEDULER_USER, "system:authenticated"]
    reviews = []
    for verb, resource, ns in SAR_DENIED + SAR_ALLOWED:
        status = subject_access(cluster, SCHEDULER_USER, groups, verb, resource, ns)
        reviews.append({"verb": verb, "resource": resource, "namespace": ns or "(all)",
                        "allowed": bool(status.get("allowed")), "reason": status.get("reason", "")})
    denied_ok = all(not r["allowed"] for r in reviews[:len(SAR_DENIED)])
    allowed_ok = all(r["allowed"] for r in reviews[len(SAR_DENIED):])
    result.cases.extend({"subject_access_review": r} for r in reviews)
    result.check(f"{SCHEDULER_USER} cannot read Secrets (SubjectAccessReview)", denied_ok,
                 "; ".join(f"{r['verb']} {r['resource']} in {r['namespace']}: "
                           f"{'ALLOWED' if r['allowed'] else 'denied'}" for r in reviews[:len(SAR_DENIED)]))
    result.check(f"{SCHEDULER_USER} can do what scheduling needs (the reviews are not vacuous)", allowed_ok,
                 "; ".join(f"{r['verb']} {r['resource']}: {'allowed' if r['allowed'] else 'DENIED'}"
                           for r in reviews[len(SAR_DENIED):]))


def check_tls_verified_by_default(result: SuiteResult, lab: PrivateLab, cluster: Cluster, workdir: str) -> None:
    with open(lab.kubeconfig, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    for entry in doc["clusters"]:
        entry["cluster"].pop("certificate-authority-data", None)
        entry["cluster"].pop("certificate-authority", None)
    no_ca = Path(workdir) / "no-ca.kubeconfig"
    fd = os.open(no_ca, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh)
    inst = start_instance(scheduler_config(str(no_ca), f"rel-sec-{uuid.uuid4().hex[:6]}"), workdir,
                          "security-no-ca")
    try:
        refused = wait_until(lambda: "CERTIFICATE_VERIFY_FAILED" in inst.log() or "certificate verify failed"
                             in inst.log(), 30, 0.5)
        ready = inst.alive() and inst.get("/readyz")[0] == 200
        result.check("kubesched verifies the API server: a kubeconfig with no CA is refused, not trusted",
                     bool(refused) and not ready, "log names the verification failure" if refused else inst.log()[-300:])
    finally:
        inst.stop()
    module = _run_module_without_ca(lab, workdir)
    result.check("a module given a host and no ca_cert verifies the API server and fails",
                 "TLS verification of the API server" in module, module[:300])
    insecure = _insecure_defaults()
    result.check("no role, playbook or module turns TLS verification off by default", not insecure,
                 "; ".join(insecure) or "defaults of every validate_certs variable are true; the only CERT_NONE in "
                 "kubesched is behind the kubeconfig's explicit insecure-skip-tls-verify")


def _run_module_without_ca(lab: PrivateLab, workdir: str) -> str:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_PYTHON_INTERPRETER": str(ROOT / ".venv/bin/python"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"}
    for key in [k for k in env if k.startswith("K8S_AUTH_")]:
        env.pop(key)
    done = subprocess.run([str(ROOT / ".venv/bin/ansible"), "localhost", "-c", "local", "-m",
                           "kubesched.scheduler.node_label", "-a",
                           json.dumps({"name": "rel-node-0", "labels": {"rel": "x"},
                                       "host": f"https://127.0.0.1:{lab.api_port}"})],
                          capture_output=True, text=True, env=env, cwd=workdir, timeout=120, check=False)
    return done.stdout + done.stderr


def _insecure_defaults() -> list[str]:
    """Shipped places where TLS verification is off unless the user turns it off."""
    found = []
    for path in sorted(list(ROOT.glob("roles/*/defaults/*.yml")) + list(ROOT.glob("roles/*/meta/argument_specs.yml"))):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^\s*(\w*validate_certs\w*):\s*(\S+)", text, re.M):
            if match.group(2).lower() in ("false", "no", "off"):
                found.append(f"{path.relative_to(ROOT)}: {match.group(1)} defaults to {match.group(2)}")
        for match in re.finditer(r"(\w*validate_certs\w*):\n(?:\s+\w+:.*\n)*?\s+default:\s*(\S+)", text):
            if match.group(2).lower() in ("false", "no"):
                found.append(f"{path.relative_to(ROOT)}: {match.group(1)} defaults to {match.group(2)}")
    pattern = re.compile(r"validate_certs:\s*(false|no)\b|curl\s+(-k|--insecure)\b|verify\s*=\s*False")
    for path in sorted(list(ROOT.glob("roles/**/*.yml")) + list(ROOT.glob("roles/**/*.j2")) +
                       list(ROOT.glob("playbooks/*.yml")) + list(ROOT.glob("plugins/**/*.py"))):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    return found


def key_material_in(texts: dict[str, str], secrets: list[str]) -> list[str]:
    """Names of the texts that hold a private key, a kubeconfig key field, or one of secrets."""
    hits = []
    for name, text in texts.items():
        if any(marker in text for marker in KEY_MARKERS) or any(s and s in text for s in secrets):
            hits.append(name)
    return hits


def known_secrets(lab: PrivateLab) -> list[str]:
    """Fragments of key material that must never be printed: the admin client key (base64, as
    the kubeconfig holds it) and the body of the CA key."""
    with open(lab.kubeconfig, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    secrets = [u["user"].get("client-key-data", "")[:64] for u in doc.get("users") or []]
    with open(lab.ca_key, encoding="utf-8") as fh:
        body = "".join(line for line in fh.read().splitlines() if "-----" not in line)
    secrets.append(body[:64])
    secrets.append(base64.b64encode(body[:48].encode()).decode()[:40])
    return [s for s in secrets if len(s) >= 32]


def check_logs(result: SuiteResult, lab: PrivateLab, workdir: str) -> None:
    texts = {}
    for path in Path(workdir).rglob("*"):
        if path.is_file() and path.suffix in (".log", ".txt"):
            texts[str(path.relative_to(workdir))] = path.read_text(encoding="utf-8", errors="replace")
    hits = key_material_in(texts, known_secrets(lab))
    result.figures["logs_scanned_for_key_material"] = len(texts)
    result.check("no key material in the kubesched logs and Ansible outputs collected", not hits and bool(texts),
                 f"{len(texts)} files scanned" + (f"; found in {hits}" if hits else ""))


def run(lab: PrivateLab, cluster: Cluster, workdir: str, masters=None, masters_ready: bool = False,
        reuse: bool = False) -> SuiteResult:
    """masters: the container masters, or None where the image is missing; masters_ready: the
    roles suite left them converged, else they are brought up here first."""
    result = SuiteResult("security", "Security")
    for name, check in (("bind address", lambda: check_bind_address(result, cluster, workdir)),
                        ("metrics client CA", lambda: check_metrics_client_ca(result, lab, cluster, workdir)),
                        ("secrets", lambda: check_secrets_denied(result, cluster)),
                        ("TLS by default", lambda: check_tls_verified_by_default(result, lab, cluster, workdir))):
        try:
            check()
        except Exception as err:  # noqa: BLE001 - one check's failure must not hide the others
            result.check(f"{name}: check completes", False, repr(err)[:500])
    if masters is not None:
        from reliability.roles import bring_up, check_installed_service

        try:
            if masters_ready or bring_up(result, masters, reuse):
                check_installed_service(result, masters)
        except Exception as err:  # noqa: BLE001
            result.check("installed service: check completes", False, repr(err)[:500])
    else:
        result.check("the container master image exists (make setup builds it)", False,
                     "localhost/kubesched-master:bookworm is missing: the installed service (key modes, non-root, "
                     "systemd-analyze) cannot be checked")
    check_logs(result, lab, workdir)
    return result.finish()
