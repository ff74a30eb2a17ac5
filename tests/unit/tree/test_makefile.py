"""The README's two commands work from a clone that has nothing yet.

make expands the Makefile's variables when it starts, before `make setup` (a prerequisite of
`demo` and `test`) has made the venv. A variable computed from what setup makes is then empty
in the first run and right in the second: `make demo` failed on every fresh clone that way
while CI, which ran setup as a separate make process, stayed green.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEEN = ("PATH", "PYTHONPATH", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH")

FAKE_SETUP = """#!/usr/bin/env bash
# What setup makes that the Makefile could be tempted to read: the venv and its site-packages.
mkdir -p .venv/bin .venv/lib/python3.11/site-packages/ansible_collections/community
"""
FAKE_LAB = "#!/usr/bin/env bash\nexit 0\n"
RECORD_ENV = """#!/usr/bin/env bash
for var in {names}; do printf '%s=%s\\n' "$var" "${{!var-<unset>}}"; done >"{out}"
"""


def _clone(tmp_path: Path) -> Path:
    """The Makefile in a directory without a venv; setup, the lab, the demo and the test
    runner replaced by scripts that make the venv or record the environment they are given."""
    clone = tmp_path / "clone"
    (clone / "lab").mkdir(parents=True)
    (clone / "tests").mkdir()
    shutil.copy(ROOT / "Makefile", clone / "Makefile")
    (clone / "lab" / "setup.sh").write_text(FAKE_SETUP)
    (clone / "lab" / "lab.sh").write_text(FAKE_LAB)
    names = " ".join(SEEN)
    (clone / "lab" / "demo.sh").write_text(RECORD_ENV.format(names=names, out=tmp_path / "demo.env"))
    (clone / "tests" / "run-all.sh").write_text(RECORD_ENV.format(names=names, out=tmp_path / "test.env"))
    return clone


def _run(clone: Path, target: str, record: Path) -> dict[str, str]:
    done = subprocess.run(["make", "--no-print-directory", "-C", str(clone), target], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(clone)})
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("=", 1) for line in record.read_text().splitlines())


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
@pytest.mark.parametrize("target", ["demo", "test"])
def test_first_run_on_a_fresh_clone_sees_what_every_later_run_sees(tmp_path, target):
    clone = _clone(tmp_path)
    record = tmp_path / f"{target}.env"
    first = _run(clone, target, record)
    assert (clone / ".venv").is_dir(), "the fake setup did not run as a prerequisite"
    second = _run(clone, target, record)
    assert first == second
    # The venv's own ansible must see the collections the `ansible` package installed there.
    assert first["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] != "false" or "site-packages" in first["ANSIBLE_COLLECTIONS_PATH"]
    assert first["PATH"].startswith(f"{clone}/.venv/bin:")


def test_ci_runs_the_readme_commands_as_separate_make_processes():
    readme = (ROOT / "README.md").read_text()
    first_screen = readme.split("\n## ", 1)[0]
    commands = re.findall(r"^(make [a-z-]+)\s", first_screen, flags=re.M)
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    invoked = re.findall(r'^stage "[^"]+" (make [a-z-]+)$', ci, flags=re.M)
    assert invoked == ["make demo", "make demo-down", "make test"]
    assert not re.search(r"^\s*make setup\b", ci, flags=re.M), "CI must not set up for the README's commands"
