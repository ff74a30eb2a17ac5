"""Python plugins from entry points, and Permit Wait, through kubesched against the lab.

kube-scheduler cannot load a Python plugin (nor any plugin without a rebuild), so these run
kubesched only: the example package is pip-installed into a directory on kubesched's
PYTHONPATH, exactly as a user's `pip install` lays it out, and enabled by name; a test plugin
(plugins/permit_gate.py) makes pods wait in Permit and allows or rejects them through the
framework handle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kubesched_lab import ROOT, events_for, set_taints, wait_for

EXAMPLE = ROOT / "examples" / "kubesched-plugin-example"
PLUGINS = Path(__file__).resolve().parent / "plugins"
PAUSE = "registry.k8s.io/pause:3.10"


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """A directory on the PYTHONPATH every kubesched the test starts inherits."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    return site


def pod(name: str, scheduler: str, labels: dict | None = None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": PAUSE}], **spec}}


def read(core_v1, namespace: str, name: str) -> dict:
    return json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)


def failed_scheduling(api_client, namespace: str, name: str) -> list[str]:
    return [e.get("note", "") for e in events_for(api_client, namespace, name) if e["reason"] == "FailedScheduling"]


def test_the_example_plugin_installed_with_pip_is_enabled_by_name(
        plugin_site, nodes, core_v1, api_client, namespace, run_kubesched, kubesched_cli, tmp_path):
    source = tmp_path / "example"  # a copy: pip's build leaves an egg-info beside the sources
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                          str(plugin_site), str(source)], capture_output=True, text=True, timeout=300, check=False)
    assert pip.returncode == 0, pip.stderr
    prefix = f"mx{uuid.uuid4().hex[:4]}-"
    names = {}
    for part, labels in (("maint", {"example.com/maintenance": "true", "rank": "100"}),
                         ("high", {"rank": "80"}), ("low", {"rank": "20"})):
        [names[part]] = set_taints(core_v1, nodes(1, prefix=f"{prefix}{part}-", zones=0,
                                                  labels={**labels, "part": part}))
    scheduler = f"example-{uuid.uuid4().hex[:4]}"
    config = {"profiles": [{"schedulerName": scheduler,
                            "plugins": {"multiPoint": {"enabled": [{"name": "Maintenance", "weight": 5}]}},
                            "pluginConfig": [{"name": "Maintenance", "args": {"preferenceLabel": "rank"}}]}]}
    run_kubesched(config)
    core_v1.create_namespaced_pod(namespace, pod("steered", scheduler), _preload_content=False)
    core_v1.create_namespaced_pod(namespace, pod("only-maintenance", scheduler, nodeSelector={"part": "maint"}),
                                  _preload_content=False)
    # The Score (weight 5) outweighs the default plugins on equal nodes; the Filter keeps the
    # best-ranked node, in maintenance, out.
    assert wait_for(lambda: read(core_v1, namespace, "steered")["spec"].get("nodeName"), 30,
                    what="the steered pod bound") == names["high"]
    [note, *_rest] = wait_for(lambda: failed_scheduling(api_client, namespace, "only-maintenance"), 30,
                              what="FailedScheduling for the pod that only fits a node in maintenance")
    assert note.startswith("0/3 nodes are available: 1 node(s) were in maintenance, 2 node(s) didn't match Pod's "
                           "node affinity/selector.")
    # validate-config knows the installed entry point and says how to add a missing one.
    bad = tmp_path / "misspelt.yaml"
    bad.write_text(json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                               "profiles": [{"plugins": {"filter": {"enabled": [{"name": "Maintenence"}]}}}]}))
    code, _out, err = kubesched_cli("validate-config", str(bad))
    assert code == 1
    assert "unknown plugin 'Maintenence'" in err
    assert "Maintenance = kubesched_plugin_example.maintenance:Maintenance from kubesched-plugin-example 0.1.0" in err
    assert '[project.entry-points."kubesched.plugins"]' in err


def install_test_plugin(site: Path, module: str, plugin: str) -> None:
    """plugins/<module>.py with a dist-info declaring its entry point, as pip would leave it."""
    (site / f"{module}.py").write_text((PLUGINS / f"{module}.py").read_text())
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[kubesched.plugins]\n{plugin} = {module}:{plugin}\n")


