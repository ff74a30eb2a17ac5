"""The Ansible commands as a user of the collection runs them, outside the checkout."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def ansible_command(name: str) -> str:
    """An Ansible CLI (ansible-galaxy, ansible-playbook) of the Python that runs the tests."""
    return shutil.which(name) or str(Path(sys.executable).with_name(name))


def user_environment() -> dict[str, str]:
    """The environment of a user's controller: none of the checkout's Ansible, Molecule or
    PYTHONPATH settings (the Makefile's ANSIBLE_COLLECTIONS_PATH would find the checkout itself),
    so a project's own ansible.cfg and the `ansible` package's collections are what count."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("ANSIBLE_", "MOLECULE_", "K8S_AUTH_")) and name != "PYTHONPATH"}
