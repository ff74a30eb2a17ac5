"""The scheduler role's scheduler_feature_gates, for both implementations, with the real
validators: the pinned kube-scheduler and kubesched's validate-config. The role's config tasks
(tasks_from config) run on this host with a configuration directory under tmp_path, and the
unit the role would install is rendered from its template."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import KUBE_SCHEDULER
from kubesched_lab import KUBESCHED, ROOT

UNIT_TEMPLATE = ROOT / "roles" / "scheduler" / "templates" / "scheduler.service.j2"


def run_config_tasks(tmp_path, implementation: str, gates: dict):
    binary = KUBESCHED if implementation == "kubesched" else KUBE_SCHEDULER
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "The role's configuration tasks", "ansible.builtin.include_role": {
            "name": "kubesched.scheduler.scheduler", "tasks_from": "config", "public": True}},
        {"name": "The unit the role would install", "ansible.builtin.template": {
            "src": str(UNIT_TEMPLATE), "dest": str(tmp_path / "unit.service"), "mode": "0600"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    (tmp_path / "vars.json").write_text(json.dumps({
        "ansible_python_interpreter": sys.executable, "scheduler_implementation": implementation,
        "scheduler_release_bin": str(binary), "scheduler_config_dir": str(tmp_path / "etc"),
        "scheduler_group": "root", "scheduler_feature_gates": gates}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, timeout=180, check=False)


@pytest.mark.parametrize("implementation", ["kubesched", "kube-scheduler"])
def test_feature_gates_reach_the_validator_and_the_unit_and_an_unknown_one_changes_nothing(
        implementation, lab_kubeconfig, tmp_path):
    if implementation == "kube-scheduler" and not KUBE_SCHEDULER.exists():
        pytest.fail(f"{KUBE_SCHEDULER} is missing: run 'make setup' (lab/k8s-binaries.sh builds it).", pytrace=False)
    etc = tmp_path / "etc"
    etc.mkdir()
    shutil.copy(lab_kubeconfig, etc / "kubeconfig")
    config = etc / "config.yaml"

    # A first install with a gate the implementation does not know: its validator refuses the
    # rendered file, and nothing is installed.
    done = run_config_tasks(tmp_path, implementation, {"NoSuchGate": True})
    assert done.returncode != 0 and "NoSuchGate" in done.stdout + done.stderr, done.stdout[-3000:]
    assert "The KubeSchedulerConfiguration is valid and installed" in done.stdout and not config.exists()

    done = run_config_tasks(tmp_path, implementation, {})
    assert done.returncode == 0, done.stdout[-3000:]
    installed = config.read_text()
    assert "--feature-gates" not in (tmp_path / "unit.service").read_text()

    # The gate alone changes: the file is the same, so the template does not validate it, and the
    # installed file is checked with the new gates before the unit would pass them.
    done = run_config_tasks(tmp_path, implementation, {"NoSuchGate": True})
    assert done.returncode != 0, done.stdout[-3000:]
    failed = done.stdout[done.stdout.index("TASK [kubesched.scheduler.scheduler : The feature gates are accepted"):]
    assert failed.startswith("TASK [kubesched.scheduler.scheduler : The feature gates are accepted with the "
                             f"installed configuration, as checked by {implementation}]")
    assert "fatal: [localhost]" in failed and "NoSuchGate" in failed, failed[-3000:]
    assert config.read_text() == installed

    done = run_config_tasks(tmp_path, implementation, {"GenericWorkload": True, "OpportunisticBatching": False})
    assert done.returncode == 0, done.stdout[-3000:]
    unit = (tmp_path / "unit.service").read_text()
    assert "  --feature-gates=GenericWorkload=true,OpportunisticBatching=false \\\n" in unit
    assert config.read_text() == installed


def test_a_gate_that_is_not_a_name_to_a_boolean_is_refused_by_the_role_s_assertions(tmp_path):
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "The role's assertions", "ansible.builtin.include_role": {
            "name": "kubesched.scheduler.scheduler", "tasks_from": "assert"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_NOCOLOR="1")
    for gates in ({"GenericWorkload": "yes"}, {"generic-workload": True}):
        (tmp_path / "vars.json").write_text(json.dumps({"ansible_python_interpreter": sys.executable,
                                                        "scheduler_feature_gates": gates}))
        done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                               "-c", "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
                              capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode != 0
        assert "scheduler_feature_gates maps gate names (such as GenericWorkload) to true or false" in done.stdout, \
            done.stdout[-2000:]
