"""kubesched's dependencies are pinned for every master Python it claims (requires-python) on both
architectures: roles/scheduler/files/constraints.txt, read per target by target_constraints.py,
which wheelhouse.sh downloads and the role's pip install obeys. Offline: the pins are checked
against pyproject.toml's own requirements, markers evaluated for each target."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

try:
    import tomllib
except ImportError:  # pragma: no cover - the development venv is 3.11+
    tomllib = None

ROOT = Path(__file__).resolve().parents[3]
FILES = ROOT / "roles" / "scheduler" / "files"
CONSTRAINTS = FILES / "constraints.txt"
_spec = importlib.util.spec_from_file_location("target_constraints", FILES / "target_constraints.py")
target_constraints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(target_constraints)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MINORS = (9, 10, 11, 12, 13)
TARGETS = [f"python3.{minor}-{arch}" for minor in MINORS for arch in ("x86_64", "aarch64")]
# The masters the platform scenario runs: Debian release -> its Python.
TESTED_MASTERS = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}


def pinned(target: str) -> dict:
    lines = target_constraints.pins(CONSTRAINTS.read_text().splitlines(), target)
    return {line.split("==")[0]: Version(line.split("==")[1]) for line in lines}


def test_requires_python_is_exactly_the_pinned_pythons():
    allowed = SpecifierSet(PYPROJECT["requires-python"])
    assert [minor for minor in range(6, 16) if f"3.{minor}.2" in allowed] == list(MINORS)


@pytest.mark.parametrize("target", TARGETS)
def test_every_dependency_of_kubesched_is_pinned_for_the_target(target):
    env = target_constraints.environment(target)
    pins = pinned(target)
    wanted = [Requirement(r) for r in PYPROJECT["dependencies"]]
    for requirement in wanted:
        name = requirement.name.lower()
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        assert name in pins, f"{name} is not pinned for {target}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert "pip" in pins  # the bundle's own installer


@pytest.mark.parametrize("target", TARGETS)
def test_a_target_gets_exactly_one_cel_backend(target):
    pins = pinned(target)
    backends = {"cel-expr-python", "cel-python"} & set(pins)
    minor = int(target.split("-")[0].split(".")[1])
    assert backends == ({"cel-python"} if minor < 11 else {"cel-expr-python"})


def test_the_development_venv_tests_the_cel_python_the_masters_get():
    dev = [Requirement(line.split("#")[0]) for line in (ROOT / "requirements.txt").read_text().splitlines()
           if line.startswith("cel-python")]
    assert [str(r.specifier) for r in dev] == [f"=={pinned('python3.9-x86_64')['cel-python']}"]
    assert pinned("python3.9-x86_64")["cel-python"] == pinned("python3.10-aarch64")["cel-python"]


def test_the_roles_platforms_are_the_tested_masters():
    scenario = yaml.safe_load((ROOT / "extensions" / "molecule" / "platform" / "molecule.yml").read_text())
    images = {p["image"].split(":")[1] for p in scenario["platforms"]}
    assert images == set(TESTED_MASTERS)
    for role in ("certificates", "kubeconfig", "scheduler"):
        meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())
        assert meta["galaxy_info"]["platforms"] == [{"name": "Debian", "versions": list(TESTED_MASTERS)}], role


def test_the_docs_state_the_pythons_and_masters_that_are_tested():
    guide = " ".join((ROOT / "docs" / "user-guide.md").read_text().split())
    assert "CPython 3.9 (3.9.2 or later) to 3.13 on x86_64 or aarch64, glibc 2.31 or later" in guide
    tested = "; ".join(f"{release}, Python {python}" for release, python in TESTED_MASTERS.items())
    assert f"(tested: Debian {tested}; all on x86_64)" in guide
    # wheelhouse.sh downloads wheels for glibc up to this, so masters need at least it.
    [glibc_minor] = re.findall(r"^GLIBC_MINOR_MAX=(\d+)$", (FILES / "wheelhouse.sh").read_text(), re.M)
    assert f"glibc 2.{glibc_minor} or later" in guide


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FILES / "target_constraints.py"), *args], capture_output=True,
                          text=True, check=False)


def test_the_command_prints_the_targets_pins_without_markers():
    out = run(str(CONSTRAINTS), "python3.9-aarch64")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{name}=={version}" for name, version in sorted(pinned("python3.9-aarch64").items())]
    assert ";" not in out.stdout


@pytest.mark.parametrize("lines, target, message", [
    (["numpy==2.0.2"], "python3.9", "'python3.9' is not a target like python3.13-x86_64"),
    (["numpy>=2"], "python3.9-x86_64", "'numpy>=2' is not pinned with =="),
    (["numpy==2.0.2", "numpy==2.2.6 ; python_version >= '3.9'"], "python3.9-x86_64",
     "numpy is pinned twice for python3.9-x86_64: 2.0.2 and 2.2.6"),
])
def test_a_bad_constraint_or_target_is_one_line_that_names_it(tmp_path, lines, target, message):
    bad = tmp_path / "constraints.txt"
    bad.write_text("\n".join(lines) + "\n")
    out = run(str(bad), target)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"target_constraints: {message}\n"
