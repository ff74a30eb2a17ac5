"""tests/molecule.sh, stopped part-way as `make test` stops it when a stage before it fails:
the scenarios it interrupted have their containers destroyed, no lane starts another
scenario, and every lane's lab is taken down. The lab scripts and `molecule` are fakes that
record what they are asked to do."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

FAKE_MOLECULE = """#!/usr/bin/env bash
echo "$1 $3 $LAB_DIR" >>"{calls}"
if [ "$1" = test ]; then
  [ "$3" = quick ] && exit 0
  touch "{started}/$3"
  sleep 60
fi
"""
FAKE_LAB = """#!/usr/bin/env bash
echo "lab $1 $LAB_DIR" >>"{calls}"
"""


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    tree, started, calls = tmp_path / "tree", tmp_path / "started", tmp_path / "calls"
    for folder in ("tests", "lab", "extensions/molecule", "bin"):
        (tree / folder).mkdir(parents=True)
    started.mkdir()
    shutil.copy(ROOT / "tests" / "molecule.sh", tree / "tests" / "molecule.sh")
    (tree / "extensions" / "molecule" / "ORDER").write_text("# two lanes\nquick slow-a never-a\nslow-b\n")
    (tree / "lab" / "lab.sh").write_text(FAKE_LAB.format(calls=calls))
    for script in ("build-image.sh", "wheelhouse.sh"):
        (tree / "lab" / script).write_text("#!/usr/bin/env bash\n")
    molecule = tree / "bin" / "molecule"
    molecule.write_text(FAKE_MOLECULE.format(calls=calls, started=started))
    molecule.chmod(0o755)
    return tree, started, calls


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="procps is not installed")
def test_a_stopped_run_destroys_what_it_interrupted_and_takes_every_lab_down(tmp_path):
    tree, started, calls = _tree(tmp_path)
    env = {**os.environ, "PATH": f"{tree / 'bin'}:{os.environ['PATH']}", "MOLECULE_LOG_DIR": str(tmp_path / "logs")}
    # As tests/run-all.sh starts it: a process group of its own, stopped with SIGTERM to the group.
    run = subprocess.Popen(["bash", str(tree / "tests" / "molecule.sh")], env=env, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while {p.name for p in started.iterdir()} != {"slow-a", "slow-b"}:
        assert time.monotonic() < deadline and run.poll() is None, "both lanes should be in a slow scenario"
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGTERM)
    output, _unused = run.communicate(timeout=30)
    assert run.returncode != 0, output
    lines = calls.read_text().splitlines()
    lab = [tree / ".lab-molecule-0", tree / ".lab-molecule-1"]
    assert sorted(line for line in lines if line.startswith("destroy")) == [
        f"destroy slow-a {lab[0]}", f"destroy slow-b {lab[1]}"], "the interrupted scenarios, each on its lane's lab"
    assert not any("never-a" in line for line in lines), "a stopped lane starts no other scenario"
    assert f"lab down {lab[0]}" in lines and f"lab down {lab[1]}" in lines
    assert lines.index(f"lab down {lab[0]}") > max(i for i, line in enumerate(lines) if line.startswith("destroy"))
