"""Suite 7: security of kubesched and of what the roles install.

Against the private lab, with kubesched subprocesses:
- the secure port listens on the configured address only;
- /metrics answers only an identity the API server allows get on it: a client certificate
  signed by the cluster CA with an RBAC rule (none: 403; another CA's: refused), while
  /healthz stays open; the serving certificate
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
import subprocess
import uuid
from pathlib import Path

import yaml

from lab.cluster import Cluster
from lab.private_lab import ROOT, PrivateLab
from tests.reliability.instances import https_get, scheduler_config, start_instance, wait_until
from tests.reliability.masters import CONFIG_DIR
from tests.reliability.result import SuiteResult
from tests.reliability.roles import bring_up

SCHEDULER_USER = "system:kube-scheduler"
# A PEM private key, and the base64 of one (how a kubeconfig embeds it): "-----BEGIN PRIVATE",
# "-----BEGIN EC PRIVATE", "-----BEGIN RSA PRIVATE".
KEY_MARKERS = ("PRIVATE KEY-----", "LS0tLS1CRUdJTiBQUklWQVRF", "LS0tLS1CRUdJTiBFQyBQUklWQVRF",
               "LS0tLS1CRUdJTiBSU0EgUFJJVkFURS")
EMBEDDED_KEY = re.compile(r"client-key-data\W{1,4}[A-Za-z0-9+/]{16}")


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
          organizations: tuple[str, ...] = (), authority: bool = False) -> tuple[str, str]:
    """A key and certificate signed by ca (cert, key), or self-signed as a rogue CA would; with
    authority, a CA certificate (self-signed unless ca is given) that can sign others."""
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
    if authority:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    elif server_ip:
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
    trusted, rogue = scrape_certificates(lab, workdir)
    grant_metrics_to_scraper(cluster)
    serving = issue(Path(workdir) / "security-pki", "serving", "kubesched-serving", ca=_load_ca(lab),
                    server_ip="127.0.0.1")
    inst = start_instance(scheduler_config(cluster.kubeconfig, f"rel-sec-{uuid.uuid4().hex[:6]}"), workdir,
                          "security-metrics", "--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
                          "--client-ca-file", lab.ca_cert)
    try:
        inst.wait_ready()
        answers = check_metrics_answers(result, f"https://127.0.0.1:{inst.port}", lab.ca_cert, trusted, rogue)
        result.figures["metrics_client_ca"] = answers
    finally:
        inst.stop()


def scrape_certificates(lab: PrivateLab, workdir: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """A scraper's client certificate signed by the cluster CA, and one from a rogue CA."""
    directory = Path(workdir) / "security-pki"
    directory.mkdir(parents=True, exist_ok=True)
    ca = _load_ca(lab)
    return issue(directory, "prometheus", "prometheus", ca=ca), issue(directory, "rogue", "prometheus")


SCRAPER_ROLE = "kubesched-security-metrics-reader"


