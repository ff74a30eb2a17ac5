"""Bad input to the lab's own scripts fails with an error that says what to do."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(script: str, *args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
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
