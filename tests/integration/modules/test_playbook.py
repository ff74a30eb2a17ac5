"""The modules through ansible-playbook, with the connection coming from K8S_AUTH_KUBECONFIG alone."""

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import time

from .helpers import COLLECTIONS_PATH, module_env, node_state

PLAYBOOK = textwrap.dedent("""\
    - name: Dedicate a node to the blue team
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Node {node} is tainted for the blue team
          kubesched.scheduler.node_taint:
            name: "{node}"
            taints: ["app=blue:NoSchedule"]

        - name: Node {node} is cordoned
          kubesched.scheduler.node_cordon:
            name: "{node}"
    """)


MODULE_DEFAULTS_PLAYBOOK = textwrap.dedent("""\
    - name: Connection options set once for the whole collection
      hosts: localhost
      gather_facts: false
      module_defaults:
        group/kubesched.scheduler.k8s:
          kubeconfig: "{kubeconfig}"
      tasks:
        - name: Node {node} is labelled
          kubesched.scheduler.node_label:
            name: "{node}"
            labels: {{color: green}}
    """)


def _play(tmp_path, node, lab_kubeconfig, *options, playbook_text=PLAYBOOK, env_kubeconfig=True):
    """Run the playbook with the json callback; returns {task name: result}."""
    playbook = tmp_path / "site.yml"
    playbook.write_text(playbook_text.format(node=node, kubeconfig=lab_kubeconfig))
    env = module_env({"ANSIBLE_PYTHON_INTERPRETER": sys.executable,
                      "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_LOCALHOST_WARNING": "false",
                      # ansible.posix (the json callback) comes from the venv's ansible package.
                      "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([COLLECTIONS_PATH, sysconfig.get_paths()["purelib"]])})
    if env_kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = lab_kubeconfig
    else:
        env.pop("K8S_AUTH_KUBECONFIG", None)
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    completed = subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", str(playbook)] + list(options),
                               env=env, capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    return {task["task"]["name"]: task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]}


def test_playbook_check_diff_then_apply(bare_nodes, core_v1, lab_kubeconfig, tmp_path):
    (node,) = bare_nodes(1)
    taint_task, cordon_task = "Node %s is tainted for the blue team" % node, "Node %s is cordoned" % node

    preview = _play(tmp_path, node, lab_kubeconfig, "--check", "--diff")
    assert preview[taint_task]["changed"] is True and preview[cordon_task]["changed"] is True
    assert preview[taint_task]["diff"][0]["after"] == {"taints": [{"key": "app", "value": "blue",
                                                                   "effect": "NoSchedule"}]}
    assert preview[cordon_task]["diff"][0]["after"] == {"unschedulable": True}
    assert node_state(core_v1, node)["taints"] == [] and node_state(core_v1, node)["unschedulable"] is False

    applied = _play(tmp_path, node, lab_kubeconfig)
    assert applied[taint_task]["changed"] is True and applied[cordon_task]["changed"] is True
    assert node_state(core_v1, node)["unschedulable"] is True
    # The node lifecycle controller marks a cordoned node with its own taint, as on any cluster.
    deadline = time.monotonic() + 15
    while len(node_state(core_v1, node)["taints"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in node_state(core_v1, node)["taints"]] == [
        {"key": "app", "value": "blue", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


def test_module_defaults_group_sets_the_connection_once(bare_nodes, core_v1, lab_kubeconfig, tmp_path):
    (node,) = bare_nodes(1)
    result = _play(tmp_path, node, lab_kubeconfig, playbook_text=MODULE_DEFAULTS_PLAYBOOK, env_kubeconfig=False)
    assert result["Node %s is labelled" % node]["changed"] is True
    assert node_state(core_v1, node)["labels"]["color"] == "green"
