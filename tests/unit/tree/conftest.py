"""The collection tarball, built once per session with ansible-galaxy from the working tree as a
release would be, for the tests that check what a user of the collection receives."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest
from ansible_cli import ansible_command

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tarball")
    done = subprocess.run([ansible_command("ansible-galaxy"), "collection", "build", str(ROOT), "--output-path", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"ansible-galaxy collection build failed:\n{done.stdout}\n{done.stderr}"
    [tarball] = out.glob("kubesched-scheduler-*.tar.gz")
    return tarball


@pytest.fixture(scope="session")
def shipped(collection_tarball) -> list[str]:
    """The names of the files in the tarball."""
    with tarfile.open(collection_tarball) as archive:
        return sorted(m.name for m in archive.getmembers() if m.isfile())
