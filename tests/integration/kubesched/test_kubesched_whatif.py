"""`kubesched whatif` end to end on the lab: kwok nodes, pods running and pending (one gated),
the command as a user runs it, its JSON and table, its exit status, and a cluster it left
exactly as it found it (no binding, no event, no status patch)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import yaml
from kubesched_lab import API_VERSION

GATE = "kubesched.io/whatif-test"


def write(path, profiles: list[dict], kubeconfig: str) -> str:
    path.write_text(yaml.safe_dump({"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
                                    "clientConnection": {"kubeconfig": kubeconfig}, "profiles": profiles}))
    return str(path)


def stranding_profiles(profile: str) -> list[dict]:
    """The profile with a NodeAffinity rule (pool In [gpu]) that no lab node meets."""
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}
    return [{"schedulerName": profile, "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": added}}]}]


def refusal_of_web(namespace: str) -> str:
    """The role gate's one line when the stranding profile leaves pod web unschedulable."""
    return (f"The new scheduler configuration is refused before any master changes: 1 pod(s) the current "
            f"configuration places become unschedulable under the new one (at most 0 allowed): {namespace}/web "
            "(NodeAffinity (filter))")


def pod(name: str, profile: str, cpu: str, node: str = "", gated: bool = False) -> dict:
    spec: dict = {"schedulerName": profile, "containers": [
        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def cluster_state(core_v1, namespace: str) -> tuple[dict, int]:
    """Each pod's (resourceVersion, node), and how many events the namespace has."""
    items = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    events = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    pods = {p["metadata"]["name"]: (p["metadata"]["resourceVersion"], p["spec"].get("nodeName")) for p in items}
    return pods, len(events)


def test_whatif_previews_most_allocated_on_the_lab_and_writes_nothing(core_v1, nodes, namespace, lab_kubeconfig,
                                                                      kubesched_cli, tmp_path):
    busy, idle, spare = nodes(3, cpu="4")
    profile = f"whatif-{uuid.uuid4().hex[:6]}"
    for i, node in enumerate((busy, busy, idle)):
        core_v1.create_namespaced_pod(namespace, pod(f"run-{i}", profile, "1", node=node), _preload_content=False)
    core_v1.create_namespaced_pod(namespace, pod("web", profile, "500m"), _preload_content=False)
    core_v1.create_namespaced_pod(namespace, pod("held", profile, "500m", gated=True), _preload_content=False)
    current = write(tmp_path / "current.yaml", [{"schedulerName": profile}], lab_kubeconfig)
    most = {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1},
                                                                       {"name": "memory", "weight": 1}]}}
    new = write(tmp_path / "new.yaml", [{"schedulerName": profile, "pluginConfig": [
        {"name": "NodeResourcesFit", "args": most}]}], lab_kubeconfig)
    before = cluster_state(core_v1, namespace)

    code, out, err = kubesched_cli("whatif", "--config", new, "--current", current, "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    pending = {row["pod"].split("/")[1]: row for row in report["pending"]}
    assert set(pending) == {"web", "held"} and pending["held"]["gated"] is True
    # LeastAllocated takes an emptier node; MostAllocated the busiest that fits.
    assert pending["web"]["current"]["node"] in (idle, spare) and pending["web"]["new"]["node"] == busy
    assert pending["web"]["changedBy"][0]["plugin"] == "NodeResourcesFit"
    replacement = report["replacement"]
    assert replacement["pods"] == 3 and replacement["newlyUnschedulable"] == 0
    (packed,) = {row["new"]["node"] for row in replacement["rows"]}  # 3 cpu on one 4-cpu node
    assert len({row["current"]["node"] for row in replacement["rows"]}) == 3  # spread one per node
    spread = {n["node"]: n for n in report["spread"]["nodes"]}
    assert spread[busy]["now"]["pods"] == 2 and spread[busy]["now"]["cpu"] == 50.0
    assert spread[packed]["new"]["pods"] == 3 and spread[packed]["new"]["cpu"] == 75.0

    code, text, err = kubesched_cli("whatif", "--config", new, "--current", current)
    assert code == 0, err
    assert f"{namespace}/web" in text and "NodeResourcesFit (score" in text and "Spread per node" in text
    assert cluster_state(core_v1, namespace) == before  # nothing bound, patched or reported


def test_whatif_exits_3_when_the_new_config_strands_a_pending_pod(core_v1, nodes, namespace, lab_kubeconfig,
                                                                  kubesched_cli, tmp_path):
    nodes(2)
    profile = f"whatif-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespaced_pod(namespace, pod("web", profile, "100m"), _preload_content=False)
    current = write(tmp_path / "current.yaml", [{"schedulerName": profile}], lab_kubeconfig)
    new = write(tmp_path / "new.yaml", stranding_profiles(profile), lab_kubeconfig)
    code, text, err = kubesched_cli("whatif", "--config", new, "--current", current)
    assert code == 3, err
    refusal = ("1 pod(s) the current configuration places become unschedulable under the new one (at most 0 "
               f"allowed): {namespace}/web (NodeAffinity (filter))")
    assert f"Refused: {refusal}" in text and err.strip() == f"kubesched: refused: {refusal}"
    code, _text, err = kubesched_cli("whatif", "--config", new, "--current", current, "--max-newly-unschedulable", "1")
    assert code == 0 and err == ""


def test_whatif_with_a_plugin_kubesched_lacks_stops_before_reading(lab_kubeconfig, kubesched_cli, tmp_path):
    new = write(tmp_path / "new.yaml", [{"schedulerName": "x", "plugins": {
        "filter": {"enabled": [{"name": "CapacityScheduling"}]}}}], lab_kubeconfig)
    code, out, err = kubesched_cli("whatif", "--config", new)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "CapacityScheduling" in err


def run_gate(tmp_path, cases: list[dict], *flags: str):
    """The scheduler role's what-if gate (tasks_from whatif_gate) on this host, once per case (its
    variables), in one play, for a master whose installed configuration is config.yaml under
    tmp_path/etc."""
    import os
    import subprocess
    import sys

    from kubesched_lab import KUBESCHED, ROOT

    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": f"The role's what-if gate, case {i}", "ansible.builtin.include_role": {
            "name": "kubesched.scheduler.scheduler", "tasks_from": "whatif_gate"},
         "vars": {"scheduler_release_bin": str(KUBESCHED), **case}} for i, case in enumerate(cases)]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    extra = {"ansible_python_interpreter": sys.executable, "scheduler_config_dir": str(tmp_path / "etc")}
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml"), *flags],
                          capture_output=True, text=True, env=env, timeout=180, check=False)