def test_waiting_pods_are_allowed_rejected_and_timed_out_without_blocking_others(
        plugin_site, nodes, core_v1, api_client, namespace, run_kubesched):
    install_test_plugin(plugin_site, "permit_gate", "PermitGate")
    [node] = set_taints(core_v1, nodes(1, zones=0))
    scheduler = f"permit-{uuid.uuid4().hex[:4]}"
    sched = run_kubesched({"profiles": [{"schedulerName": scheduler,
                                         "plugins": {"permit": {"enabled": [{"name": "PermitGate"}]}},
                                         "pluginConfig": [{"name": "PermitGate", "args": {"timeoutSeconds": 4}}]}]})
    gated = {"permit-gate": "on"}
    for name in ("allowed", "rejected", "timed-out"):
        core_v1.create_namespaced_pod(namespace, pod(name, scheduler, labels=gated), _preload_content=False)
    # Waiting pods hold the scheduling loop back in nothing: a plain pod binds meanwhile.
    core_v1.create_namespaced_pod(namespace, pod("plain", scheduler), _preload_content=False)
    assert wait_for(lambda: read(core_v1, namespace, "plain")["spec"].get("nodeName"), 15, what="plain bound") == node
    # NominatedNodeNameForExpectation: a waiting pod says where it is about to go.
    wait_for(lambda: read(core_v1, namespace, "allowed")["status"].get("nominatedNodeName") == node, 10,
             what="the waiting pod's nominatedNodeName")
    assert not read(core_v1, namespace, "allowed")["spec"].get("nodeName")

    def annotate(name: str, decision: str) -> None:
        core_v1.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {
            "test.kubesched.io/permit": decision}}}, _preload_content=False)

    annotate("allowed", "allow")
    annotate("rejected", "reject")
    assert wait_for(lambda: read(core_v1, namespace, "allowed")["spec"].get("nodeName"), 15,
                    what="the allowed pod bound") == node
    assert wait_for(lambda: failed_scheduling(api_client, namespace, "rejected"), 15, what="the rejection")[0] == \
        "0/1 nodes are available: 1 rejected by PermitGate."
    assert wait_for(lambda: failed_scheduling(api_client, namespace, "timed-out"), 15, what="the timeout")[0] == \
        "0/1 nodes are available: 1 rejected due to timeout after waiting 4s at plugin PermitGate."
    # Rejected means unreserved and requeued: allowed now, the pod's next attempt binds it.
    annotate("rejected", "allow")
    assert wait_for(lambda: read(core_v1, namespace, "rejected")["spec"].get("nodeName"), 30,
                    what="the once-rejected pod bound after a retry") == node
    assert (sched.metric("scheduler_permit_wait_duration_seconds_count", {"result": "Success"}) or 0) >= 2
    assert (sched.metric("scheduler_permit_wait_duration_seconds_count", {"result": "Unschedulable"}) or 0) >= 2
    assert sched.alive()


@pytest.mark.parametrize("point", ["filter", "score", "reserve", "permit", "preBind"])
def test_a_plugin_that_raises_fails_its_pod_and_nothing_else(
        point, plugin_site, nodes, core_v1, api_client, namespace, run_kubesched):
    install_test_plugin(plugin_site, "raising", "Raising")
    set_taints(core_v1, nodes(2, zones=0))
    scheduler = f"raising-{uuid.uuid4().hex[:4]}"
    sched = run_kubesched({"profiles": [{"schedulerName": scheduler,
                                         "plugins": {"multiPoint": {"enabled": [{"name": "Raising"}]}}}]})
    core_v1.create_namespaced_pod(namespace, pod("buggy", scheduler, labels={"raise-in": point}),
                                  _preload_content=False)
    core_v1.create_namespaced_pod(namespace, pod("plain", scheduler), _preload_content=False)
    assert wait_for(lambda: read(core_v1, namespace, "plain")["spec"].get("nodeName"), 15, what="plain bound")
    snake = "".join("_" + c.lower() if c.isupper() else c for c in point)
    # An error status, retried with backoff: the same FailedScheduling again, the pod still Pending.
    notes = wait_for(lambda: failed_scheduling(api_client, namespace, "buggy"), 15,
                     what="FailedScheduling for the buggy pod")
    assert f'plugin "Raising" failed in {snake}: ZeroDivisionError: a bug in {point}' in notes[0]
    buggy = read(core_v1, namespace, "buggy")
    assert not buggy["spec"].get("nodeName")
    condition = next(c for c in buggy["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["reason"] == "SchedulerError"
    wait_for(lambda: sched.log().count(f'"Out-of-tree plugin raised" plugin="Raising" extensionPoint="{snake}"') >= 2,
             20, what="a second, logged attempt")
    assert sched.alive()
