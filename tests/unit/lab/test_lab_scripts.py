"""The lab's own scripts: bad input fails with an error that says what to do, and lab.sh
wires its four components (etcd, kube-apiserver, kube-controller-manager, kwok) as a real
cluster would.

The wiring tests run lab.sh against stand-in binaries (a cache directory holding a stub for
each command, found through KUBESCHED_CACHE): each stub records its command line and
serves the health endpoint lab.sh polls, or fails as asked. What is under test is lab.sh's
own control flow, in seconds; tests/integration/lab runs the real components.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lab.private_lab import free_ports

ROOT = Path(__file__).resolve().parents[3]

# One stub for every command lab.sh runs. It appends {"name", "argv"} to $STUB_RECORD, then:
# etcd serves HTTP on its client URL's port; kube-apiserver serves HTTPS with the serving
# certificate it is given; kube-controller-manager serves HTTPS "ok" (with the lab's
# serving certificate, found beside --root-ca-file); kwok serves HTTP on --server-address;
# kubectl exits 0. STUB_FAIL=<name> makes that component print an error and exit 1.
STUB = r"""#!PYTHON
import http.server, json, os, ssl, sys
name = os.path.basename(sys.argv[0])
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
with open(os.environ["STUB_RECORD"], "a") as record:
    record.write(json.dumps({"name": name, "argv": sys.argv[1:]}) + "\n")
if name == "kubectl":
    sys.exit(0)
if os.environ.get("STUB_FAIL") == name:
    print(f"E1124 stub {name}: failed to start: something is wrong", file=sys.stderr)
    sys.exit(1)
if name == "etcd":
    urls = sys.argv[sys.argv.index("--listen-client-urls") + 1]
    port, cert = int(urls.rsplit(":", 1)[1]), None
elif name == "kube-apiserver":
    port, cert = int(args["secure-port"]), (args["tls-cert-file"], args["tls-private-key-file"])
elif name == "kube-controller-manager":
    pki = os.path.join(os.path.dirname(args["root-ca-file"]), "pki")
    port, cert = int(args["secure-port"]), (pki + "/apiserver.crt", pki + "/apiserver.key")
else:
    port, cert = int(args["server-address"].rsplit(":", 1)[1]), None

class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass

server = http.server.HTTPServer(("127.0.0.1", port), Ok)
if cert:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kwok"]


