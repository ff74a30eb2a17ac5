"""The checkout is the collection kubesched.scheduler through one link, the committed
collections/ansible_collections/kubesched/scheduler -> ../../.. (ansible.cfg's collections_path
and the Makefile's ANSIBLE_COLLECTIONS_PATH name its parent). A second link back to the
checkout would be a second copy of the collection for every tool that walks the tree."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LINK = Path("collections/ansible_collections/kubesched/scheduler")
# Directories no tool of the project walks for content (and that may be large).
SKIPPED = {".git", ".venv", ".cache", ".lab", ".lab-priv", "tests/output"}


def test_the_link_is_committed_and_points_at_the_checkout():
    staged = subprocess.run(["git", "ls-files", "-s", str(LINK)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert staged.stdout.startswith("120000 "), f"{LINK} must be committed as a symlink, git has: {staged.stdout!r}"
    assert os.readlink(ROOT / LINK) == "../../.."
    assert (ROOT / LINK).resolve() == ROOT


def test_no_other_link_leads_back_to_the_checkout():
    loops = []
    for directory, subdirs, files in os.walk(ROOT):
        relative = Path(directory).relative_to(ROOT)
        subdirs[:] = [d for d in subdirs if str(relative / d).removeprefix("./") not in SKIPPED]
        for name in subdirs + files:
            path = Path(directory) / name
            if path.is_symlink() and path.resolve() == ROOT:
                loops.append(str(path.relative_to(ROOT)))
    assert loops == [str(LINK)], (f"links back to the checkout: {loops}; keep only {LINK} "
                                  "(an old `make setup` made ansible_collections/ at the top: `bash lab/setup.sh collection` removes it)")


def test_ansible_finds_the_collection_through_the_link_alone(tmp_path):
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}
    galaxy = Path(sys.executable).with_name("ansible-galaxy")
    listed = subprocess.run([str(galaxy), "collection", "list", "kubesched.scheduler"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=False, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "kubesched.scheduler" in listed.stdout
    assert str(ROOT / "collections" / "ansible_collections") in listed.stdout
