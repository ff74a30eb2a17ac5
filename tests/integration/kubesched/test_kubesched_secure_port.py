"""The secure port as kube-scheduler's: never stalled by idle or slow clients; /metrics only
for identities the API server allows `get` on it (delegated authentication and authorization
against the real lab: client certificates, TokenReview, SubjectAccessReview)."""

import datetime
import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from kubesched_lab import KUBESCHED, free_port, wait_for
from placement_agreement import KUBE_SCHEDULER

from kubesched.client import load_client_certificate, load_kubeconfig

IDLE_CONNECTIONS = 200
SLOW_HANDSHAKES = 20
PROBES = 200
PROBE_LIMIT_SECONDS = 0.100
SETTLE_SECONDS = 1.0
# The first bytes of a TLS ClientHello: a record header that announces 512 bytes, then a
# handshake header; the rest never comes, so the server waits inside the handshake.
PARTIAL_CLIENT_HELLO = bytes.fromhex("1603010200010001fc0303") + b"\x00" * 16


def _tls_context(cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # kubesched's own self-signed certificate
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert:
        context.load_cert_chain(*cert)
    return context


def _get(port: int, path: str, *, cert: tuple[str, str] | None = None, token: str = "",
         context: ssl.SSLContext | None = None) -> tuple[int, str]:
    context = context or _tls_context(cert)
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _probe_healthz(port: int, context: ssl.SSLContext) -> bytes:
    """One liveness probe as a kubelet makes it: a new TLS connection, GET /healthz, close."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw) as tls:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(4096):
                answer += chunk
    return answer


def _when_ok(answer: tuple[int, str]) -> tuple[int, str] | None:
    """For wait_for: the answer once it is 200, else None."""
    return answer if answer[0] == 200 else None


def _still_open(sock: socket.socket) -> bool:
    """True while the server has neither closed nor reset the connection."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def test_idle_and_slow_clients_never_stall_healthz(run_kubesched):
    sched = run_kubesched({})
    held: list[socket.socket] = []
    try:
        for _unused in range(IDLE_CONNECTIONS):
            held.append(socket.create_connection(("127.0.0.1", sched.port), timeout=5))
        for _unused in range(SLOW_HANDSHAKES):
            slow = socket.create_connection(("127.0.0.1", sched.port), timeout=5)
            slow.sendall(PARTIAL_CLIENT_HELLO)
            held.append(slow)
        # Let the server take in the burst of 220 connects (a thread each) before timing probes.
        time.sleep(SETTLE_SECONDS)
        latencies = []
        probe_context = _tls_context()  # one context: loading it is the client's cost, not the server's
        for _unused in range(PROBES):
            started = time.perf_counter()
            answer = _probe_healthz(sched.port, probe_context)
            latencies.append(time.perf_counter() - started)
            assert answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n", 1)[0], answer[:200]
        open_count = sum(_still_open(s) for s in held)
    finally:
        for sock in held:
            sock.close()
    latencies.sort()
    print(f"/healthz over {PROBES} probes with {IDLE_CONNECTIONS} idle + {SLOW_HANDSHAKES} slow handshakes held: "
          f"median {latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    # The clients were really held during the probes (not refused or dropped).
    assert open_count == IDLE_CONNECTIONS + SLOW_HANDSHAKES
    slow = [round(s * 1000, 1) for s in latencies if s >= PROBE_LIMIT_SECONDS]
    assert not slow, f"{len(slow)} of {PROBES} /healthz probes took 100 ms or more: {slow} ms"


# ---------------------------------------------------------------------------------------------
# Delegated authentication and authorization against the lab
# ---------------------------------------------------------------------------------------------

def _client_certificate(lab_kubeconfig: str, directory: Path, user: str) -> tuple[str, str]:
    """A client certificate for `user`, signed by the lab's cluster CA (the API server's client CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    lab_dir = Path(lab_kubeconfig).parent
    ca_cert = x509.load_pem_x509_certificate((lab_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((lab_dir / "ca.key").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = directory / f"{user}.crt", directory / f"{user}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def rbac(api_client):
    """grant_metrics(subject) binds a fresh ClusterRole with get on /metrics; removed after the test."""
    from kubernetes import client

    rbac_v1 = client.RbacAuthorizationV1Api(api_client)
    made: list[str] = []

    def grant_metrics(subject: dict) -> None:
        name = f"kubesched-it-metrics-{uuid.uuid4().hex[:6]}"
        rbac_v1.create_cluster_role({"metadata": {"name": name},
                                     "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
        made.append(name)
        rbac_v1.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject],
                                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                         "kind": "ClusterRole", "name": name}})

    yield grant_metrics
    for name in made:
        rbac_v1.delete_cluster_role_binding(name)
        rbac_v1.delete_cluster_role(name)


def test_metrics_need_an_rbac_grant_for_a_client_certificate(run_kubesched, lab_kubeconfig, tmp_path, rbac):
    """No --client-ca-file: kubesched looks the client CA up in the cluster, as kube-scheduler does."""
    user = f"kubesched-it-reader-{uuid.uuid4().hex[:6]}"
    cert = _client_certificate(lab_kubeconfig, tmp_path, user)
    sched = run_kubesched({}, "--authorization-webhook-cache-unauthorized-ttl=1s")

    def answered_with_certificate():
        try:
            return _get(sched.port, "/metrics", cert=cert)
        except (OSError, urllib.error.URLError):  # the looked-up CA is not trusted yet
            return None

    code, text = wait_for(answered_with_certificate, 15, what="the client CA to be looked up")
    assert (code, json.loads(text)["message"]) == (403, f'forbidden: User "{user}" cannot get path "/metrics"')
    assert _get(sched.port, "/healthz", cert=cert) == (200, "ok")
    assert _get(sched.port, "/metrics")[0] == 403  # anonymous
    rbac({"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"})
    code, text = wait_for(lambda: _when_ok(_get(sched.port, "/metrics", cert=cert)),
                          15, what="/metrics to be allowed once the RBAC rule exists")
    assert "scheduler_pending_pods" in text
    # The cluster admin's certificate (group system:masters) is always allowed, as upstream.
    admin = _tls_context()
    load_client_certificate(admin, load_kubeconfig(lab_kubeconfig))
    assert _get(sched.port, "/metrics", context=admin)[0] == 200


def test_a_service_account_token_is_authenticated_by_token_review(run_kubesched, core_v1, namespace, rbac):
    account = "metrics-reader"
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = core_v1.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    sched = run_kubesched({}, "--authorization-webhook-cache-unauthorized-ttl=1s")
    code, text = _get(sched.port, "/metrics", token=token)
    assert (code, json.loads(text)["message"]) == (
        403, f'forbidden: User "system:serviceaccount:{namespace}:{account}" cannot get path "/metrics"')
    rbac({"kind": "ServiceAccount", "name": account, "namespace": namespace})
    code, text = wait_for(lambda: _when_ok(_get(sched.port, "/metrics", token=token)),
                          15, what="/metrics to be allowed to the service account")
    assert "scheduler_pending_pods" in text
    assert _get(sched.port, "/metrics", token="not-a-token")[0] == 401
    assert _get(sched.port, "/healthz", token="not-a-token")[0] == 401  # a wrong credential is refused everywhere


def test_always_allowed_paths_skip_authorization(run_kubesched):
    sched = run_kubesched({}, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metr*")
    assert _get(sched.port, "/metrics")[0] == 200  # anonymous, by the prefix
    assert _get(sched.port, "/configz")[0] == 403  # anonymous, asked of the API server: denied


# ---------------------------------------------------------------------------------------------
# The same answers as the pinned kube-scheduler, with the same flags, against the same lab
# ---------------------------------------------------------------------------------------------

def _start_both(lab_kubeconfig: str, workdir: Path,
                flags: dict[str, tuple[str, ...]] | None = None) -> tuple[dict[str, int], list[subprocess.Popen]]:
    """kubesched and kube-scheduler with identical flags (and each its own flags[kind]); {kind:
    port} once /healthz answers."""
    ports, procs = {}, []
    for kind, binary in (("kubesched", KUBESCHED), ("kube-scheduler", KUBE_SCHEDULER)):
        config = workdir / f"{kind}.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": lab_kubeconfig}, "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": f"secure-agreement-{uuid.uuid4().hex[:6]}"}]}))
        ports[kind] = free_port()
        procs.append(subprocess.Popen(
            [str(binary), "--config", str(config), "--secure-port", str(ports[kind]), "--bind-address", "127.0.0.1",
             f"--authentication-kubeconfig={lab_kubeconfig}", f"--authorization-kubeconfig={lab_kubeconfig}",
             "--authorization-webhook-cache-unauthorized-ttl=1s", "-v=2", *(flags or {}).get(kind, ())],
            stdout=open(workdir / f"{kind}.log", "w"), stderr=subprocess.STDOUT))  # noqa: SIM115

    def serving():
        try:
            return all(_get(port, "/healthz")[0] == 200 for port in ports.values())
        except (OSError, urllib.error.URLError):
            return False

    wait_for(serving, 60, what="kubesched and kube-scheduler to serve /healthz")
    return ports, procs


def test_the_same_answers_as_kube_scheduler(lab_kubeconfig, tmp_path, core_v1, namespace, rbac):
    user = f"kubesched-it-agree-{uuid.uuid4().hex[:6]}"
    cert = _client_certificate(lab_kubeconfig, tmp_path, user)
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": "agree"}})
    token = core_v1.create_namespaced_service_account_token(
        "agree", namespace, {"spec": {"expirationSeconds": 600}}).status.token
    ports, procs = _start_both(lab_kubeconfig, tmp_path)
    try:
        cases = {
            "anonymous /healthz": dict(path="/healthz"),
            "anonymous /readyz": dict(path="/readyz"),
            "anonymous /metrics": dict(path="/metrics"),
            "certificate without a grant /metrics": dict(path="/metrics", cert=cert),
            "certificate /healthz": dict(path="/healthz", cert=cert),
            "service account without a grant /metrics": dict(path="/metrics", token=token),
            "a token the API server rejects /metrics": dict(path="/metrics", token="not-a-token"),
            "a token the API server rejects /healthz": dict(path="/healthz", token="not-a-token"),
        }

        def answers():
            """{case: {kind: (status, body)}}; both Status bodies name the same user, path and reason."""
            return {name: {kind: _get(port, **case) for kind, port in ports.items()} for name, case in cases.items()}

        deadline = time.monotonic() + 15  # the client CA lookup may lag the start by a moment
        while True:
            before = answers()
            differ = {name: kinds for name, kinds in before.items() if len(set(kinds.values())) != 1}
            if not differ or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert not differ, f"kubesched and kube-scheduler answer differently: {differ}"
        assert before["anonymous /metrics"]["kube-scheduler"][0] == 403, before
        rbac({"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"})
        rbac({"kind": "ServiceAccount", "name": "agree", "namespace": namespace})
        granted = {"certificate with a grant /metrics": dict(path="/metrics", cert=cert),
                   "service account with a grant /metrics": dict(path="/metrics", token=token)}

        def all_allowed():
            got = {name: {kind: _get(port, **case)[0] for kind, port in ports.items()} for name, case in granted.items()}
            return got if all(set(kinds.values()) == {200} for kinds in got.values()) else None

        after = wait_for(all_allowed, 20, what="both schedulers to serve /metrics once the RBAC rules exist")
        print({**before, **after})
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def _served(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            _tls_context().wrap_socket(raw) as tls:
        return tls.getpeercert(binary_form=True)


def test_a_serving_certificate_rotated_on_disk_is_served_without_a_restart_as_by_kube_scheduler(
        lab_kubeconfig, tmp_path):
    """The soak's CA rotation broke this in kubesched: the new pair was served only when the client
    CA happened to change too. Both schedulers get --tls-cert-file and --tls-private-key-file; the
    files are replaced (the key first, as a rotation writes them) and each must serve the new
    certificate, without a restart, well within upstream's one-minute refresh."""
    from tests.reliability.security import _load_ca, issue

    lab = SimpleNamespace(ca_cert=str(Path(lab_kubeconfig).parent / "ca.crt"),
                          ca_key=str(Path(lab_kubeconfig).parent / "ca.key"))
    ca = _load_ca(lab)
    pairs = {kind: issue(tmp_path, f"{kind}-serving", "serving", ca=ca, server_ip="127.0.0.1")
             for kind in ("kubesched", "kube-scheduler")}
    flags = {kind: (f"--tls-cert-file={cert}", f"--tls-private-key-file={key}") for kind, (cert, key) in pairs.items()}
    ports, procs = _start_both(lab_kubeconfig, tmp_path, flags)
    try:
        before = {kind: _served(port) for kind, port in ports.items()}
        for kind, (cert, key) in pairs.items():
            new_cert, new_key = issue(tmp_path, f"{kind}-rotated", "serving", ca=ca, server_ip="127.0.0.1")
            Path(new_key).replace(key)
            Path(new_cert).replace(cert)
        expected = {kind: ssl.PEM_cert_to_DER_cert(Path(pairs[kind][0]).read_text()) for kind in ports}
        assert all(expected[kind] != before[kind] for kind in ports)
        wait_for(lambda: all(_served(port) == expected[kind] for kind, port in ports.items()), 20,
                 what="both schedulers to serve their rotated certificate")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