SKIPPED_WHATIF = re.compile(r"The what-if of the new configuration against the installed one is known\] \**\nskipping")
RAN_WHATIF = re.compile(r"The what-if of the new configuration against the installed one is known\] \**\n(ok|changed|fatal)")


def test_the_role_gate_previews_a_changed_config_and_refuses_one_past_its_bounds(
        core_v1, nodes, namespace, lab_kubeconfig, tmp_path):
    nodes(2)
    profile = f"whatif-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespaced_pod(namespace, pod("web", profile, "100m"), _preload_content=False)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "kubeconfig").write_text(open(lab_kubeconfig).read())
    installed = write(etc / "config.yaml", [{"schedulerName": profile}], str(etc / "kubeconfig"))
    before = open(installed).read()
    stranding = {"scheduler_profiles": stranding_profiles(profile)}

    done = run_gate(tmp_path, [stranding], "--check", "--diff")
    assert done.returncode != 0
    assert refusal_of_web(namespace) in done.stdout, done.stdout[-3000:]
    assert f"+  {namespace}/web: " in done.stdout and "-> unschedulable (NodeAffinity)" in done.stdout  # the diff

    done = run_gate(tmp_path, [
        # within a raised bound
        {**stranding, "scheduler_whatif_max_newly_unschedulable": 1},
        # an invalid file is left to the validator of the rolling play (its reason, that master's rollback)
        {"scheduler_profiles": [{"schedulerName": profile, "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
        # check mode before the release is installed: nothing to ask, and the run says so
        {**stranding, "scheduler_release_bin": "/nonexistent/kubesched"},
    ], "--check", "--diff")
    assert done.returncode == 0, done.stdout[-3000:]
    within, invalid, missing = re.split(r"TASK \[The role's what-if gate, case \d\]", done.stdout)[1:]
    assert "Verdict: within the bounds" in within and not SKIPPED_WHATIF.search(within)
    assert SKIPPED_WHATIF.search(invalid) and "Verdict" not in invalid
    assert "No what-if: /nonexistent/kubesched is not installed yet" in missing and not RAN_WHATIF.search(missing)
    # Its scratch directory changes nothing on the master: a run whose what-if is skipped reports no
    # change (site.yml stays idempotent), one that previews reports only the summary it shows.
    assert invalid.count("changed: [localhost]") == 0 and missing.count("changed: [localhost]") == 0, done.stdout
    assert within.count("changed: [localhost]") == 1 and "placement-summary.txt" in within, within
    assert open(installed).read() == before and sorted(p.name for p in etc.iterdir()) == ["config.yaml", "kubeconfig"]
    assert not list(Path("/tmp").glob("kubesched-whatif.*"))  # the private directories are gone


def test_the_role_gate_runs_on_the_controller_for_kube_scheduler_masters(
        core_v1, nodes, namespace, lab_kubeconfig, tmp_path):
    """kube-scheduler masters have no kubesched and the controller no scheduler key: the gate
    installs a kubesched of the controller's own from the wheelhouse and reads the cluster with
    scheduler_api_kubeconfig. Here the master's release and kubeconfig do not exist, so a preview
    can only come from the controller's."""
    import os

    nodes(2)
    profile = f"whatif-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespaced_pod(namespace, pod("web", profile, "100m"), _preload_content=False)
    etc = tmp_path / "etc"
    etc.mkdir()
    installed = write(etc / "config.yaml", [{"schedulerName": profile}], str(etc / "kubeconfig"))
    before = open(installed).read()
    wheelhouse = Path(os.environ.get("KUBESCHED_CACHE") or Path.home() / ".cache" / "kubesched") / "wheelhouse"
    controller = {"scheduler_implementation": "kube-scheduler", "scheduler_release_bin": "/nonexistent/kube-scheduler",
                  "scheduler_api_kubeconfig": lab_kubeconfig, "scheduler_kubesched_wheelhouse": str(wheelhouse)}
    stranding = {**controller, "scheduler_profiles": stranding_profiles(profile)}

    done = run_gate(tmp_path, [stranding], "--check", "--diff")
    assert done.returncode != 0
    assert refusal_of_web(namespace) in done.stdout, done.stdout[-3000:]
    assert f"+  {namespace}/web: " in done.stdout  # the diff
    venvs = list(wheelhouse.glob(".whatif-python*/bin/kubesched"))
    assert len(venvs) == 1, venvs  # one venv, of the wheels the wheelhouse holds now

    done = run_gate(tmp_path, [
        {**stranding, "scheduler_whatif_max_newly_unschedulable": 1},
        # a plugin kubesched lacks (a custom kube-scheduler's): no preview, and the run says so;
        # kube-scheduler's validation in the rolling play decides
        {**controller, "scheduler_profiles": [{"schedulerName": profile, "plugins": {
            "score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
    ], "--check", "--diff")
    assert done.returncode == 0, done.stdout[-3000:]
    within, unknown = re.split(r"TASK \[The role's what-if gate, case \d\]", done.stdout)[1:]
    assert "Verdict: within the bounds" in within and not SKIPPED_WHATIF.search(within)
    assert SKIPPED_WHATIF.search(unknown) and "No what-if: kubesched does not accept the new configuration" in unknown
    assert "NoSuchPlugin" in unknown and "Verdict" not in unknown
    assert open(installed).read() == before and sorted(p.name for p in etc.iterdir()) == ["config.yaml"]
    assert not list(Path("/tmp").glob("kubesched-whatif.*"))
