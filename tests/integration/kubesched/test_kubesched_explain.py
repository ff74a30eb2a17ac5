"""`kubesched explain` on the lab: a pending pod (every node's verdict and the scores), a pod
with a ResourceClaim (its requests and the devices of each node), a pod with a claim on a
WaitForFirstConsumer class (the claim and the volumes it may bind), and the errors an operator
meets: an unreachable server, a missing pod, no kubeconfig at all (each one line, no traceback).
Where explain says which node is feasible, the pinned kube-scheduler then places the pod there.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubesched_lab import KUBESCHED, ROOT, node_of, pod_manifest, wait_for, write_unreachable_kubeconfig
from test_kubesched_volumes import Storage, claim, claim_pod

from lab.binaries import binary
from lab.fake_dra_driver import DRIVER, device_class, gpu_slice

KUBE_SCHEDULER = binary("kube-scheduler")
GROUP, VERSION = "resource.k8s.io", "v1"


def explain(*args: str, env: dict | None = None) -> tuple[int, str, str]:
    done = subprocess.run([str(KUBESCHED), "explain", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env, check=False)
    return done.returncode, done.stdout, done.stderr


def config_for(tmp_path: Path, scheduler_name: str, kubeconfig: str | None = None) -> str:
    """A configuration with one profile named scheduler_name, which no running scheduler serves."""
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": scheduler_name}]}
    if kubeconfig:
        doc["clientConnection"] = {"kubeconfig": kubeconfig}
    path = tmp_path / f"{scheduler_name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def rows_of(table: str, prefix: str) -> dict[str, str]:
    return {line.split()[0]: line for line in table.splitlines() if line.startswith(prefix)}


@pytest.fixture
def upstream_scheduler(lab_kubeconfig, tmp_path):
    """start(name): the pinned kube-scheduler serving schedulerName name, stopped after the test."""
    started = []

    def start(name: str) -> None:
        config = config_for(tmp_path, f"{name}-upstream", lab_kubeconfig)
        text = yaml.safe_load(Path(config).read_text())
        text["profiles"][0]["schedulerName"] = name
        text["leaderElection"] = {"leaderElect": False}
        Path(config).write_text(yaml.safe_dump(text))
        log = open(tmp_path / "kube-scheduler.log", "w")  # noqa: SIM115 - closed with the process
        started.append((subprocess.Popen([KUBE_SCHEDULER, "--config", config, "--secure-port", "0", "-v=2"],
                                         stdout=log, stderr=subprocess.STDOUT), log))

    yield start
    for proc, log in started:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_a_pending_pod_gets_every_nodes_verdict_and_the_scores(nodes, core_v1, namespace, tmp_path, lab_kubeconfig):
    tainted = nodes(1, prefix="ex-tainted-", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])[0]
    small, big = nodes(1, prefix="ex-small-", cpu="1") + nodes(1, prefix="ex-big-", cpu="8")
    twin = nodes(1, prefix="ex-twin-", cpu="8")[0]
    name = f"explain-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespaced_pod(namespace, pod_manifest("pending", schedulerName=name, containers=[
        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "2"}}}]),
        _preload_content=False)
    code, out, err = explain(f"{namespace}/pending", "--config", config_for(tmp_path, name, lab_kubeconfig))
    assert code == 0, err
    nodes_table, scores_table = out.split("Scores of feasible nodes")
    rows = rows_of(nodes_table, "ex-")
    assert "TaintToleration" in rows[tainted] and "untolerated taint(s)" in rows[tainted]
    assert "NodeResourcesFit" in rows[small] and "Insufficient cpu" in rows[small]
    assert "feasible" in rows[big] and "feasible" in rows[twin]
    assert big in scores_table and "NodeResourcesFit" in scores_table
    assert small not in scores_table and tainted not in scores_table
    # Two equal nodes tie: the note says how v1.37 settles it, and that it is not at random.
    assert "Equal totals: v1.37 draws no random number between them" in scores_table
    assert "at random" not in out


def test_a_pod_with_a_resource_claim_gets_its_requests_and_each_nodes_devices(
        nodes, core_v1, api_client, namespace, tmp_path, lab_kubeconfig, upstream_scheduler):
    from kubernetes import client

    dra = client.CustomObjectsApi(api_client)
    tag = uuid.uuid4().hex[:5]
    two, eight = nodes(1, prefix=f"ex{tag}-two-", zones=0) + nodes(1, prefix=f"ex{tag}-eight-", zones=0)
    gpu_class = f"gpu-{tag}.{DRIVER}"
    created = [("deviceclasses", device_class(gpu_class, DRIVER)),
               ("resourceslices", gpu_slice(two, 2)), ("resourceslices", gpu_slice(eight, 8))]
    for plural, body in created:
        dra.create_cluster_custom_object(GROUP, VERSION, plural, body)
    try:
        dra.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {"name": "four-gpus"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": gpu_class, "allocationMode": "ExactCount", "count": 4}}]}}})
        name = f"explain-dra-{tag}"
        core_v1.create_namespaced_pod(namespace, pod_manifest(
            "trainer", schedulerName=name, resourceClaims=[{"name": "gpu", "resourceClaimName": "four-gpus"}]),
            _preload_content=False)
        code, out, err = explain(f"{namespace}/trainer", "--config", config_for(tmp_path, name, lab_kubeconfig))
        assert code == 0, err
        rows = rows_of(out.split("Resource claims:")[0], f"ex{tag}-")
        assert "DynamicResources" in rows[two] and "cannot allocate all claims" in rows[two]
        assert "feasible" in rows[eight]
        claims = out.split("Resource claims:")[1].split("Scores of feasible nodes")[0]
        assert f"gpu: ResourceClaim {namespace}/four-gpus: not allocated yet" in claims
        assert f"request gpus: 4 device(s) of class {gpu_class}" in claims
        by_node = {line.split()[0]: line.split()[1] for line in claims.split("Devices per node")[1].splitlines()
                   if line.strip().startswith(f"ex{tag}-")}
        assert by_node == {two: "2/2", eight: "8/8"}, claims
        # The pinned kube-scheduler puts it where explain found room.
        upstream_scheduler(name)
        assert wait_for(lambda: node_of(core_v1, namespace, "trainer"), 60, what="trainer bound") == eight
        claim_obj = dra.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", "four-gpus")
        assert len(claim_obj["status"]["allocation"]["devices"]["results"]) == 4
    finally:
        core_v1.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for plural, body in reversed(created):
            dra.delete_cluster_custom_object(GROUP, VERSION, plural, body["metadata"]["name"])


def test_a_pod_with_a_claim_to_bind_gets_its_volumes(nodes, core_v1, api_client, namespace, tmp_path, lab_kubeconfig,
                                                     upstream_scheduler):
    storage = Storage(api_client, core_v1)
    try:
        tag = uuid.uuid4().hex[:5]
        holder, other = nodes(1, prefix=f"ex{tag}-pv-", zones=0) + nodes(1, prefix=f"ex{tag}-nopv-", zones=0)
        local = storage.storage_class()
        pv = storage.local_volume(local, holder)
        core_v1.create_namespaced_persistent_volume_claim(namespace, claim("data", local), _preload_content=False)
        name = f"explain-vol-{tag}"
        core_v1.create_namespaced_pod(namespace, claim_pod("db", name, "data"), _preload_content=False)
        code, out, err = explain(f"{namespace}/db", "--config", config_for(tmp_path, name, lab_kubeconfig))
        assert code == 0, err
        table, volumes = out.split("Volumes:")
        rows = rows_of(table, f"ex{tag}-")
        assert "VolumeBinding" in rows[other] and "didn't find available persistent volumes to bind" in rows[other]
        assert "feasible" in rows[holder]
        assert (f"claim {namespace}/data: Pending, storageClass {local} (WaitForFirstConsumer, provisioner "
                "kubernetes.io/no-provisioner), requests 1Gi ReadWriteOnce") in volumes
        assert (f"1 unbound PersistentVolume(s) of class {local}: {pv} (1Gi, kubernetes.io/hostname In "
                f"[{holder}])") in volumes
        upstream_scheduler(name)
        assert wait_for(lambda: node_of(core_v1, namespace, "db"), 60, what="db bound") == holder
    finally:
        core_v1.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        storage.cleanup()


def test_an_unreachable_server_is_one_line(tmp_path):
    kubeconfig = write_unreachable_kubeconfig(tmp_path / "kc")
    code, out, err = explain("default/web", "--kubeconfig", kubeconfig)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("kubesched: error: cannot reach the API server https://127.0.0.1:1: ")


def test_a_missing_pod_is_one_line(namespace, lab_kubeconfig):
    code, out, err = explain(f"{namespace}/missing", "--kubeconfig", lab_kubeconfig)
    assert (code, out, err) == (1, "", f"kubesched: error: pod {namespace}/missing not found\n")


def test_the_kubeconfig_comes_from_kubeconfig_then_home(nodes, core_v1, namespace, tmp_path, lab_kubeconfig):
    nodes(1, prefix="ex-home-")
    core_v1.create_namespaced_pod(namespace, pod_manifest("p", schedulerName="default-scheduler-nobody-runs"),
                                  _preload_content=False)
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home)}
    env.pop("KUBECONFIG", None)
    code, _out, err = explain(f"{namespace}/p", env=env)
    assert code == 1 and err.count("\n") == 1
    assert f"no kubeconfig found: {home}/.kube/config does not exist" in err
    code, out, err = explain(f"{namespace}/p", env={**env, "KUBECONFIG": f"{tmp_path}/absent:{lab_kubeconfig}"})
    assert code == 1 and "no profile of this configuration serves" in err  # it read the cluster
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(Path(lab_kubeconfig).read_text())
    code, out, err = explain(f"{namespace}/p", env=env)
    assert code == 1 and "no profile of this configuration serves" in err
