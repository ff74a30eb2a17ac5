"""The scheduler role refuses bad inputs before it changes anything: argument_specs check each
variable (type, choices, a profile's fields), tasks/assert.yml only what argument_specs cannot
say (conditions between variables, the form of a name). Each case runs the role's prepare
entry point on localhost and must fail at one of the two checks, with the words that say
what to fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = ("Validating arguments against arg spec 'prepare' - Install the release and identity on all masters "
        "at once, apply RBAC, plan the rollout")


def run_prepare(tmp_path: Path, variables: dict) -> subprocess.CompletedProcess:
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "The role's prepare entry point", "ansible.builtin.include_role": {
            "name": "kubesched.scheduler.scheduler", "tasks_from": "prepare"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    (tmp_path / "vars.json").write_text(json.dumps({"ansible_python_interpreter": sys.executable, **variables}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("variables, task, words", [
    # argument_specs
    ({"scheduler_implementation": "kube_scheduler"}, SPEC,
     "value of scheduler_implementation must be one of: kubesched, kube-scheduler, got: kube_scheduler"),
    ({"scheduler_profiles": [{"plugins": {}}]}, SPEC,
     "missing required arguments: schedulerName found in scheduler_profiles"),
    ({"scheduler_profiles": [{"schedulerName": "a", "pluginconfig": []}]},
     SPEC, "pluginconfig"),
    # what argument_specs cannot say
    ({"scheduler_implementation": "kube-scheduler"}, "The implementation's source and the names are usable",
     "kube-scheduler needs exactly one of scheduler_kube_scheduler_version"),
    ({"scheduler_instance": "my scheduler"}, "The implementation's source and the names are usable",
     "scheduler_instance must be a plain unit name"),
])
def test_a_bad_input_fails_at_one_check_with_what_to_fix(tmp_path, variables, task, words):
    if not (ROOT / "collections" / "ansible_collections" / "kubesched" / "scheduler").exists():
        pytest.fail("collections/ansible_collections/kubesched/scheduler is missing: run 'make setup'")
    done = run_prepare(tmp_path, variables)
    assert done.returncode != 0 and "fatal:" in done.stdout, done.stdout[-2000:]
    before, failure = done.stdout.split("fatal:", 1)
    failed_task = before.rsplit("TASK [", 1)[-1].split("]", 1)[0]
    assert failed_task == f"kubesched.scheduler.scheduler : {task}", done.stdout[-2000:]
    assert words in failure, failure[:2000]