def run(script: str, *args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    # The lab variables of the shell running the tests (a private lab's) must not leak in.
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    full_env.update(env or {})
    return subprocess.run(["bash", str(ROOT / "lab" / script), *args], env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_a_taken_port_is_named_with_the_variable_to_change(tmp_path):
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("lab.sh", "up", env={"LAB_DIR": str(tmp_path / "lab"), "LAB_ETCD_PORT": str(port)})
    assert result.returncode != 0
    assert f"port {port} (for etcd) is already taken" in result.stderr
    assert "LAB_ETCD_PORT" in result.stderr
    # Nothing was left running from the temporary lab directory.
    assert not list((tmp_path / "lab").glob("*.pid"))


def test_an_unbuildable_go_module_says_what_to_do(tmp_path):
    result = run("k8s-binaries.sh", env={"K8S_VERSION": "v1.99.0", "KUBESCHED_CACHE": str(tmp_path),
                                         "KUBESCHED_NO_DOWNLOAD": "1"}, timeout=300)
    assert result.returncode != 0
    assert "cannot fetch k8s.io/kubernetes@v1.99.0 through the Go module proxy" in result.stderr
    assert "K8S_VERSION" in result.stderr


def test_a_missing_docker_engine_says_how_to_get_one(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (fake_bin / "docker").chmod(0o755)
    env = {"PATH": f"{fake_bin}:{os.environ['PATH']}"}
    result = run("build-image.sh", env=env)
    assert result.returncode != 0
    assert "no Docker engine answers" in result.stderr


def test_status_when_not_running_says_how_to_start(tmp_path):
    result = run("lab.sh", "status", env={"LAB_DIR": str(tmp_path / "nolab"), "LAB_API_PORT": "1"})
    assert result.returncode == 3
    assert "not running" in result.stdout and "make lab-up" in result.stdout


@pytest.fixture
def stub_lab(tmp_path):
    """Environment for a lab.sh on stub binaries and free ports; `lab.sh down` afterwards."""
    bin_dir = tmp_path / "cache" / "v1.37.1" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ["kube-scheduler", "kubectl", *COMPONENTS]:
        (bin_dir / name).write_text(STUB.replace("#!PYTHON", f"#!{sys.executable}", 1))
        (bin_dir / name).chmod(0o755)
    api, etcd, peer, kcm, kwok = free_ports(5)
    env = {"LAB_DIR": str(tmp_path / "lab"), "LAB_API_PORT": str(api), "LAB_ETCD_PORT": str(etcd),
           "LAB_ETCD_PEER_PORT": str(peer), "LAB_KCM_PORT": str(kcm), "LAB_KWOK_PORT": str(kwok),
           "KUBESCHED_CACHE": str(tmp_path / "cache"), "K8S_VERSION": "v1.37.1",
           "STUB_RECORD": str(tmp_path / "record.jsonl")}
    yield env
    down = run("lab.sh", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert not list((tmp_path / "lab").glob("*.pid")), "lab.sh down left a pid file behind"


def started(env: dict) -> list[dict]:
    path = Path(env["STUB_RECORD"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def argv_of(env: dict, name: str) -> list[str]:
    return next(entry["argv"] for entry in started(env) if entry["name"] == name)


def lab_pids(env: dict) -> dict[str, int]:
    return {path.stem: int(path.read_text()) for path in Path(env["LAB_DIR"]).glob("*.pid")}


def alive(pid: int) -> bool:
    """Running, not merely an exited process its new parent has not reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_up_starts_the_four_components_in_order_each_with_its_identity(stub_lab):
    env = stub_lab
    result = run("lab.sh", "up", env=env)
    assert result.returncode == 0, result.stderr
    order = [entry["name"] for entry in started(env) if entry["name"] != "kubectl"]
    assert order == COMPONENTS
    lab = env["LAB_DIR"]

    apiserver = argv_of(env, "kube-apiserver")
    assert not [a for a in apiserver if a.startswith("--disable-admission-plugins")], \
        "every admission plugin stays at its default (ServiceAccount and TaintNodesByCondition on)"

    kcm = argv_of(env, "kube-controller-manager")
    for flag in (f"--kubeconfig={lab}/kube-controller-manager.kubeconfig", "--use-service-account-credentials=true",
                 f"--service-account-private-key-file={lab}/pki/sa.key", f"--root-ca-file={lab}/ca.crt",
                 f"--cluster-signing-cert-file={lab}/ca.crt", f"--cluster-signing-key-file={lab}/ca.key",
                 f"--secure-port={env['LAB_KCM_PORT']}", "--bind-address=127.0.0.1", "--leader-elect=false",
                 "--controllers=*"):
        assert flag in kcm
    subject = subprocess.run(["openssl", "x509", "-noout", "-subject", "-in", f"{lab}/pki/kube-controller-manager.crt"],
                             capture_output=True, text=True, check=True).stdout
    assert "CN = system:kube-controller-manager" in subject or "CN=system:kube-controller-manager" in subject

    kwok = argv_of(env, "kwok")
    for flag in (f"--kubeconfig={lab}/kwok.kubeconfig", "--manage-all-nodes=false",
                 "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                 f"--server-address=127.0.0.1:{env['LAB_KWOK_PORT']}", f"--config={ROOT}/lab/kwok-stages.yaml"):
        assert flag in kwok
    kubectl = argv_of(env, "kubectl")
    assert kubectl[-2:] == ["-f", f"{ROOT}/lab/kwok-rbac.yaml"], "kwok's RBAC is applied before kwok starts"
    assert "kwok-controller" in Path(f"{lab}/kwok.kubeconfig").read_text()

    status = run("lab.sh", "status", env=env)
    assert status.returncode == 0, status.stdout
    for name in COMPONENTS:
        assert f"  {name}: healthy" in status.stdout

    pids = lab_pids(env)
    assert sorted(pids) == sorted(COMPONENTS)
    assert run("lab.sh", "down", env=env).returncode == 0
    assert [name for name, pid in pids.items() if alive(pid)] == []


def test_kwok_pod_parallelism_is_passed_as_a_second_config_and_a_bad_value_starts_nothing(stub_lab):
    env = {**stub_lab, "LAB_KWOK_POD_PARALLELISM": "many"}
    refused = run("lab.sh", "up", env=env)
    assert refused.returncode != 0 and "LAB_KWOK_POD_PARALLELISM must be a positive whole number" in refused.stderr
    assert started(env) == []
    env["LAB_KWOK_POD_PARALLELISM"] = "16"
    assert run("lab.sh", "up", env=env).returncode == 0
    kwok = argv_of(env, "kwok")
    options = f"{env['LAB_DIR']}/kwok-options.yaml"
    assert kwok.index(f"--config={ROOT}/lab/kwok-stages.yaml") < kwok.index(f"--config={options}")
    assert "kind: KwokConfiguration" in Path(options).read_text() and "podPlayStageParallelism: 16" in Path(options).read_text()
    assert run("lab.sh", "down", env=env).returncode == 0


def test_a_second_up_starts_only_what_died(stub_lab):
    env = stub_lab
    assert run("lab.sh", "up", env=env).returncode == 0
    pids = lab_pids(env)
    os.kill(pids["kwok"], signal.SIGKILL)
    again = run("lab.sh", "up", env=env)
    assert again.returncode == 0, again.stderr
    names = [entry["name"] for entry in started(env) if entry["name"] != "kubectl"]
    assert names == [*COMPONENTS, "kwok"]
    assert {k: v for k, v in lab_pids(env).items() if k != "kwok"} == {k: v for k, v in pids.items() if k != "kwok"}


@pytest.mark.parametrize(("component", "variable"), [("kube-controller-manager", "LAB_KCM_PORT"),
                                                     ("kwok", "LAB_KWOK_PORT")])
def test_a_component_that_fails_to_start_names_its_log_and_the_fix(stub_lab, component, variable):
    env = {**stub_lab, "STUB_FAIL": component}
    result = run("lab.sh", "up", env=env)
    assert result.returncode != 0
    assert f"{component} exited at start-up" in result.stderr
    assert f"{env['LAB_DIR']}/{component}.log" in result.stderr
    assert "failed to start: something is wrong" in result.stderr  # the log's tail is shown
    assert variable in result.stderr
    status = run("lab.sh", "status", env=env)
    assert status.returncode == 1 and "partly running" in status.stdout
    assert f"  {component}: not running" in status.stdout


@pytest.mark.parametrize(("component", "variable"), [("kube-controller-manager", "LAB_KCM_PORT"),
                                                     ("kwok", "LAB_KWOK_PORT")])
def test_a_taken_controller_port_is_named_with_its_variable(stub_lab, component, variable):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("lab.sh", "up", env={**stub_lab, variable: str(port)})
    assert result.returncode != 0
    assert f"port {port} (for {component}) is already taken" in result.stderr
    assert f"{variable}=<port>" in result.stderr
    assert started(stub_lab) == [], "nothing starts when a port is taken"


def test_private_lab_ports_default_to_the_api_port_plus_three_and_four(stub_lab):
    env = {k: v for k, v in stub_lab.items() if k not in ("LAB_KCM_PORT", "LAB_KWOK_PORT")}
    for _unused in range(20):
        api = free_ports(1)[0]
        if api + 4 < 65536 and all(free_port_is(api + offset) for offset in (3, 4)):
            break
    env["LAB_API_PORT"] = str(api)
    result = run("lab.sh", "up", env=env)
    assert result.returncode == 0, result.stderr
    assert f"--secure-port={api + 3}" in argv_of(env, "kube-controller-manager")
    assert f"--server-address=127.0.0.1:{api + 4}" in argv_of(env, "kwok")
    assert run("lab.sh", "down", env=env).returncode == 0


def free_port_is(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("content, expected", [
    ("own", "live"),        # the pid is a running process of the named command
    ("other", "stale"),     # the pid was reused by another command
    ("gone", "stale"),      # nothing runs under the pid
    ("", "stale"),          # an empty pid file
])
def test_setup_finds_stale_docker_pid_files(tmp_path, content, expected):
    """A dockerd killed with its session leaves containerd.pid behind; a new dockerd trusts
    it, waits for a containerd that is some other process and gives up. setup.sh's check
    must tell a live containerd from a stale pid file."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        pid = {"own": sleeper.pid, "other": sleeper.pid, "gone": 2 ** 22 + 1, "": ""}[content]
        pid_file = tmp_path / "containerd.pid"
        pid_file.write_text(str(pid))
        name = "sleep" if content == "own" else "containerd"
        result = subprocess.run(
            ["bash", "-c", f'source "$1"; pid_file_is_stale "$2" {name} && echo stale || echo live',
             "_", str(ROOT / "lab" / "setup.sh"), str(pid_file)],
            capture_output=True, text=True, check=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.stdout.strip() == expected, result.stderr
