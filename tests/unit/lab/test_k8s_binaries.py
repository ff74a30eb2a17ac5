"""lab/k8s-binaries.sh on a cold machine: an empty cache, no download, a Go toolchain.

The real build takes a quarter of an hour, so a stub `go` on PATH stands in for the
toolchain: it answers the calls the script makes and writes an executable for each
`go build -o` and `go install`. What is under test is the script's own control flow on
the path every fresh machine takes (it once aborted there, after a full build, on a trap
left over from an earlier function).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "lab" / "k8s-binaries.sh"
EXPECTED = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok"]
# The Kubernetes commands in one go build (they share most packages), then etcd, then kwok.
BUILDS = 3

# Answers `go env`, `go mod download -json`, `go mod tidy`, `go build -o OUT` and
# `GOBIN=... go install PKG@V` (`go build -o DIR/ PKG...` writes one binary per package);
# every call is appended to $STUB_LOG. STUB_BUILD_SLEEP slows
# each build, STUB_FAIL_BUILD makes a build of that package fail.
STUB_GO = r"""#!/usr/bin/env bash
set -euo pipefail
echo "go $*" >>"$STUB_LOG"
case "$1" in
  env)
    case "$2" in GOARCH) echo amd64 ;; GOPROXY) echo https://proxy.invalid ;; *) echo "" ;; esac ;;
  mod)
    if [ "$2" = download ]; then
      mod="$STUB_DIR/kubernetes.mod"
      {
        printf 'module k8s.io/kubernetes\n\ngo 1.25.0\n\nreplace (\n'
        printf '\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n)\n'
      } >"$mod"
      printf '{\n\t"Path": "k8s.io/kubernetes",\n\t"GoMod": "%s"\n}\n' "$mod"
    fi ;;
  build|install)
    shift
    out="" packages=()
    while [ $# -gt 0 ]; do
      case "$1" in
        -o) out=$2; shift ;;
        -ldflags) shift ;;
        -*) ;;
        *) packages+=("$1") ;;
      esac
      shift
    done
    sleep "${STUB_BUILD_SLEEP:-0}"
    for pkg in "${packages[@]}"; do
      if [ -n "${STUB_FAIL_BUILD:-}" ] && [[ $pkg == *"$STUB_FAIL_BUILD"* ]]; then
        echo "stub: compile error in $pkg" >&2; exit 1
      fi
    done
    for pkg in "${packages[@]}"; do
      name=${pkg%@*}; name=${name##*/}
      # go build -o DIR/ writes each command into DIR; -o FILE names the one binary.
      if [ -z "$out" ]; then target="$GOBIN/$name"
      elif [[ $out == */ ]]; then target="$out$name"
      else target=$out; fi
      printf '#!/bin/sh\necho stub\n' >"$target"; chmod +x "$target"
    done ;;
  *) echo "stub go: unexpected call: $*" >&2; exit 2 ;;
esac
"""

# A download that fails the way an unreachable host fails.
STUB_CURL_UNREACHABLE = """#!/usr/bin/env bash
echo "curl $*" >>"$STUB_LOG"
echo "curl: (6) Could not resolve host" >&2
exit 6
"""


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def cold(tmp_path):
    """An empty cache and a PATH whose `go` is the stub; returns the environment."""
    stub_bin = tmp_path / "stub-bin"
    stub_bin.mkdir()
    executable(stub_bin / "go", STUB_GO)
    env = {
        "PATH": f"{stub_bin}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "KUBESCHED_CACHE": str(tmp_path / "cache"),
        "STUB_DIR": str(stub_bin),
        "STUB_LOG": str(tmp_path / "calls.log"),
        "TMPDIR": str(tmp_path / "tmp"),
        "KUBESCHED_NO_DOWNLOAD": "1",
    }
    (tmp_path / "tmp").mkdir()
    return env


def start(env: dict, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(SCRIPT)], env={**env, **extra}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def bin_dir(env: dict) -> Path:
    return Path(env["KUBESCHED_CACHE"]) / "v1.37.1" / "bin"


def calls(env: dict) -> list[str]:
    return Path(env["STUB_LOG"]).read_text().splitlines()


def test_a_cold_build_succeeds_and_prints_the_bin_directory(cold):
    code, out, err = finish(start(cold))
    assert code == 0, err
    assert out.strip() == str(bin_dir(cold))
    for name in EXPECTED:
        assert os.access(bin_dir(cold) / name, os.X_OK), name
    assert "unbound variable" not in err
    assert "ready in" in err
    # The wrapper module's temporary directories are gone once the script exits.
    assert list(Path(cold["TMPDIR"]).iterdir()) == []


def test_a_warm_cache_builds_nothing(cold):
    assert finish(start(cold))[0] == 0
    Path(cold["STUB_LOG"]).unlink()
    code, out, err = finish(start(cold))
    assert code == 0, err
    assert out.strip() == str(bin_dir(cold))
    assert not Path(cold["STUB_LOG"]).exists()


def test_one_missing_binary_is_built_alone(cold):
    assert finish(start(cold))[0] == 0
    (bin_dir(cold) / "kwok").unlink()
    Path(cold["STUB_LOG"]).unlink()
    code, _out, err = finish(start(cold))
    assert code == 0, err
    builds = [c for c in calls(cold) if c.startswith(("go build", "go install"))]
    assert builds == [c for c in builds if "kwok" in c] and len(builds) == 1


def test_a_failing_download_falls_back_to_the_build(cold, tmp_path):
    executable(Path(cold["STUB_DIR"]) / "curl", STUB_CURL_UNREACHABLE)
    env = dict(cold)
    del env["KUBESCHED_NO_DOWNLOAD"]
    code, out, err = finish(start(env))
    assert code == 0, err
    assert out.strip() == str(bin_dir(cold))
    log = calls(cold)
    assert any(c.startswith("curl") for c in log), "the download was not attempted"
    assert sum(c.startswith(("go build", "go install")) for c in log) == BUILDS


def test_a_failing_build_names_the_binary_and_leaves_no_partial_file(cold):
    code, out, err = finish(start(cold, STUB_FAIL_BUILD="cmd/kube-scheduler"))
    assert code != 0
    assert out == ""
    failure = next(line for line in err.splitlines() if "ERROR" in line)
    assert "kube-scheduler" in failure and "failed" in failure
    # The four Kubernetes commands are one go build: none of them is left half-built.
    assert not any((bin_dir(cold) / name).exists() for name in EXPECTED[:4])
    assert list(Path(cold["TMPDIR"]).iterdir()) == []


def test_a_second_caller_waits_on_the_lock_and_builds_nothing(cold):
    first = start(cold, STUB_BUILD_SLEEP="0.3")
    deadline = time.monotonic() + 30
    while not Path(cold["STUB_LOG"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = start(cold)
    code1, out1, err1 = finish(first)
    code2, out2, err2 = finish(second)
    assert (code1, code2) == (0, 0), err1 + err2
    assert out1.strip() == out2.strip() == str(bin_dir(cold))
    assert "another build is running; waiting for it" in err2
    builds = [c for c in calls(cold) if c.startswith(("go build", "go install"))]
    assert len(builds) == BUILDS, builds
