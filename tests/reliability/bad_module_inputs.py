"""Suite 5: bad module inputs, through ansible-playbook as a user would run them.

The catalogue is the modules' own (BAD_INPUTS in tests/integration/modules/test_bad_inputs.py,
one source of truth); this suite runs every case as a task of one playbook against the
private lab, records each module's message, and reads the cluster back: every node and
PriorityClass a case could touch keeps its resourceVersion, and none is created.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import yaml

from lab.cluster import Cluster
from lab.private_lab import ROOT
from tests.reliability.result import SuiteResult

SHARED_LAB_SERVER = "https://127.0.0.1:6443"
GHOSTS = ("ghost-node", "ghost-a", "ghost-b", "Bad_Node")


def _stage(cluster: Cluster) -> dict:
    """The modules' catalogue stage: two nodes (one tainted app=blue and both labelled color=blue),
    an existing PriorityClass (value 1000) and a global default one."""
    from lab.fake_nodes import create_nodes

    suffix = uuid.uuid4().hex[:5]
    names = create_nodes(cluster.core, 2, prefix=f"bad-{suffix}-")
    for name, taints in zip(names, ([{"key": "app", "value": "blue", "effect": "NoSchedule"}], [])):
        cluster.core.patch_node(name, {"spec": {"taints": taints or None}, "metadata": {"labels": {"color": "blue"}}},
                                _preload_content=False)
    existing, holder = f"bad-existing-{suffix}", f"bad-default-{suffix}"
    scheduling = _scheduling(cluster)
    scheduling.create_priority_class({"metadata": {"name": existing}, "value": 1000}, _preload_content=False)
    scheduling.create_priority_class({"metadata": {"name": holder}, "value": 5, "globalDefault": True},
                                     _preload_content=False)
    return {"n0": names[0], "n1": names[1], "pc": existing, "holder": holder}


def _unstage(cluster: Cluster, stage: dict) -> None:
    from lab.fake_nodes import delete_nodes

    delete_nodes(cluster.core, [stage["n0"], stage["n1"]])
    for name in (stage["pc"], stage["holder"]):
        _scheduling(cluster).delete_priority_class(name, _preload_content=False)


def _scheduling(cluster: Cluster):
    from kubernetes import client

    return client.SchedulingV1Api(cluster.api_client)


def snapshot(cluster: Cluster, nodes: set[str], classes: set[str]) -> dict[str, str]:
    """kind/name -> resourceVersion ('absent' when it does not exist)."""
    listed_nodes = {n["metadata"]["name"]: n["metadata"]["resourceVersion"]
                    for n in json.loads(cluster.core.list_node(_preload_content=False).data)["items"]}
    listed_classes = {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in json.loads(
        _scheduling(cluster).list_priority_class(_preload_content=False).data)["items"]}
    out = {f"node/{n}": listed_nodes.get(n, "absent") for n in nodes}
    out.update({f"priorityclass/{c}": listed_classes.get(c, "absent") for c in classes})
    return out


def _playbook(cases: list[tuple[str, dict]], kubeconfig: str, results_path: Path) -> list[dict]:
    tasks = []
    for index, (module, args) in enumerate(cases):
        args = dict(args)
        args.setdefault("kubeconfig", kubeconfig)
        args = {k: v for k, v in args.items() if v is not None}
        tasks.append({"name": f"case {index}: {module}", f"kubesched.scheduler.{module}": args,
                      "register": f"case_{index}", "ignore_errors": True})
    everything = "[" + ", ".join(f"case_{i}" for i in range(len(cases))) + "]"
    tasks.append({"name": "Write every case's result", "ansible.builtin.copy": {
        "content": "{{ " + everything + " | to_json }}", "dest": str(results_path), "mode": "0600"}})
    return [{"name": "Bad module inputs", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": tasks}]


def run(cluster: Cluster, workdir: str) -> SuiteResult:
    # The catalogue and its placeholder filling are the modules' own.
    from tests.integration.modules.test_bad_inputs import BAD_INPUTS, fill_placeholders

    result = SuiteResult("bad_module_inputs", "Bad module inputs")
    directory = Path(workdir) / "bad-module-inputs"
    directory.mkdir(parents=True, exist_ok=True)
    stage = _stage(cluster)
    try:
        def localise(value):
            # The catalogue is written for the shared lab; this suite runs on the private one.
            if isinstance(value, str):
                return value.replace(SHARED_LAB_SERVER, cluster.server)
            if isinstance(value, (list, tuple)):
                return type(value)(localise(v) for v in value)
            if isinstance(value, dict):
                return {k: localise(v) for k, v in value.items()}
            return value

        cases = [(module, localise(fill_placeholders(args, stage)), localise(fill_placeholders(fragment, stage)))
                 for module, args, fragment in BAD_INPUTS]
        nodes = {stage["n0"], stage["n1"], *GHOSTS}
        named = {args["name"] for _m, args, _f in cases if isinstance(args.get("name"), str)}
        classes = {stage["pc"], stage["holder"]} | named
        before = snapshot(cluster, nodes, classes)
        playbook = directory / "bad-inputs.yml"
        playbook.write_text(yaml.safe_dump(_playbook([(m, a) for m, a, _f in cases], cluster.kubeconfig,
                                                     directory / "results.json"), sort_keys=False), encoding="utf-8")
        env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
               "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
               "ANSIBLE_PYTHON_INTERPRETER": str(ROOT / ".venv" / "bin" / "python")}
        env.pop("K8S_AUTH_KUBECONFIG", None)
        done = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(playbook)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
        (directory / "ansible-output.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
        after = snapshot(cluster, nodes, classes)
        if not (directory / "results.json").exists():
            result.check("the playbook ran every case", False, (done.stdout + done.stderr)[-1500:])
            return result.finish()
        outcomes = json.loads((directory / "results.json").read_text(encoding="utf-8"))
        changed = sorted(k for k in before if before[k] != after.get(k))
        for (module, args, fragment), outcome in zip(cases, outcomes):
            message = outcome.get("msg", "")
            passed = bool(outcome.get("failed")) and fragment in message and not outcome.get("changed")
            result.cases.append({"module": module, "args": args, "failed": bool(outcome.get("failed")),
                                 "changed": bool(outcome.get("changed")), "message": message,
                                 "expected_fragment": fragment, "passed": passed})
            result.check(f"{module} {json.dumps(args, sort_keys=True)[:90]}", passed,
                         message if passed else f"expected {fragment!r}, got {message!r}")
        result.check("the cluster reads back unchanged (resourceVersions of every object a case could touch)",
                     not changed, f"changed: {changed}" if changed else f"{len(before)} objects compared")
        result.figures["bad_module_input_cases"] = len(cases)
        result.figures["bad_module_input_cases_passed"] = sum(1 for c in result.cases if c["passed"])
        result.figures["cluster_unchanged_after_bad_inputs"] = not changed
    finally:
        _unstage(cluster, stage)
    return result.finish()
