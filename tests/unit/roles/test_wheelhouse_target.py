"""The scheduler role installs kubesched from the wheelhouse directory of the master's own target
(python<minor>-<arch> from its facts); offline (scheduler_kubesched_build_wheel false), a master
whose target is missing fails before anything changes on it, naming the target and the command
that fills it. Runs the role's install tasks with ansible-playbook against this machine."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def test_a_missing_target_fails_with_the_command_that_fills_it(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "python3.0-otherarch").mkdir(parents=True)  # another master's target only
    playbook = tmp_path / "install.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Install kubesched offline", "hosts": "localhost", "gather_facts": False,
        "vars": {"scheduler_kubesched_build_wheel": False, "scheduler_kubesched_wheelhouse": str(wheelhouse),
                 "scheduler_install_dir": str(tmp_path / "opt")},
        "tasks": [{"ansible.builtin.include_role": {"name": "kubesched.scheduler.scheduler",
                                                    "tasks_from": "install_kubesched"}}]}]))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
           "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    run = subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), str(playbook)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    target = "python%d.%d-%s" % (sys.version_info[0], sys.version_info[1], platform.machine())
    assert run.returncode != 0, run.stdout
    assert f"{wheelhouse}/{target} holds no kubesched or pip wheel" in run.stdout, run.stdout
    assert f"roles/scheduler/files/wheelhouse.sh {wheelhouse} {target}" in run.stdout, run.stdout
    assert not (tmp_path / "opt").exists()  # nothing installed
