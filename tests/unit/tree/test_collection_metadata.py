"""The collection's metadata agrees with itself and with what CI runs: one version for the
collection and kubesched, a development version on main once a release is out; the ansible-core
versions meta/runtime.yml and the roles accept start where CI's requirements start, with no upper
cap; the example project asks for what galaxy.yml depends on; and the execution environment
metadata installs what the controller runs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ansible.release import __version__ as ansible_core_version
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import kubesched

ROOT = Path(__file__).resolve().parents[3]


def load(path: str):
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


def requirements(path: str) -> dict[str, Requirement]:
    """A pip requirements file, by package name."""
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / path).read_text(encoding="utf-8").splitlines()]
    return {req.name: req for req in (Requirement(line) for line in lines if line)}


def lowest(specifier: SpecifierSet) -> Version:
    [floor] = [Version(spec.version) for spec in specifier if spec.operator == ">="]
    return floor


GALAXY = load("galaxy.yml")
REQUIRES_ANSIBLE = SpecifierSet(load("meta/runtime.yml")["requires_ansible"])
CI_ANSIBLE_CORE = requirements("requirements.txt")["ansible-core"].specifier


def test_the_collection_and_kubesched_carry_one_version():
    # galaxy.yml speaks semver (0.3.0-dev0), Python PEP 440 (0.3.0.dev0): the same version.
    assert Version(GALAXY["version"]) == Version(kubesched.__version__)


def test_main_carries_a_development_version_once_a_release_is_out():
    released = max(Version(str(v)) for v in load("changelogs/changelog.yaml")["releases"])
    pending = sorted(p.name for p in (ROOT / "changelogs/fragments").glob("*.y*ml"))
    version = Version(GALAXY["version"])
    if version == released:
        assert pending == [], f"{released} is released, so these changes need a new version in galaxy.yml: {pending}"
    else:
        assert version > released and version.is_prerelease, (
            f"galaxy.yml says {version}: after the release of {released} main says a development version "
            "of the next one (such as 0.3.0-dev0)")


def test_the_supported_ansible_core_starts_where_ci_starts_and_has_no_cap():
    floor = lowest(REQUIRES_ANSIBLE)
    assert [spec for spec in REQUIRES_ANSIBLE if spec.operator != ">="] == [], (
        f"requires_ansible {REQUIRES_ANSIBLE}: no upper cap unless a version is known to break")
    assert floor == lowest(CI_ANSIBLE_CORE), f"requires_ansible starts at {floor}, CI installs {CI_ANSIBLE_CORE}"
    assert ansible_core_version in REQUIRES_ANSIBLE
    for meta in sorted(ROOT.glob("roles/*/meta/main.yml")):
        stated = Version(str(yaml.safe_load(meta.read_text(encoding="utf-8"))["galaxy_info"]["min_ansible_version"]))
        assert stated == floor, f"{meta.relative_to(ROOT)}: min_ansible_version {stated}, requires_ansible {floor}"
    # Sanity ignore files only for the versions the collection supports, and one for CI's.
    ignored = {Version(p.stem.removeprefix("ignore-")) for p in (ROOT / "tests/sanity").glob("ignore-*.txt")}
    assert [str(v) for v in ignored if v not in REQUIRES_ANSIBLE] == []
    assert Version(".".join(ansible_core_version.split(".")[:2])) in ignored
    # What the docs tell a user.
    for doc in ("README.md", "docs/user-guide.md"):
        assert f"ansible-core {floor.major}.{floor.minor} or later" in (ROOT / doc).read_text(encoding="utf-8"), doc


def test_the_example_project_asks_for_this_collection_and_what_it_depends_on():
    wanted = {entry["name"]: entry for entry in load("examples/project/requirements.yml")["collections"]}
    assert f"./kubesched-scheduler-{GALAXY['version']}.tar.gz" in wanted, sorted(wanted)
    assert {name: entry.get("version") for name, entry in wanted.items() if "/" not in name} == GALAXY["dependencies"]


def test_the_execution_environment_installs_what_the_controller_runs(shipped):
    ee = load("meta/execution-environment.yml")
    assert ee["version"] == 1
    python, system = ee["dependencies"]["python"], ee["dependencies"]["system"]
    assert {python, system} <= set(shipped), "ansible-builder reads these files from the installed collection"
    ee_python = requirements(python)
    # Every Python package a module requires (ansible-doc's Requirements, as docs/modules shows
    # them), at least at the version CI tests.
    modules = set()
    for page in (ROOT / "docs/modules").glob("*.md"):
        section = re.search(r"^## Requirements\n\n((?:- .*\n)+)", page.read_text(encoding="utf-8"), re.M)
        modules |= {line[2:].split()[0] for line in section.group(1).splitlines()} if section else set()
    assert modules and modules <= set(ee_python), f"modules require {sorted(modules)}, {python} has {sorted(ee_python)}"
    ci = requirements("requirements.txt")
    for name in modules:
        assert lowest(ee_python[name].specifier) == lowest(ci[name].specifier), name
    # The scheduler role runs pip and these commands on the controller.
    assert "pip" in ee_python
    packages = {line.split()[0] for line in (ROOT / system).read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")}
    assert {"bash", "coreutils", "findutils", "tar", "util-linux"} <= packages
