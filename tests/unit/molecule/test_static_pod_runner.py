"""The kubeadm scenario's stand-in for the kubelet: extensions/molecule/kubeadm/static_pod_runner.py.

The scenario's claims about kubeadm's static pod (it stops when its manifest leaves the
manifests directory and comes back when the manifest does) rest on this runner, so it runs
here on a real manifest directory with a real process: a `sleep` in place of kube-scheduler.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "extensions" / "molecule" / "kubeadm" / "static_pod_runner.py"

# The shape kubeadm v1.37 writes (a list item holding `command:`, its items at the same indent).
MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - command:
    - sleep
    - "{seconds}"
    image: registry.k8s.io/kube-scheduler:v1.37.1
    name: kube-scheduler
  hostNetwork: true
"""


def sleeps(seconds: str) -> list[int]:
    """Pids of `sleep <seconds>` processes."""
    found = subprocess.run(["pgrep", "-f", f"^sleep {seconds}$"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def wait_until(condition, timeout: float = 10.0) -> bool:
    """Whether condition() became true within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_manifest_command_reads_kubeadm_layout():
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import static_pod_runner  # pylint: disable=import-outside-toplevel,import-error
    finally:
        sys.path.remove(str(RUNNER.parent))
    assert static_pod_runner.manifest_command(MANIFEST.format(seconds="7")) == ["sleep", "7"]
    assert static_pod_runner.manifest_command("kind: Pod\n") == []


def test_runs_while_the_manifest_is_there_and_stops_when_it_leaves(tmp_path):
    seconds = "313.5"  # a duration no other process on the machine sleeps
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    manifest = manifests / "kube-scheduler.yaml"
    kept = tmp_path / "kube-scheduler.yaml.kubesched-takeover"
    manifest.write_text(MANIFEST.format(seconds=seconds))
    runner = subprocess.Popen([sys.executable, str(RUNNER), str(manifests)], stdout=subprocess.DEVNULL)  # pylint: disable=consider-using-with
    try:
        assert wait_until(lambda: len(sleeps(seconds)) == 1), "the static pod did not start"
        first = sleeps(seconds)

        manifest.rename(kept)
        assert wait_until(lambda: not sleeps(seconds)), "the static pod still runs without its manifest"

        kept.rename(manifest)
        assert wait_until(lambda: len(sleeps(seconds)) == 1), "the static pod did not come back with its manifest"
        assert sleeps(seconds) != first

        # A process that dies is started again, as with restartPolicy Always.
        subprocess.run(["kill", str(sleeps(seconds)[0])], check=True)
        assert wait_until(lambda: len(sleeps(seconds)) == 1), "the static pod was not restarted"
    finally:
        runner.terminate()
        runner.wait(15)
    assert not sleeps(seconds), "stopping the runner left the static pod running"
