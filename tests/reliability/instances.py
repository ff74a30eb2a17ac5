"""kubesched instances run as subprocesses, with what the suites read from them.

An instance is started from a KubeSchedulerConfiguration dict, serves on its own
127.0.0.1 port, logs at -v=2 to a file, and is signalled by its own pid only.
"""

from __future__ import annotations

import calendar
import os
import re
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from kubesched.client import load_client_certificate
from lab.private_lab import ROOT, free_ports

KUBESCHED = ROOT / ".venv" / "bin" / "kubesched"
API_VERSION = "kubescheduler.config.k8s.io/v1"

# Lines in kubesched's log that mean a pods/binding call was refused (the pod was bound
# already, deleted, or its UID changed): the API server's answer to a would-be double bind.
BIND_FAILURE = re.compile(r'"Failed to bind pod" pod="([^"]+)"')
# klog's header: severity, MMDD, wall-clock time (UTC); then the message.
KLOG_LINE = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+)\s+\d+ [^\]]+\] (.*)$")


def free_port() -> int:
    return free_ports(1)[0]


def scheduler_config(kubeconfig: str, scheduler_name: str, *, lease_name: str = "",
                     lease_duration: float = 6.0, renew_deadline: float = 4.0, retry_period: float = 1.0,
                     qps: float = 200.0, burst: int = 400, **extra) -> dict:
    """A KubeSchedulerConfiguration for one profile; leader election on when lease_name is set."""
    election: dict = {"leaderElect": False}
    if lease_name:
        election = {"leaderElect": True, "leaseDuration": f"{lease_duration:g}s",
                    "renewDeadline": f"{renew_deadline:g}s", "retryPeriod": f"{retry_period:g}s",
                    "resourceName": lease_name, "resourceNamespace": "kube-system"}
    return {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": burst},
            "leaderElection": election, "profiles": [{"schedulerName": scheduler_name}], **extra}


def _kubeconfig_credentials(args: list[str]):
    """The ClusterCredentials of the kubeconfig named by --kubeconfig or the --config file, if any."""
    from kubesched.client import KubeconfigError, load_kubeconfig

    def flag(name: str) -> str:
        for i, arg in enumerate(args):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return ""

    kubeconfig = flag("--kubeconfig")
    config = flag("--config")
    if config:
        try:
            doc = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
            kubeconfig = ((doc.get("clientConnection") or {}).get("kubeconfig")) or kubeconfig
        except (OSError, yaml.YAMLError, AttributeError):
            pass
    if not kubeconfig:
        return None
    try:
        creds = load_kubeconfig(kubeconfig)
    except KubeconfigError:
        return None
    return creds


class KubeschedNotReady(RuntimeError):
    """kubesched exited, or its /readyz did not answer 200 in time; the message ends with its log."""


class KubeschedInstance:
    """One kubesched process started from a full command line, serving HTTPS on `port`.

    The reliability suites start theirs with start_instance(); the kubesched integration
    tests (tests/integration/kubesched/kubesched_lab.py) build on this class too.
    """

    # Every instance this process started, so the harness can stop them all on the way out.
    started: list["KubeschedInstance"] = []

    def __init__(self, args: list[str], port: int, log_path: str | os.PathLike, *, bind_address: str = "127.0.0.1",
                 name: str = ""):
        self.args = list(args)
        self.port = port
        self.bind_address = bind_address
        self.log_path = Path(log_path)
        self.name = name or self.log_path.stem
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # A session of its own: a signal meant for the harness's process group never reaches
        # it, and the suites signal it by its pid only.
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT,
                                     start_new_session=True)
        KubeschedInstance.started.append(self)
        self._tls = ssl.create_default_context()
        # Its own self-signed serving certificate; the security suite checks TLS separately.
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE
        # /metrics is for identities the API server allows (delegated authorization, as
        # kube-scheduler's): scrape with the client certificate of the kubeconfig it runs with.
        creds = _kubeconfig_credentials(self.args)
        if creds is not None:
            load_client_certificate(self._tls, creds)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        host = self.bind_address if self.bind_address not in ("0.0.0.0", "::") else "127.0.0.1"
        try:
            with urllib.request.urlopen(f"https://{host}:{self.port}{path}", context=self._tls,
                                        timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise KubeschedNotReady(f"kubesched {self.name} exited with {self.proc.returncode} before it was "
                                        f"ready:\n{self.log()[-3000:]}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise KubeschedNotReady(f"kubesched {self.name} not ready after {timeout:.0f}s:\n{self.log()[-3000:]}")

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One series' value from /metrics, or None when absent or the instance is down."""
        try:
            code, text = self.get("/metrics")
        except OSError:
            return None
        if code != 200:
            return None
        return parse_metric(text, name, labels)

    def is_leader(self) -> bool:
        return (self.metric("leader_election_master_status") or 0) == 1

    def bind_failures(self) -> list[str]:
        """Pods whose bind this instance saw refused, from its log."""
        return BIND_FAILURE.findall(self.log())

    def bound_after(self, wall_time: float) -> list[str]:
        """Pods this instance logged as successfully bound after wall_time (time.time())."""
        return [rest for when, rest in klog_lines(self.log())
                if when > wall_time and rest.startswith('"Successfully bound pod to node"')]

    def first_bind(self) -> float | None:
        """Wall time (time.time()) of the first pod this instance logged as bound, if any."""
        return next((when for when, rest in klog_lines(self.log()) if rest.startswith('"Successfully bound pod to node"')), None)

    def send(self, sig: int) -> None:
        if self.alive():
            os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.alive():
            self.send(sig)
            if self.wait_exit(timeout) is None:
                self.send(signal.SIGKILL)
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode


def kubesched_args(config_path: str | os.PathLike, port: int, *flags: str,
                   bind_address: str = "127.0.0.1") -> list[str]:
    """The command line of one kubesched: its config, its secure port and address, klog at -v=2."""
    return [str(KUBESCHED), "--config", str(config_path), "--secure-port", str(port), "--bind-address", bind_address,
            "-v=2", *flags]


def start_instance(config: dict, workdir: str | os.PathLike, name: str, *flags: str, port: int | None = None,
                   bind_address: str = "127.0.0.1") -> KubeschedInstance:
    """Write config to workdir/<name>.yaml and start kubesched on it, logging to workdir/<name>.log."""
    directory = Path(workdir)
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / f"{name}.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = port or free_port()
    return KubeschedInstance(kubesched_args(config_path, port, *flags, bind_address=bind_address), port,
                             directory / f"{name}.log", bind_address=bind_address, name=name)


def stop_all() -> None:
    """Stop every instance still running (the harness's exit path)."""
    for inst in KubeschedInstance.started:
        if inst.alive():
            inst.stop(signal.SIGKILL, timeout=5)


def parse_metric(text: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    want = labels or {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _sep, value = line.rpartition(" ")
        if series.split("{", 1)[0] != name:
            continue
        found = dict(part.split("=", 1) for part in series[len(name):].strip("{}").split(",") if "=" in part)
        if all(found.get(k, "").strip('"') == v for k, v in want.items()):
            return float(value)
    return None


def klog_lines(text: str) -> list[tuple[float, str]]:
    """(wall-clock time, message and fields) of every klog line; the year is this year's."""
    year = time.gmtime().tm_year
    out = []
    for line in text.splitlines():
        match = KLOG_LINE.match(line)
        if match is None:
            continue
        month, day, hour, minute, second, rest = match.groups()
        stamp = calendar.timegm((year, int(month), int(day), int(hour), int(minute), 0, 0, 0, 0)) + float(second)
        out.append((stamp, rest))
    return out


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Poll predicate until truthy; returns its value, or None on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


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
