"""Fixtures for running kubesched as a subprocess against the lab.

``run_kubesched(config, *flags)`` starts ``.venv/bin/kubesched --config FILE`` and returns
once its /readyz answers 200; every instance is stopped after the test. ``config`` is a
dict (written to a temp file; clientConnection.kubeconfig defaults to the lab's and, unless
the dict says otherwise, leader election is off) or the path of a file used as is.
Helpers (pod_manifest, events_for, wait_for, ...) live in kubesched_lab.py.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubesched_lab import KUBESCHED, ROOT, KubeschedProcess, free_port, write_config

from lab.binaries import binary


@pytest.fixture
def run_kubesched(lab_kubeconfig, tmp_path):
    """Factory: run_kubesched(config_dict_or_path, *flags, wait_ready=True) -> KubeschedProcess."""
    started: list[KubeschedProcess] = []

    def start(config: dict | str | os.PathLike, *flags: str, wait_ready: bool = True) -> KubeschedProcess:
        path = write_config(config, tmp_path, lab_kubeconfig) if isinstance(config, dict) else Path(config)
        port = free_port()
        args = [str(KUBESCHED), "--config", str(path), "--secure-port", str(port), "--bind-address", "127.0.0.1",
                "-v=2", *flags]
        proc = KubeschedProcess(args, port, tmp_path / f"kubesched-{len(started)}.log")
        started.append(proc)
        if wait_ready:
            proc.wait_ready()
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def kubesched_cli():
    """Run the kubesched command once: (returncode, stdout, stderr)."""

    def run(*args: str, timeout: float = 30.0) -> tuple[int, str, str]:
        done = subprocess.run([str(KUBESCHED), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def api_proxy(lab_kubeconfig, tmp_path):
    """An ApiProxy to the lab that tests can break (see kubesched_lab.ApiProxy)."""
    from kubesched_lab import ApiProxy

    proxy = ApiProxy(lab_kubeconfig, tmp_path)
    yield proxy
    proxy.close()


# The pinned upstream scheduler the agreement tests run beside kubesched (lab/k8s-binaries.sh).
KUBE_SCHEDULER = Path(binary("kube-scheduler"))


@dataclass
class RunningScheduler:
    kind: str  # "kubesched" or "kube-scheduler"
    name: str  # the schedulerName its one profile serves
    process: KubeschedProcess


@pytest.fixture(params=["kubesched", "kube-scheduler"])
def either_scheduler(request, run_kubesched, lab_kubeconfig, tmp_path):
    """One profile served by kubesched, then (second parametrization) by the pinned
    kube-scheduler: a test using this fixture asserts the same outcome of both."""
    kind = request.param
    name = f"{kind}-it-{uuid.uuid4().hex[:6]}"
    if kind == "kubesched":
        yield RunningScheduler(kind, name, run_kubesched({"profiles": [{"schedulerName": name}]}))
        return
    if not KUBE_SCHEDULER.exists():
        pytest.fail(f"{KUBE_SCHEDULER} is missing: run 'make setup' (lab/k8s-binaries.sh builds it).", pytrace=False)
    config = write_config({"profiles": [{"schedulerName": name}]}, tmp_path, lab_kubeconfig)
    port = free_port()
    # Delegated authentication and authorization need the lab's kubeconfig, or kube-scheduler
    # looks for an in-cluster configuration.
    args = [str(KUBE_SCHEDULER), "--config", str(config), "--secure-port", str(port), "--bind-address", "127.0.0.1",
            "--authentication-kubeconfig", lab_kubeconfig, "--authorization-kubeconfig", lab_kubeconfig,
            "--authentication-skip-lookup", "-v=2"]
    process = KubeschedProcess(args, port, tmp_path / "kube-scheduler.log", name="kube-scheduler")
    try:
        process.wait_ready()
        yield RunningScheduler(kind, name, process)
    finally:
        process.stop()


@pytest.fixture
def run_scheduler(run_kubesched, lab_kubeconfig, tmp_path):
    """Factory: run_scheduler(kind, name=None, *, flags=(), more_profiles=(), **profile) -> the
    schedulerName served by kubesched or the pinned kube-scheduler, with the profile
    {"schedulerName": name, **profile} (a fresh name by default) and more_profiles after it, run
    with the extra command-line flags. kube-scheduler is not waited for: a test waits for what it
    places."""
    upstream: list[subprocess.Popen] = []

    def start(kind: str, name: str | None = None, *, flags: Sequence[str] = (), more_profiles: Sequence[dict] = (),
              **profile) -> str:
        name = name or f"agree-{uuid.uuid4().hex[:6]}"
        config = {"profiles": [{"schedulerName": name, **profile}, *more_profiles]}
        if kind == "kubesched":
            run_kubesched(config, *flags)
            return name
        if not KUBE_SCHEDULER.exists():
            pytest.fail(f"{KUBE_SCHEDULER} is missing: run 'make setup' (lab/k8s-binaries.sh builds it).", pytrace=False)
        path = write_config(config, tmp_path, lab_kubeconfig)
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        upstream.append(subprocess.Popen([str(KUBE_SCHEDULER), "--config", str(path), "--secure-port", "0", "-v=2",
                                          *flags], stdout=log, stderr=subprocess.STDOUT))
        return name

    yield start
    for proc in upstream:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
