"""Running the collection's modules against the lab, and reading the lab back.

`run_in_process` runs a module's main() with its arguments exposed the way Ansible passes
them (ansible.module_utils.testing.patch_module_args): the real AnsibleModule code path,
without paying the kubernetes client's import for every call. `module_command` runs a
module as its own Python process given a JSON args file, as Ansible runs it on a host;
the concurrency tests use it, and test_playbook.py goes through ansible-playbook.
"""

import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
import uuid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTIONS_PATH = os.path.join(REPO_ROOT, "collections")  # holds the committed link ansible_collections/kubesched/scheduler
MODULE_PACKAGE = "ansible_collections.kubesched.scheduler.plugins.modules"


def _import_module(module):
    if COLLECTIONS_PATH not in sys.path:
        sys.path.insert(0, COLLECTIONS_PATH)
    return importlib.import_module("%s.%s" % (MODULE_PACKAGE, module))


def import_module_utils(name):
    """A module_utils module of the collection, as the in-process modules use it."""
    _import_module("node_taint")
    return importlib.import_module("ansible_collections.kubesched.scheduler.plugins.module_utils." + name)


def run_in_process(module, args, check_mode=False, diff=True, env=None):
    """Run the module's main() once; env temporarily sets environment variables (K8S_AUTH_*)."""
    from ansible.module_utils.testing import patch_module_args

    main = _import_module(module).main
    output = io.StringIO()
    saved = dict(os.environ)
    try:
        for key in [key for key in os.environ if key.startswith("K8S_AUTH_")]:
            del os.environ[key]
        os.environ.update(env or {})
        with patch_module_args(dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)):
            with contextlib.redirect_stdout(output):
                try:
                    main()
                except SystemExit:
                    pass
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return parse_result(output.getvalue())


def module_env(extra=None):
    env = {key: value for key, value in os.environ.items() if not key.startswith("K8S_AUTH_")}
    env["PYTHONPATH"] = COLLECTIONS_PATH
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS_PATH
    env.update(extra or {})
    return env


def module_command(module, args, tmp_path, check_mode=False, diff=True):
    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    path = tmp_path / ("args-%s.json" % uuid.uuid4().hex[:8])
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    return [sys.executable, "-m", "%s.%s" % (MODULE_PACKAGE, module), str(path)]


def parse_result(completed_stdout, stderr=""):
    try:
        return json.loads(completed_stdout)
    except ValueError:
        raise AssertionError(
            "module printed no JSON result:\nstdout: %s\nstderr: %s" % (completed_stdout, stderr)
        ) from None


# Imports the module (the slow part), says "ready", and runs it when told "go" on stdin: the
# writers of the concurrency tests then hit the API server at the same moment.
_STARTING_GATE = """
import importlib, sys
module = importlib.import_module(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
sys.argv = [sys.argv[0], sys.argv[2]]
module.main()
"""


def start_at_gate(module, args, tmp_path):
    """A module process on its way to the starting gate; see wait_at_gate and release."""
    command = module_command(module, args, tmp_path)
    return subprocess.Popen([sys.executable, "-c", _STARTING_GATE, "%s.%s" % (MODULE_PACKAGE, module), command[-1]],
                            env=module_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_at_gate(processes):
    """Return once every process has loaded its module and waits for the go."""
    for process in processes:
        if process.stdout.readline().strip() != "ready":
            raise AssertionError("a module process did not start: %s" % process.stderr.read())


def release(processes):
    """Let every gated process run at once, and return their results."""
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    return [finish(process) for process in processes]


def finish(process):
    stdout, stderr = process.communicate(timeout=120)
    return parse_result(stdout, stderr)


def read_json(method, *args, **kwargs):
    return json.loads(method(*args, _preload_content=False, **kwargs).data)


def node_state(core_v1, name):
    node = read_json(core_v1.read_node, name)
    return {"taints": node["spec"].get("taints", []), "labels": node["metadata"].get("labels", {}),
            "unschedulable": bool(node["spec"].get("unschedulable"))}
