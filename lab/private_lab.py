"""A private lab control plane: lab/lab.sh with its own directory and ports.

The benchmark, the reliability suites and their integration tests each start one, so they
may stop, restart or snapshot their kube-apiserver and etcd without touching the shared lab
on :6443 or each other. Only this lab's processes are ever signalled, by the pids in its
own pid files.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB_SH = ROOT / "lab" / "lab.sh"


# Ports to listen on, below the kernel's ephemeral range (net.ipv4.ip_local_port_range,
# 32768-60999 by default). A port the kernel hands out for port 0 comes from that range, and
# once released it can become the local end of any outgoing connection before the lab binds
# it: the soak's lab failed to start three times in a row that way beside 20,000 open sockets.
LISTEN_PORTS = range(20000, 32000)


def free_ports(count: int) -> list[int]:
    """Distinct loopback ports, outside the ephemeral range, that are free now (held open
    together so none repeats)."""
    rng = random.SystemRandom()
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", rng.randrange(LISTEN_PORTS.start, LISTEN_PORTS.stop)))
            except OSError:
                sock.close()  # taken, or the same as one held already: draw again
                continue
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that may never reap it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _reap(pid: int) -> None:
    """Wait for a stopped lab process when it is this process's child: a harness that is a
    child subreaper (tests/bench/load.py) adopts the daemons lab.sh starts, and only their
    parent can make their zombies go."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