def grant_metrics_to_scraper(cluster: Cluster) -> None:
    """RBAC get on /metrics for the scraper's identity (the secure port asks a SubjectAccessReview)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    for create, body in (
            (rbac.create_cluster_role, {"metadata": {"name": SCRAPER_ROLE},
                                        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
            (rbac.create_cluster_role_binding, {"metadata": {"name": SCRAPER_ROLE},
                                                "subjects": [{"kind": "User", "name": "prometheus",
                                                              "apiGroup": "rbac.authorization.k8s.io"}],
                                                "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": SCRAPER_ROLE}})):
        try:
            create(body)
        except ApiException as err:
            if err.status != 409:
                raise


def check_metrics_answers(result: SuiteResult, base: str, ca_file: str, trusted: tuple[str, str],
                          rogue: tuple[str, str], where: str = "") -> dict:
    """/healthz open over verified TLS; /metrics only for an identity allowed get on it (the
    scraper's certificate, signed by the cluster CA, with grant_metrics_to_scraper's rule)."""
    health = https_get(base + "/healthz", ca_file)
    anonymous = https_get(base + "/metrics", ca_file)
    other_ca = https_get(base + "/metrics", ca_file, rogue)
    signed = https_get(base + "/metrics", ca_file, trusted)
    result.check(f"{where}the serving certificate verifies against the cluster CA, hostname checked",
                 health[0] == 200, f"{base}/healthz: {health[0]} {str(health[1])[:120]}")
    result.check(f"{where}/metrics without a client certificate is forbidden", anonymous[0] == 403, f"{anonymous[0]}")
    result.check(f"{where}/metrics with a certificate from another CA is refused",
                 other_ca[0] in (401, 403, "tls-error"), f"{other_ca[0]} {str(other_ca[1])[:120]}")
    result.check(f"{where}/metrics with a certificate signed by the cluster CA answers",
                 signed[0] == 200 and "scheduler_schedule_attempts_total" in signed[1], f"{signed[0]}")
    return {"no_cert": anonymous[0], "other_ca": other_ca[0], "cluster_ca": signed[0], "healthz_open": health[0]}


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


def check_secrets_denied(result: SuiteResult, cluster: Cluster, user: str = SCHEDULER_USER,
                         groups: tuple[str, ...] = (SCHEDULER_USER,), where: str = "") -> None:
    """SubjectAccessReviews for user in groups: no Secret may be read, and what scheduling
    needs is allowed (so a denial is not only an unknown user's)."""
    groups = [*groups, "system:authenticated"]
    reviews = []
    for verb, resource, ns in SAR_DENIED + SAR_ALLOWED:
        status = subject_access(cluster, user, groups, verb, resource, ns)
        reviews.append({"verb": verb, "resource": resource, "namespace": ns or "(all)",
                        "allowed": bool(status.get("allowed")), "reason": status.get("reason", "")})
    denied_ok = all(not r["allowed"] for r in reviews[:len(SAR_DENIED)])
    allowed_ok = all(r["allowed"] for r in reviews[len(SAR_DENIED):])
    result.cases.extend({"subject_access_review": {"user": user, "groups": groups, **r}} for r in reviews)
    result.check(f"{where}{user} cannot read Secrets (SubjectAccessReview)", denied_ok,
                 "; ".join(f"{r['verb']} {r['resource']} in {r['namespace']}: "
                           f"{'ALLOWED' if r['allowed'] else 'denied'}" for r in reviews[:len(SAR_DENIED)]))
    result.check(f"{where}{user} can do what scheduling needs (the reviews are not vacuous)", allowed_ok,
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
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
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


# ---------------------------------------------------------------------------------------------
# The service the roles installed on a container master
# ---------------------------------------------------------------------------------------------

UNIT = "kube-scheduler.service"
SERVICE_USER = "kube-scheduler"
EXPOSURE = re.compile(r"Overall exposure level for kube-scheduler\.service:\s*([\d.]+)\s*(\S+)")
# What the role's health gate waits for in the journal (scheduler_election_joined_pattern).
ELECTION_JOINED = re.compile(r"attempting to acquire leader lease|successfully acquired lease", re.I)
# What a sandbox setting that takes away something the service needs leaves in its journal.
SANDBOX_DENIALS = re.compile(r"Operation not permitted|Permission denied|Address family not supported|"
                             r"EAFNOSUPPORT|EPERM|EACCES|Traceback", re.I)


def exposure(masters, name: str) -> tuple[float | None, str, list[str]]:
    """systemd-analyze security of the unit: (score, rating, the settings it still counts)."""
    analysis = masters.exec(name, "systemd-analyze", "security", "--no-pager", UNIT, check=False).stdout
    match = EXPOSURE.search(analysis)
    items = [line.strip() for line in analysis.splitlines() if line.lstrip().startswith("✗")]
    return (float(match.group(1)) if match else None), (match.group(2) if match else analysis[-300:]), items


def check_installed_service(result: SuiteResult, lab: PrivateLab, cluster: Cluster, masters, workdir: str) -> None:
    """On the first master: key modes and owners, the non-root sandboxed service, its bind
    address, /metrics behind the cluster CA, its identity's access to Secrets, its exposure."""
    name = masters.names[0]
    stats = masters.exec(name, "sh", "-c", f"stat -c '%a %U %n' {CONFIG_DIR}/pki/*.key {CONFIG_DIR}/kubeconfig",
                         check=False).stdout.split("\n")
    stats = [line for line in stats if line.strip()]
    bad = [line for line in stats if not line.startswith(f"600 {SERVICE_USER} ")]
    result.check("key files and the kubeconfig are 0600 and owned by the service user", bool(stats) and not bad,
                 "; ".join(stats))
    show = masters.exec(name, "systemctl", "show", UNIT, "-p", "MainPID", "-p", "User", "-p", "NoNewPrivileges",
                        "-p", "ProtectSystem", "-p", "CapabilityBoundingSet", check=False).stdout
    props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
    running_as = masters.exec(name, "ps", "-o", "user=", "-p", props.get("MainPID", "0"), check=False).stdout.strip()
    result.check("the service runs as its own non-root user with NoNewPrivileges and ProtectSystem=strict",
                 running_as == SERVICE_USER and props.get("NoNewPrivileges") == "yes"
                 and props.get("ProtectSystem") == "strict", f"process user {running_as!r}; {props}")
    # The masters share the host's network, and ProtectProc=invisible hides the service from
    # `ss -p`: so the configured address must be listening and no wildcard on the port.
    address, port = masters.addresses[name], masters.secure_port
    listening = masters.exec(name, "ss", "-Hltn", f"sport = :{port}", check=False).stdout
    local = [line.split()[3] for line in listening.splitlines() if len(line.split()) > 3]
    wildcard = [a for a in local if a.rsplit(":", 1)[0] in ("0.0.0.0", "*", "[::]")]
    result.check("the installed service's secure port binds to its configured address, not a wildcard",
                 f"{address}:{port}" in local and not wildcard,
                 f"scheduler_bind_address {address}; listening on the port: {local}")
    trusted, rogue = scrape_certificates(lab, workdir)
    grant_metrics_to_scraper(cluster)
    result.figures["installed_metrics_client_ca"] = check_metrics_answers(
        result, f"https://{address}:{port}", lab.ca_cert, trusted, rogue, where="installed service: ")
    user, groups = _certificate_identity(masters.exec(name, "cat", f"{CONFIG_DIR}/pki/client.crt").stdout)
    check_secrets_denied(result, cluster, user, tuple(groups), where="the identity the role issued, ")
    score, rating, items = exposure(masters, name)
    result.figures["systemd_analyze_exposure"] = score
    result.figures["systemd_analyze_rating"] = rating
    result.figures["systemd_analyze_open_items"] = items[:40]
    result.check("systemd-analyze security rates the unit (exposure score recorded)", score is not None,
                 f"{score} {rating}")
    journal = masters.exec(name, "journalctl", "--no-pager", "-u", UNIT, check=False).stdout
    (masters.workdir / f"{name}-journal.log").write_text(journal, encoding="utf-8")


def _certificate_identity(pem: str) -> tuple[str, list[str]]:
    """(user, groups) the API server derives from a client certificate: its CN and its Os."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    subject = x509.load_pem_x509_certificate(pem.encode()).subject
    common_name = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return (str(common_name[0].value) if common_name else "",
            [str(attr.value) for attr in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)])


# Sandbox settings the unit does not set yet, tried one at a time (then together) through a
# drop-in on the first master: does the service still start, serve, sync and join the
# election, and what does each take off the exposure score? "localhost" covers the lab's API
# server; a real site adds the API server's and the scrapers' addresses to IPAddressAllow.
# Each names the systemd-analyze item it would close: a candidate whose item is not open any
# more is already in the unit and is not tried again. A trade loosens another setting to make
# room for its own, so it is measured but left out of the combination.
HARDENING_CANDIDATES = (  # (label, systemd-analyze item, settings, trade)
    ("PrivateUsers", "PrivateUsers=", {"PrivateUsers": ["yes"]}, False),
    ("PrivateUsers with ProtectProc=default", "PrivateUsers=",
     {"PrivateUsers": ["yes"], "ProtectProc": ["default"]}, True),
    ("IPAddressDeny/IPAddressAllow", "IPAddressDeny=", {"IPAddressDeny": ["any"], "IPAddressAllow": ["localhost"]}, False),
    ("RestrictAddressFamilies without AF_UNIX", "RestrictAddressFamilies=~AF_UNIX",
     {"RestrictAddressFamilies": ["", "AF_INET AF_INET6"]}, False),
)
DROP_IN = f"/etc/systemd/system/{UNIT}.d/90-reliability-candidate.conf"


def _restart_with(masters, name: str, settings: dict[str, list[str]] | None) -> str:
    """Restart the unit with settings as a drop-in (None removes it); its invocation ID."""
    if settings:
        body = "[Service]\n" + "".join(f"{key}={value}\n" for key, values in settings.items() for value in values)
        # The body travels as an argument ($1), so no shell quoting touches it.
        masters.exec(name, "sh", "-c", f'mkdir -p {DROP_IN.rsplit("/", 1)[0]} && printf "%s" "$1" > {DROP_IN}',
                     "write-drop-in", body)
    else:
        masters.exec(name, "rm", "-f", DROP_IN)
    masters.exec(name, "systemctl", "daemon-reload")
    masters.exec(name, "systemctl", "restart", UNIT, check=False)
    return masters.exec(name, "systemctl", "show", UNIT, "-p", "InvocationID", "--value", check=False).stdout.strip()


def _healthy(masters, name: str, lab: PrivateLab, invocation: str, timeout: float = 40) -> tuple[bool, str]:
    """Active, /readyz 200 over verified TLS (its informers synced through the API server), and
    this invocation joined the leader election; else why not."""
    base = f"https://{masters.addresses[name]}:{masters.secure_port}"
    why = ""

    def state() -> bool:
        nonlocal why
        active = masters.exec(name, "systemctl", "is-active", UNIT, check=False).stdout.strip()
        ready = https_get(base + "/readyz", lab.ca_cert)
        journal = masters.exec(name, "journalctl", "--no-pager", "--output=cat",
                               f"_SYSTEMD_INVOCATION_ID={invocation}", check=False).stdout
        denial = SANDBOX_DENIALS.search(journal)
        why = (f"{active}; /readyz {ready[0]}; election joined: {bool(ELECTION_JOINED.search(journal))}"
               + (f"; journal: ...{journal[max(0, denial.start() - 150):denial.end() + 100]!r}" if denial else ""))
        return active == "active" and ready[0] == 200 and bool(ELECTION_JOINED.search(journal)) and not denial

    if wait_until(state, timeout, 1.0):
        return True, why
    # systemd's own words on a unit that cannot start are logged for the unit, not the invocation.
    tail = masters.exec(name, "journalctl", "--no-pager", "--output=cat", "-n", "12", "-u", UNIT, check=False).stdout
    failures = list(dict.fromkeys(line.strip() for line in tail.splitlines() if "fail" in line.lower()))
    return False, f"{why}; systemd says: {' / '.join(failures[:3]) or tail[-300:]}"[:700]


def probe_hardening(result: SuiteResult, lab: PrivateLab, masters) -> None:
    """Each open HARDENING_CANDIDATES entry, then the ones that worked together; the unit as
    installed afterwards."""
    name = masters.names[0]
    baseline = result.figures.get("systemd_analyze_exposure")
    open_items = result.figures.get("systemd_analyze_open_items") or []
    probes: list[dict] = []
    working: dict[str, list[str]] = {}
    tries = [(label, settings, trade) for label, item, settings, trade in HARDENING_CANDIDATES
             if any(line.lstrip("✗ ").startswith(item) for line in open_items)]
    tried = {label for label, _settings, _trade in tries}
    probes += [{"candidate": label, "works": None, "detail": "already set in the installed unit"}
               for label, *_rest in HARDENING_CANDIDATES if label not in tried]
    try:
        for label, settings, trade in tries:
            probes.append(_try_settings(masters, name, lab, label, settings, baseline))
            probes[-1]["trade"] = trade
            if probes[-1]["works"] and not trade:
                working.update(settings)
        if len(working) > 1:
            probes.append(_try_settings(masters, name, lab, "all that worked, together", working, baseline))
            probes[-1]["trade"] = False
    finally:
        invocation = _restart_with(masters, name, None)
        restored, why = _healthy(masters, name, lab, invocation)
    result.figures["hardening_candidates"] = probes
    result.check("the hardening probe leaves the service as installed, active and healthy", restored, why)


def _try_settings(masters, name: str, lab: PrivateLab, label: str, settings: dict[str, list[str]],
                  baseline: float | None) -> dict:
    invocation = _restart_with(masters, name, settings)
    works, why = _healthy(masters, name, lab, invocation)
    score, rating, _items = exposure(masters, name)
    return {"candidate": label, "settings": {key: [v for v in values if v] for key, values in settings.items()},
            "works": works, "detail": why, "exposure": score, "rating": rating,
            "exposure_gain": round(baseline - score, 2) if baseline is not None and score is not None else None}


def key_material_in(texts: dict[str, str], secrets: list[str]) -> list[str]:
    """Names of the texts that hold a private key (PEM, or base64 as a kubeconfig embeds it), a
    filled kubeconfig key field, or one of secrets."""
    hits = []
    for name, text in texts.items():
        if (any(marker in text for marker in KEY_MARKERS) or EMBEDDED_KEY.search(text)
                or any(s and s in text for s in secrets)):
            hits.append(name)
    return hits


def key_fragments(pem: str) -> list[str]:
    """Pieces of one private key as a leak would show them: a line of its PEM body, and a stretch
    of the base64 of the whole PEM (what a kubeconfig's client-key-data holds)."""
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    embedded = base64.b64encode(pem.encode()).decode()
    return [fragment for fragment in (body[:64], embedded[60:124]) if len(fragment) >= 32]


def known_secrets(lab: PrivateLab, masters=None) -> list[str]:
    """Fragments of the keys this run handled: the lab's admin client key and CA key, and the
    keys the role issued on the first master."""
    with open(lab.kubeconfig, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    pems = [base64.b64decode(u["user"]["client-key-data"]).decode() for u in doc.get("users") or []
            if u["user"].get("client-key-data")]
    with open(lab.ca_key, encoding="utf-8") as fh:
        pems.append(fh.read())
    if masters is not None:
        for key in ("client.key", "serving.key"):
            pems.append(masters.exec(masters.names[0], "cat", f"{CONFIG_DIR}/pki/{key}", check=False).stdout)
    return [fragment for pem in pems for fragment in key_fragments(pem)]


def check_logs(result: SuiteResult, lab: PrivateLab, workdir: str, masters=None) -> None:
    texts = {}
    for path in Path(workdir).rglob("*"):
        if path.is_file() and path.suffix in (".log", ".txt"):
            texts[str(path.relative_to(workdir))] = path.read_text(encoding="utf-8", errors="replace")
    hits = key_material_in(texts, known_secrets(lab, masters))
    result.figures["logs_scanned_for_key_material"] = len(texts)
    result.check("no key material in the kubesched logs, journals and Ansible outputs (site.yml with --diff -v)",
                 not hits and bool(texts), f"{len(texts)} files scanned" + (f"; found in {hits}" if hits else ""))


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
        try:
            if masters_ready or bring_up(result, masters, reuse):
                check_installed_service(result, lab, cluster, masters, workdir)
                probe_hardening(result, lab, masters)
        except Exception as err:  # noqa: BLE001
            result.check("installed service: check completes", False, repr(err)[:500])
    else:
        result.check("the container master image exists (make setup builds it)", False,
                     "localhost/kubesched-master:bookworm is missing: the installed service (key modes, non-root, "
                     "systemd-analyze) cannot be checked")
    check_logs(result, lab, workdir, masters if masters is not None and masters.converged else None)
    return result.finish()
