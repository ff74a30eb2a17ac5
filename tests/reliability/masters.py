"""Container masters for the role suites: systemd containers on the host network, each
binding its own 127.0.3.x, driven by playbooks/site.yml against the private lab.

The containers are this harness's own (rel-master1, rel-master2): Molecule's master1..3
are never touched. They are removed by name when the suite ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab.private_lab import ROOT, PrivateLab

IMAGE = "localhost/kubesched-master:bookworm"
CONFIG_DIR = "/etc/kubesched/kube-scheduler"
# Every file the installed service reads when it starts (the role's scheduler_service_inputs).
SERVICE_INPUTS = ("/etc/systemd/system/kube-scheduler.service", f"{CONFIG_DIR}/config.yaml", f"{CONFIG_DIR}/kubeconfig",
                  *(f"{CONFIG_DIR}/pki/{name}" for name in ("ca.crt", "client.crt", "client.key", "serving.crt",
                                                            "serving.key")))
VENV_BIN = ROOT / ".venv" / "bin"


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])}: {(done.stderr or done.stdout).strip()[-500:]}")
    return done


def image_available() -> bool:
    try:
        return docker("image", "inspect", IMAGE, check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@dataclass
class Masters:
    lab: PrivateLab
    workdir: Path
    names: tuple[str, ...] = ("rel-master1", "rel-master2")
    lease_name: str = "rel-kube-scheduler"
    secure_port: int = 10259
    addresses: dict[str, str] = field(init=False)
    release_frozen: bool = False  # set once the baseline run built the wheel
    converged: bool = False  # the last site.yml run on them was a clean converge

    @property
    def wheelhouse(self) -> Path:
        return self.workdir / "wheelhouse"

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.addresses = {name: f"127.0.3.{i + 1}" for i, name in enumerate(self.names)}

    # -- containers -------------------------------------------------------------------

    def running(self) -> bool:
        """Whether every master container of this harness is up (a --keep-masters run left them)."""
        for name in self.names:
            state = docker("inspect", "-f", "{{.State.Running}}", name, check=False, timeout=30).stdout.strip()
            if state != "true":
                return False
        return True

    def start(self, reuse: bool = False) -> None:
        """Fresh containers; with reuse, the ones already running are kept as they are."""
        if reuse and self.running():
            return
        self.remove()
        for name in self.names:
            docker("run", "-d", "--name", name, "--hostname", name, "--network", "host",
                   "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined",
                   "--security-opt", "apparmor=unconfined", "--cgroupns", "host",
                   "-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                   "--tmpfs", "/tmp", "--stop-signal", "RTMIN+3", IMAGE, "/sbin/init")
        for name in self.names:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                state = self.exec(name, "systemctl", "is-system-running", check=False).stdout.strip()
                if state in ("running", "degraded"):
                    break
                time.sleep(0.5)

    def remove(self) -> None:
        for name in self.names:
            docker("rm", "-f", name, check=False, timeout=60)

    def exec(self, name: str, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return docker("exec", name, *cmd, check=check, timeout=timeout)

    # -- what a master runs -----------------------------------------------------------

    def service(self, name: str, unit: str = "kube-scheduler.service") -> dict:
        """The unit's state, its main process, the installed configuration's digest and one
        digest over every file the service reads when it starts (unit, config, kubeconfig, PKI),
        their owners and modes included."""
        show = self.exec(name, "systemctl", "show", unit, "-p", "ActiveState", "-p", "MainPID",
                         "-p", "NRestarts", "-p", "InvocationID", check=False).stdout
        props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
        config = self.exec(name, "cat", f"{CONFIG_DIR}/config.yaml", check=False).stdout
        # Digests, owners and modes only: the keys never leave the container. A file restored with
        # the right content but the wrong owner is not the same input to the service.
        files = " ".join(SERVICE_INPUTS)
        listing = self.exec(name, "sh", "-c", f"sha256sum {files} 2>&1; stat -c '%n %U %G %a' {files} 2>&1",
                            check=False).stdout
        inputs = {path: [] for path in SERVICE_INPUTS}
        for line in listing.splitlines():
            digest, _sep, path = line.partition("  ")
            if path in inputs:
                inputs[path].append(digest[:12])
                continue
            path, _sep, owner_mode = line.partition(" ")
            if path in inputs:
                inputs[path].append(owner_mode)
        inputs = {path: " ".join(facts) or "missing" for path, facts in inputs.items()}
        return {"active": props.get("ActiveState", ""), "main_pid": props.get("MainPID", ""),
                "restarts": props.get("NRestarts", ""), "invocation": props.get("InvocationID", ""),
                "config_sha256": hashlib.sha256(config.encode()).hexdigest()[:16],
                "inputs_sha256": hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16],
                "inputs": inputs}

    # -- Ansible ----------------------------------------------------------------------

    def inventory(self, **overrides) -> Path:
        kubeconfig = self.lab.kubeconfig
        group_vars = {
            "ansible_connection": "community.docker.docker",
            "ansible_python_interpreter": "/usr/bin/python3",
            "scheduler_implementation": "kubesched",
            "scheduler_api_server": f"https://127.0.0.1:{self.lab.api_port}",
            "scheduler_ca_cert_path": self.lab.ca_cert,
            "scheduler_ca_key_path": self.lab.ca_key,
            "scheduler_api_kubeconfig": kubeconfig,
            "cluster_policy_kubeconfig": kubeconfig,
            "scheduler_lease_name": self.lease_name,
            "scheduler_secure_port": self.secure_port,
            "scheduler_lease_duration": "6s", "scheduler_renew_deadline": "4s", "scheduler_retry_period": "1s",
            # A wheelhouse of our own, built once: the shared one follows the tree (and other
            # engineers' runs), which would make every run here install a new release.
            "scheduler_kubesched_wheelhouse": str(self.wheelhouse),
            "scheduler_kubesched_build_wheel": not self.release_frozen,
            **overrides,
        }
        hosts = {name: {"scheduler_bind_address": addr} for name, addr in self.addresses.items()}
        doc = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                               "ansible_python_interpreter": str(VENV_BIN / "python")}},
                       "children": {"kube_control_plane": {"hosts": hosts, "vars": group_vars}}}}
        path = self.workdir / f"inventory-{len(list(self.workdir.glob('inventory-*.yml')))}.yml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return path

    def ansible_env(self) -> dict:
        # As the Makefile sets it: this checkout as the collection; the venv's ansible finds the
        # collections of the `ansible` package on its own sys.path.
        env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_PIPELINING": "true",
               "ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_NOCOLOR": "true", "PYTHONPATH": str(ROOT),
               # Each task's time in the saved output: where a slow converge spends it.
               "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
               "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
        env.pop("K8S_AUTH_KUBECONFIG", None)
        return env

    def playbook(self, playbook: str, inventory: Path, *extra: str, timeout: float = 1200) -> tuple[int, str, float]:
        started = time.monotonic()
        done = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), playbook, *extra],
                              capture_output=True, text=True, env=self.ansible_env(), cwd=ROOT, timeout=timeout,
                              check=False)
        output = done.stdout + done.stderr
        log = self.workdir / f"{Path(inventory).stem}-{Path(playbook).stem}.log"
        log.write_text(output, encoding="utf-8")
        return done.returncode, output, time.monotonic() - started

    def prepare(self) -> tuple[int, str]:
        """What Molecule's prepare does: the offline bundle, and python3-cryptography from files."""
        done = subprocess.run(["bash", str(ROOT / "lab" / "wheelhouse.sh")], capture_output=True, text=True,
                              cwd=ROOT, timeout=900, check=False)
        if done.returncode != 0:
            return done.returncode, done.stdout + done.stderr
        shared = Path.home() / ".cache" / "kubesched" / "wheelhouse"
        shutil.rmtree(self.wheelhouse, ignore_errors=True)
        shutil.copytree(shared, self.wheelhouse, ignore=shutil.ignore_patterns("kubesched-*.whl", ".kubesched-source"))
        debs = Path.home() / ".cache" / "kubesched" / "debs"
        for name in self.names:
            docker("cp", f"{debs}/.", f"{name}:/var/cache/kubesched-debs/")
            rc = self.exec(name, "sh", "-c", "dpkg -i /var/cache/kubesched-debs/*.deb", check=False, timeout=300)
            if rc.returncode != 0:
                return rc.returncode, rc.stdout + rc.stderr
        return 0, ""