@dataclass
class PrivateLab:
    directory: str = "/tmp/rel-lab"
    api_port: int = 16643
    etcd_port: int = 12579
    etcd_peer_port: int = 12580
    # 0: lab.sh's default for a private lab (the API port + 3 and + 4).
    kcm_port: int = 0
    kwok_port: int = 0
    # More lab.sh variables, e.g. a benchmark's static-node lab without kwok
    # (LAB_KWOK=0, LAB_KCM_CONTROLLERS=...).
    extra_env: dict = field(default_factory=dict, repr=False)
    env: dict = field(init=False, repr=False)
    # Where lab.sh writes; snapshot is this helper's own copy of etcd-data.
    kubeconfig: str = field(init=False)
    ca_cert: str = field(init=False)
    ca_key: str = field(init=False)
    etcd_data: str = field(init=False)
    snapshot: str = field(init=False)

    def __post_init__(self) -> None:
        self.env = {**os.environ, "LAB_DIR": self.directory, "LAB_API_PORT": str(self.api_port),
                    "LAB_ETCD_PORT": str(self.etcd_port), "LAB_ETCD_PEER_PORT": str(self.etcd_peer_port),
                    **({"LAB_KCM_PORT": str(self.kcm_port)} if self.kcm_port else {}),
                    **({"LAB_KWOK_PORT": str(self.kwok_port)} if self.kwok_port else {}),
                    **self.extra_env}
        for attr, name in (("kubeconfig", "admin.kubeconfig"), ("ca_cert", "ca.crt"), ("ca_key", "ca.key"),
                           ("etcd_data", "etcd-data"), ("snapshot", "etcd-snapshot")):
            setattr(self, attr, os.path.join(self.directory, name))

    @classmethod
    def on_free_ports(cls, directory: str, **extra_env: str) -> "PrivateLab":
        """Ports free now, kept across restarts: two harnesses may run side by side."""
        api, etcd, peer, kcm, kwok = free_ports(5)
        return cls(directory, api, etcd, peer, kcm_port=kcm, kwok_port=kwok, extra_env=extra_env)

    @classmethod
    def from_env(cls, suffix: str = "") -> "PrivateLab":
        """Defaults, overridable with RELIABILITY_LAB_DIR / _API_PORT / _ETCD_PORT / _ETCD_PEER_PORT."""
        base = cls()
        shift = 100 if suffix else 0
        return cls(os.environ.get("RELIABILITY_LAB_DIR", base.directory + suffix),
                   int(os.environ.get("RELIABILITY_LAB_API_PORT", base.api_port + shift)),
                   int(os.environ.get("RELIABILITY_LAB_ETCD_PORT", base.etcd_port + shift)),
                   int(os.environ.get("RELIABILITY_LAB_ETCD_PEER_PORT", base.etcd_peer_port + shift)))

    def _lab(self, action: str, timeout: float = 180) -> None:
        done = subprocess.run(["bash", str(LAB_SH), action], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"lab.sh {action} (LAB_DIR={self.directory}) failed: "
                               f"{(done.stderr or done.stdout).strip()[-600:]}")

    def up(self) -> None:
        """Start whatever is not running (after stop_apiserver, only the kube-apiserver)."""
        for attempt in range(3):
            try:
                self._lab("up")
                return
            except RuntimeError as err:
                # A port can stay taken for a moment after the process that held it was killed.
                if "already taken" not in str(err) or attempt == 2:
                    raise
                time.sleep(3)

    start_apiserver = up

    def down(self) -> None:
        """Stop every process and wipe etcd's data (a saved snapshot stays)."""
        pids = [pid for name in ("kwok", "kube-controller-manager", "kube-apiserver", "etcd")
                if (pid := self.pid(name)) is not None]
        self._lab("down")
        for pid in pids:
            _reap(pid)

    def pid(self, name: str) -> int | None:
        """The pid of this lab's process name (kube-apiserver, etcd, ...) when it runs."""
        try:
            with open(os.path.join(self.directory, f"{name}.pid"), encoding="utf-8") as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """Signal one process by its pid file, SIGKILL it after timeout, forget its pid file."""
        pid = self.pid(name)
        if pid is not None:
            try:
                os.kill(pid, sig)
                deadline = time.monotonic() + timeout
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap(pid)
        try:
            os.unlink(os.path.join(self.directory, f"{name}.pid"))
        except FileNotFoundError:
            pass

    def stop_apiserver(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        self.stop("kube-apiserver", sig, timeout)

    def _stop_keeping_data(self) -> None:
        # In lab.sh down's order: the API server's clients first, since their open watches hold
        # its shutdown until the 30-s timeout's SIGKILL; etcd last, so it sees no writes while it
        # shuts down cleanly.
        order = {"kwok": 0, "kube-controller-manager": 1, "kube-apiserver": 2, "etcd": 3}
        names = sorted(Path(p).stem for p in glob.glob(os.path.join(self.directory, "*.pid")))
        for name in sorted(names, key=lambda n: order.get(n, 0)):
            self.stop(name)

    def save_snapshot(self) -> None:
        """Stop, and keep a copy of etcd's data to start later runs from."""
        self._stop_keeping_data()
        shutil.rmtree(self.snapshot, ignore_errors=True)
        shutil.copytree(self.etcd_data, self.snapshot)

    def restore_snapshot(self) -> None:
        """etcd back to the saved state, and a new kube-apiserver on it."""
        self._stop_keeping_data()
        shutil.rmtree(self.etcd_data, ignore_errors=True)
        shutil.copytree(self.snapshot, self.etcd_data)
        self.up()

    def restart_empty(self) -> None:
        self.down()
        self.up()

    def remove(self) -> None:
        self.down()
        shutil.rmtree(self.directory, ignore_errors=True)

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision, so every older resourceVersion is gone and a
        watch resumed from one is answered 410 Gone. Call it while the API server is down."""

        def post(path: str, body: dict) -> dict:
            req = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())

        # A few writes outside the API server first: a watch resumes from the revision after the
        # last one it saw, which the compaction must have removed too.
        bump = base64.b64encode(b"/private-lab/compaction-bump").decode()
        for i in range(3):
            post("/v3/kv/put", {"key": bump, "value": base64.b64encode(str(i).encode()).decode()})
        revision = int(post("/v3/kv/range", {"key": bump})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision
