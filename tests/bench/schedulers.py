"""The three schedulers under test, started the same way against the same API server:
kubesched, the pinned upstream kube-scheduler with an equivalent configuration, and the raw
binder that measures the API server's own ceiling."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

import yaml

from lab.binaries import CACHE_DIR, K8S_VERSION, binary
from lab.cluster import Cluster
from lab.private_lab import ROOT, free_ports
from tests.bench.objects import BENCH_LABEL

KUBE_SCHEDULER = binary("kube-scheduler")
RAW_BINDER_SOURCE = os.path.join(ROOT, "tests", "bench", "rawbinder")
RAW_BINDER = os.path.join(CACHE_DIR, "bench", "rawbinder")
KUBESCHED = os.path.join(ROOT, ".venv", "bin", "kubesched")
VENV_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")

# clientConnection settings: kube-scheduler's defaults, and high enough to never throttle.
QPS_PROFILES = {"default": (50, 100), "unthrottled": (5000, 5000)}


@dataclass(frozen=True)
class SchedulerSpec:
    name: str
    description: str


SCHEDULERS = (
    SchedulerSpec("kubesched", "this project's Python scheduler"),
    SchedulerSpec("kube-scheduler", f"upstream kube-scheduler {K8S_VERSION}, the pinned build"),
    SchedulerSpec("raw-binder", "round-robin binds at full concurrency, no scheduling logic: the API server's ceiling"),
)
SCHEDULER_NAMES = tuple(spec.name for spec in SCHEDULERS)


def scheduler_config(kubeconfig: str, scheduler_name: str, qps: int, burst: int) -> dict:
    """One KubeSchedulerConfiguration for both real schedulers: default plugins, one profile."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name}],
    }


def build_raw_binder() -> str:
    """Build the raw binder into the cache when its source is newer than the binary."""
    sources = [os.path.join(RAW_BINDER_SOURCE, name) for name in ("main.go", "go.mod")]
    newest = max(os.path.getmtime(path) for path in sources)
    if os.path.exists(RAW_BINDER) and os.path.getmtime(RAW_BINDER) >= newest:
        return RAW_BINDER
    if shutil.which("go") is None:
        raise RuntimeError("the raw binder needs Go to build (tests/bench/rawbinder); install Go 1.22 or newer")
    os.makedirs(os.path.dirname(RAW_BINDER), exist_ok=True)
    result = subprocess.run(["go", "build", "-o", RAW_BINDER, "."], cwd=RAW_BINDER_SOURCE,
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"building the raw binder failed:\n{result.stderr.strip()}")
    return RAW_BINDER


def pin_kubesched(workdir: str) -> str:
    """A copy of kubesched as committed at HEAD, so a long benchmark measures one version
    even while the working tree changes; returns the directory to import it from."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    source = os.path.join(workdir, f"kubesched-{commit}")
    if not os.path.isdir(os.path.join(source, "kubesched")):
        os.makedirs(source, exist_ok=True)
        archive = subprocess.run(["git", "-C", ROOT, "archive", "HEAD", "kubesched"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", source], input=archive.stdout, check=True)
    return source


# Bindings in flight for the raw binder. On 2 cores a sweep of SchedulingBasic/500Nodes gave
# 227, 211, 201, 200, 167, 116 and 128 pods/s at 4, 8, 16, 32, 64, 128 and 512: past a few
# dozen, concurrent updates only contend inside the API server.
BINDER_CONCURRENCY = 16


def command_line(scheduler: str, cluster: Cluster, workdir: str, scheduler_name: str,
                 qps: int, burst: int, kubesched_source: str | None = None,
                 binder_concurrency: int = BINDER_CONCURRENCY,
                 kubesched_feature_gates: dict[str, bool] | None = None,
                 workload_gates: dict[str, bool] | None = None) -> list[str]:
    """The command that starts one scheduler for one run; config files go to workdir.
    kubesched_source: a directory to import kubesched from instead of the working tree.
    workload_gates: the gates the workload needs, for either scheduler (kubesched's own
    kubesched_feature_gates are set after them)."""
    if scheduler == "raw-binder":
        command = [build_raw_binder(), "-server", cluster.server, "-scheduler-name", scheduler_name,
                   "-node-selector", f"{BENCH_LABEL}=true", "-qps", str(qps), "-burst", str(burst),
                   "-concurrency", str(binder_concurrency)]
        if cluster.ca_file:
            command += ["-ca", cluster.ca_file]
        if cluster.cert_file:
            command += ["-cert", cluster.cert_file, "-key", cluster.key_file]
        if cluster.token:
            command += ["-token", cluster.token]
        return command
    config_path = os.path.join(workdir, f"{scheduler}-config.yaml")
    with open(config_path, "w") as handle:
        yaml.safe_dump(scheduler_config(os.path.abspath(cluster.kubeconfig), scheduler_name, qps, burst), handle)
    port = str(free_ports(1)[0])
    if scheduler == "kube-scheduler":
        if not os.path.exists(KUBE_SCHEDULER):
            raise RuntimeError(f"{KUBE_SCHEDULER} is missing; run 'make setup' to build the pinned binaries")
        # Delegated authentication and authorization need the same kubeconfig, or
        # kube-scheduler looks for an in-cluster config that does not exist here.
        kubeconfig = os.path.abspath(cluster.kubeconfig)
        return [KUBE_SCHEDULER, "--config", config_path, "--leader-elect=false", "--secure-port", port,
                "--bind-address", "127.0.0.1", "--authentication-kubeconfig", kubeconfig,
                "--authorization-kubeconfig", kubeconfig, "--authentication-skip-lookup", "-v", "1",
                *(["--feature-gates=" + feature_gates_text(workload_gates)] if workload_gates else [])]
    if scheduler == "kubesched":
        if not os.path.exists(KUBESCHED):
            raise RuntimeError(f"{KUBESCHED} is missing; run 'make setup' to install kubesched into .venv")
        arguments = ["--config", config_path, "--secure-port", port, "--bind-address", "127.0.0.1"]
        gates = {**(workload_gates or {}), **(kubesched_feature_gates or {})}
        if gates:
            arguments.append("--feature-gates=" + feature_gates_text(gates))
        if kubesched_source:
            launcher = (f"import sys; sys.path.insert(0, {kubesched_source!r}); "
                        "from kubesched.cli import main; sys.exit(main(sys.argv[1:]))")
            return [VENV_PYTHON, "-c", launcher, *arguments]
        return [KUBESCHED, *arguments]
    raise ValueError(f"unknown scheduler {scheduler!r}; choose from {', '.join(SCHEDULER_NAMES)}")


def feature_gates_text(gates: dict[str, bool]) -> str:
    return ",".join(f"{name}={str(value).lower()}" for name, value in sorted(gates.items()))


def scheduler_label(scheduler: str, kubesched_feature_gates: dict[str, bool] | None) -> str:
    """What a record names: kubesched run with gates away from their defaults says which."""
    if scheduler == "kubesched" and kubesched_feature_gates:
        return f"kubesched {feature_gates_text(kubesched_feature_gates)}"
    return scheduler


def available(scheduler: str) -> str | None:
    """None when the scheduler can run here, else the reason it cannot."""
    if scheduler == "kube-scheduler" and not os.path.exists(KUBE_SCHEDULER):
        return f"{KUBE_SCHEDULER} is missing (make setup builds it)"
    if scheduler == "kubesched":
        if not os.path.exists(KUBESCHED):
            return f"{KUBESCHED} is missing (make setup installs it)"
        probe = subprocess.run([KUBESCHED, "--help"], capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            return f"'kubesched --help' fails: {(probe.stderr or probe.stdout).strip().splitlines()[-1:]}"
    if scheduler == "raw-binder" and shutil.which("go") is None and not os.path.exists(RAW_BINDER):
        return "Go is not installed, so the raw binder cannot be built"
    return None


class ProcessStats:
    """CPU seconds and peak RSS of a process and its descendants, read from /proc."""

    def __init__(self, pid: int):
        self.pid = pid
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.cpu_s = 0.0
        # The scheduler's own process, without the API children kubesched starts (kubesched/apiproc.py).
        self.main_cpu_s = 0.0
        self.peak_rss_mb = 0.0
        self._cpu_by_pid: dict[int, float] = {}

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
        tree, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        return tree

    def sample(self) -> None:
        rss_kb = 0
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/status") as handle:
                    status = handle.read()
            except OSError:
                continue
            # Fields after the command name: utime and stime are the 12th and 13th.
            self._cpu_by_pid[pid] = (int(fields[11]) + int(fields[12])) / self.ticks
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    rss_kb += int(line.split()[1])
        self.cpu_s = sum(self._cpu_by_pid.values())
        self.main_cpu_s = self._cpu_by_pid.get(self.pid, self.main_cpu_s)
        self.peak_rss_mb = max(self.peak_rss_mb, rss_kb / 1024)


class RunningScheduler:
    """A scheduler process for one run; its output goes to a log file in the workdir."""

    def __init__(self, scheduler: str, command: list[str], log_path: str):
        self.scheduler = scheduler
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        self.stats = ProcessStats(self.process.pid)

    def exited(self) -> int | None:
        return self.process.poll()

    def log_tail(self, lines: int = 15) -> str:
        self._log.flush()
        with open(self.log_path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
