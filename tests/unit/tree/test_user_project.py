"""A project of the user's own, set up as the user guide says, from the collection tarball:
examples/project with the tarball beside it, installed with its requirements.yml and no Galaxy
(the `ansible` package holds the dependencies), then every shipped playbook syntax-checked the
way a user runs it, by its FQCN. No warning may be printed: a user cannot tell a harmless one
from one that matters."""

from __future__ import annotations

import shutil
import subprocess
import tarfile

import pytest
from ansible_cli import ansible_command, user_environment


@pytest.fixture(scope="module")
def project(collection_tarball, tmp_path_factory):
    project = tmp_path_factory.mktemp("my-cluster")
    with tarfile.open(collection_tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith("examples/project/")]
        archive.extractall(project, members=members, filter="data")
    project = project / "examples" / "project"
    # requirements.yml names the tarball `ansible-galaxy collection build` makes of this tree.
    shutil.copy(collection_tarball, project)
    done = subprocess.run([ansible_command("ansible-galaxy"), "collection", "install", "--offline",
                           "-r", "requirements.yml", "-p", "collections"],
                          cwd=project, env=user_environment(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "collections/ansible_collections/kubesched/scheduler/MANIFEST.json").exists(), done.stdout
    return project


def syntax_check(project, playbook: str) -> subprocess.CompletedProcess:
    return subprocess.run([ansible_command("ansible-playbook"), "--syntax-check", playbook],
                          cwd=project, env=user_environment(), capture_output=True, text=True, timeout=300, check=False)


def test_the_projects_site_playbook_passes_a_syntax_check_without_a_warning(project):
    done = syntax_check(project, "site.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_every_shipped_playbook_passes_a_syntax_check_without_a_warning(project, shipped):
    playbooks = [name.removeprefix("playbooks/").removesuffix(".yml") for name in shipped
                 if name.startswith("playbooks/") and name.endswith(".yml")]
    assert "site" in playbooks
    for playbook in playbooks:
        done = syntax_check(project, f"kubesched.scheduler.{playbook}")
        assert done.returncode == 0, f"{playbook}: {done.stdout}{done.stderr}"
        assert "WARNING" not in done.stdout + done.stderr, f"{playbook}: {done.stdout}{done.stderr}"
