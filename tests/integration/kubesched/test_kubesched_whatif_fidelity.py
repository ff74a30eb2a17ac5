"""Does `kubesched whatif` predict what kube-scheduler itself does? On the lab, for thirteen
configuration changes at once (one profile each, on nodes of its own): pending pods held by
a scheduling gate, the what-if's prediction under the new configuration, then the pinned
kube-scheduler run with the new configuration, the gates lifted one pod at a time in the
what-if's queue order, and each pod's node compared with the prediction.

A tie the what-if reports (several nodes with the best total) agrees when kube-scheduler
takes any of the tied nodes: the two break ties differently (docs/whatif.md). Every other
difference fails the test; EXPLAINED would carry the reason for one we understand.
The extender (a configuration-wide change) rejects and favours only its own scenario's nodes,
so the other scenarios see it score every node alike. The DRA scenario's pods claim one GPU each
through a device class with a CEL selector; each node has one, so the second pod goes where the
first one's allocation left a device.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import ThreadingHTTPServer

import extender_server
import pytest
from conftest import KUBE_SCHEDULER
from kubesched_lab import API_VERSION, KubeschedProcess, free_port, write_config

from kubesched import whatif
from kubesched.client import load_kubeconfig
from kubesched.config import parse_config
from lab.fake_dra_driver import DRIVER, GROUP, VERSION, device_class, gpu_slice
from lab.fake_nodes import wait_until_ready

GATE = "kubesched.io/whatif-fidelity"
SCENARIO = "kubesched.io/whatif-scenario"
PAUSE = "registry.k8s.io/pause:3.10"
# pod -> why the what-if and kube-scheduler differ there (none known).
EXPLAINED: dict[str, str] = {}


def requests(cpu: str = "100m", gpu: int = 0) -> dict:
    resources = {"cpu": cpu}
    if gpu:
        resources["nvidia.com/gpu"] = str(gpu)
    return {"requests": resources, **({"limits": {"nvidia.com/gpu": str(gpu)}} if gpu else {})}


def most_allocated(**weights: int) -> dict:
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    resources += [{"name": name.replace("_", "/").replace("nvidia/com", "nvidia.com"), "weight": weight}
                  for name, weight in weights.items()]
    return {"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated", "resources": resources}}}]}


# Each scenario: its nodes (name suffix -> create_nodes keywords), the pods already running
# (node suffix, resources, labels), the gated pending pods (resources, extra spec), and what the
# new configuration changes in its profile (None: the profile is not in that configuration).
SCENARIOS: dict[str, dict] = {
    "most": {"nodes": {"a": {}, "b": {}, "c": {}},
             "running": [("a", requests("2")), ("b", requests("1"))],
             "pending": [{"resources": requests("500m")}, {"resources": requests("500m")},
                         {"resources": requests("1")}],
             "new": most_allocated()},
    "gpu": {"nodes": {x: {"extended": {"nvidia.com/gpu": "4"}} for x in "abc"},
            "running": [("a", requests("100m", gpu=1)), ("b", requests("2"))],
            "pending": [{"resources": requests("100m", gpu=1)}, {"resources": requests("100m", gpu=1)}],
            "new": most_allocated(nvidia_com_gpu=5)},
    "weight": {"nodes": {"a": {"labels": {"disk": "ssd"}}, "b": {}},
               "running": [("a", requests("3"))],
               "pending": [{"resources": requests("200m"), "affinity": {"nodeAffinity": {
                   "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
                       "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}],
               "new": {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5},
                                                         {"name": "NodeAffinity", "weight": 1}]}}}},
    "nofilter": {"nodes": {"a": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}, "b": {}},
                 "running": [("b", requests("3800m"))],
                 "pending": [{"resources": requests("500m")}],
                 "new": {"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}},
    "spread": {"nodes": {"a": {}, **{x: {"taints": [{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}]}
                                     for x in "bc"}},
               "running": [("a", requests("100m"), {"app": "spread-web"}), ("a", requests("100m"), {"app": "spread-web"}),
                           ("b", requests("3"))],
               "pending": [{"resources": requests("100m"), "labels": {"app": "spread-web"}},
                           {"resources": requests("100m"), "labels": {"app": "spread-web"}}],
               "service": "spread-web",
               "new": {"pluginConfig": [{"name": "PodTopologySpread", "args": {
                   "defaultingType": "List", "defaultConstraints": [
                       {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]}}]}},
    "percentage": {"nodes": {"a": {}, "b": {}},
                   "running": [("a", requests("1"))],
                   "pending": [{"resources": requests("100m")}],
                   "new": {"percentageOfNodesToScore": 50}},
    "added": {"nodes": {"a": {}, "b": {}},
              "running": [("b", requests("1"))],
              "pending": [{"resources": requests("100m")}],
              "current": None, "new": {}},
    "removed": {"nodes": {"a": {}},
                "running": [],
                "pending": [{"resources": requests("100m")}],
                "new": None},
    "affinity": {"nodes": {"a": {"labels": {"pool": "a"}}, "b": {"labels": {"pool": "b"}}},
                 "running": [("b", requests("2"))],
                 "pending": [{"resources": requests("500m")}, {"resources": requests("500m")}],
                 "new": {"pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}]}}}}]}},
    "ratio": {"nodes": {"a": {}, "b": {}, "c": {}},
              "running": [("b", requests("1500m"))],
              "pending": [{"resources": requests("1")}, {"resources": requests("1")}],
              "new": {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                  "type": "RequestedToCapacityRatio", "resources": [{"name": "cpu", "weight": 1}],
                  "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                         {"utilization": 100, "score": 10}]}}}}]}},
    # An extender added to the configuration: it rejects node c and favours node a.
    "extender": {"nodes": {"a": {}, "b": {}, "c": {}},
                 "running": [("a", requests("2"))],
                 "pending": [{"resources": requests("500m")}, {"resources": requests("500m")}],
                 "extender": {"reject": "c", "score": "a=10"},
                 "new": {}},
    # The claim is bound to a local volume on node a: VolumeBinding keeps the pod there; without it
    # (disabled) the pod goes where the resources say.
    "volume": {"nodes": {"a": {}, "b": {}},
               "running": [("a", requests("2"))],
               "pending": [{"resources": requests("500m"), "volumes": [
                   {"name": "data", "persistentVolumeClaim": {"claimName": "volume-data"}}]}],
               "volume_on": "a",
               "new": {"plugins": {"multiPoint": {"disabled": [{"name": "VolumeBinding"}]}}}},
    # Bin-packing pods with a GPU claim each: MostAllocated sends the first to the busy node, whose
    # one GPU it then holds, so the second must take the other node's.
    "dra": {"nodes": {"a": {}, "b": {}},
            "running": [("a", requests("2"))],
            "pending": [{"resources": requests("100m"), "claim": "dra-c0"},
                        {"resources": requests("100m"), "claim": "dra-c1"}],
            "gpus": 1,
            "new": most_allocated()},
}


def pod_body(name: str, profile: str, scenario: str, resources: dict, labels: dict | None = None,
             node: str = "", gated: bool = False, claim: str = "", **spec) -> dict:
    body_spec = {"schedulerName": profile, "nodeSelector": {SCENARIO: scenario},
                 "containers": [{"name": "c", "image": PAUSE, "resources": resources}], **spec}
    if node:
        body_spec["nodeName"] = node
    if claim:
        body_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        body_spec["containers"][0]["resources"] = {**resources, "claims": [{"name": "gpu"}]}
    if gated:
        body_spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": body_spec}


def decided(core_v1, namespace: str, name: str) -> str | None:
    """The pod's node, "" once kube-scheduler reported it unschedulable, None while undecided."""
    pod = json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"]
    condition = next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), {})
    # SchedulingGated is the API server's word for a gated pod, still there just after the gate is lifted.
    return "" if condition.get("status") == "False" and condition.get("reason") != "SchedulingGated" else None


def start_kube_scheduler(config: dict, tmp_path, lab_kubeconfig: str) -> KubeschedProcess:
    if not KUBE_SCHEDULER.exists():
        pytest.fail(f"{KUBE_SCHEDULER} is missing: run 'make setup' (lab/k8s-binaries.sh builds it).", pytrace=False)
    path = write_config(config, tmp_path, lab_kubeconfig)
    port = free_port()
    args = [str(KUBE_SCHEDULER), "--config", str(path), "--secure-port", str(port), "--bind-address", "127.0.0.1",
            "--authentication-kubeconfig", lab_kubeconfig, "--authorization-kubeconfig", lab_kubeconfig,
            "--authentication-skip-lookup", "-v=2"]
    process = KubeschedProcess(args, port, tmp_path / "kube-scheduler.log", name="kube-scheduler")
    process.wait_ready()
    return process


def start_extender(reject: str, score: str) -> ThreadingHTTPServer:
    args = extender_server.parser().parse_args(["--port", "0", "--reject", reject, "--score", score])
    server = ThreadingHTTPServer(("127.0.0.1", 0), extender_server.handler_for(extender_server.Extender(args)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def bind_local_volume(core_v1, namespace: str, name: str, node: str) -> str:
    """A local PersistentVolume on node and the claim `name` bound to it (by the PV controller)."""
    pv = f"{namespace}-{name}"
    core_v1.create_persistent_volume({"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "local": {"path": "/tmp"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}, _preload_content=False)
    core_v1.create_namespaced_persistent_volume_claim(namespace, {"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
        "resources": {"requests": {"storage": "1Gi"}}}}, _preload_content=False)
    deadline = time.monotonic() + 30
    while core_v1.read_namespaced_persistent_volume_claim(name, namespace).status.phase != "Bound":
        if time.monotonic() > deadline:
            pytest.fail(f"claim {namespace}/{name} not bound to {pv} within 30s", pytrace=False)
        time.sleep(0.1)
    return pv


def publish_gpus(custom, namespace: str, tag: str, node_name: dict) -> list[tuple[str, str]]:
    """The fake driver's GPUs on each node of a scenario that asks for them, a device class that
    selects them by a CEL selector, and the scenario's claims; the cluster-scoped objects made."""
    made = []
    cls = device_class(f"wf-{tag}.{DRIVER}", selectors=(f'device.attributes["{DRIVER}"].index == 0',))
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", cls)
    made.append(("deviceclasses", cls["metadata"]["name"]))
    for sid, scenario in SCENARIOS.items():
        if not scenario.get("gpus"):
            continue
        for suffix in scenario["nodes"]:
            body = gpu_slice(node_name[(sid, suffix)], scenario["gpus"])
            custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
            made.append(("resourceslices", body["metadata"]["name"]))
        for spec in scenario["pending"]:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {"name": spec["claim"]},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": cls["metadata"]["name"], "allocationMode": "ExactCount", "count": 1}}]}}})
    return made


def test_whatif_predicts_kube_scheduler_for_thirteen_config_changes(api_client, core_v1, nodes, namespace,
                                                                    lab_kubeconfig, tmp_path):
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    tag = uuid.uuid4().hex[:5]
    created: list[str] = []
    for sid, scenario in SCENARIOS.items():
        for suffix, kwargs in scenario["nodes"].items():
            created += nodes(1, prefix=f"{sid}-{tag}-{suffix}", zones=0, wait=False,
                             labels={**kwargs.get("labels", {}), SCENARIO: sid},
                             **{k: v for k, v in kwargs.items() if k != "labels"})
    wait_until_ready(core_v1, created)
    node_name = {(sid, suffix): f"{sid}-{tag}-{suffix}0" for sid, s in SCENARIOS.items() for suffix in s["nodes"]}
    rules = SCENARIOS["extender"]["extender"]
    extender = start_extender(f"extender-{tag}-{rules['reject']}", f"extender-{tag}-{rules['score']}")
    volumes: list[str] = []
    dra_objects: list[tuple[str, str]] = []
    try:
        volumes += [bind_local_volume(core_v1, namespace, f"{sid}-data", node_name[(sid, s["volume_on"])])
                    for sid, s in SCENARIOS.items() if s.get("volume_on")]
        dra_objects += publish_gpus(custom, namespace, tag, node_name)
        run_scenarios(core_v1, namespace, lab_kubeconfig, tmp_path, tag, node_name,
                      f"http://127.0.0.1:{extender.server_port}")
    finally:
        extender.shutdown()
        extender.server_close()
        for pv in volumes:
            core_v1.delete_persistent_volume(pv, _preload_content=False)
        for plural, name in dra_objects:
            custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)


def run_scenarios(core_v1, namespace: str, lab_kubeconfig: str, tmp_path, tag: str, node_name: dict,
                  extender_url: str) -> None:
    profile = {sid: f"wf-{sid}-{tag}" for sid in SCENARIOS}
    for sid, scenario in SCENARIOS.items():
        if scenario.get("service"):
            core_v1.create_namespaced_service(namespace, {"metadata": {"name": scenario["service"]}, "spec": {
                "selector": {"app": scenario["service"]}, "ports": [{"port": 80}]}}, _preload_content=False)
        for i, (suffix, resources, *labels) in enumerate(scenario["running"]):
            core_v1.create_namespaced_pod(namespace, pod_body(f"{sid}-run{i}", profile[sid], sid, resources,
                                                              *labels, node=node_name[(sid, suffix)]),
                                          _preload_content=False)
        for i, spec in enumerate(scenario["pending"]):
            spec = dict(spec)
            core_v1.create_namespaced_pod(namespace, pod_body(f"{sid}-p{i}", profile[sid], sid, spec.pop("resources"),
                                                              spec.pop("labels", None), gated=True, **spec),
                                          _preload_content=False)

    def configuration(which: str) -> dict:
        profiles = []
        for sid, scenario in SCENARIOS.items():
            change = scenario.get(which, {}) if which == "current" else scenario["new"]
            if change is not None:
                profiles.append({"schedulerName": profile[sid], **change})
        # nodeCacheCapable: an extender that answers with whole Nodes hands the score plugins fresh
        # nodes without their pods (upstream HTTPExtender.Filter), which would level every scenario.
        extenders = [{"urlPrefix": extender_url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                      "weight": 5, "nodeCacheCapable": True}] if which == "new" else []
        return {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": lab_kubeconfig}, "leaderElection": {"leaderElect": False},
                "profiles": profiles, "extenders": extenders}

    current, new = configuration("current"), configuration("new")
    client = whatif.ReadOnlyClient(load_kubeconfig(lab_kubeconfig), qps=0, burst=0)
    started = time.monotonic()
    report = whatif.what_if(parse_config(current, source="current"), parse_config(new, source="new"), client)
    predicted_in = time.monotonic() - started
    rows = [row for row in report["pending"] if row["pod"].startswith(f"{namespace}/")]
    assert len(rows) == sum(len(s["pending"]) for s in SCENARIOS.values())
    changed = {row["pod"].split("/")[1].split("-", 1)[0] for row in rows if row["current"]["node"] != row["new"]["node"]}
    # The scenarios change decisions, or agreeing would prove little.
    assert len(changed) >= 6, f"only {sorted(changed)} change a decision"

    upstream = start_kube_scheduler(new, tmp_path, lab_kubeconfig)
    try:
        outcomes = {}
        for row in rows:
            name = row["pod"].split("/")[1]
            core_v1.patch_namespaced_pod(name, namespace, [{"op": "remove", "path": "/spec/schedulingGates"}],
                                         _preload_content=False)
            if row["new"]["node"] is None and row["new"]["reason"].startswith("no profile"):
                continue  # no scheduler serves it: checked below, once the others are placed
            deadline = time.monotonic() + 20
            while (outcome := decided(core_v1, namespace, name)) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            outcomes[name] = outcome
        for row in rows:
            name = row["pod"].split("/")[1]
            if name not in outcomes:
                outcomes[name] = decided(core_v1, namespace, name) or ""
    finally:
        upstream.stop()

    differences = {}
    for row in rows:
        name = row["pod"].split("/")[1]
        prediction = row["new"]
        actual = outcomes[name]
        agrees = actual == (prediction["node"] or "") or actual in prediction.get("tied", ())
        if not agrees and name not in EXPLAINED:
            differences[name] = {"predicted": prediction, "kube-scheduler": actual or "unschedulable"}
    assert differences == {}, json.dumps(differences, indent=2)
    ties = sum(1 for row in rows if "tied" in row["new"])
    print(f"\nwhatif fidelity: {len(rows)} pods ({ties} on a tie) in {len(SCENARIOS)} scenarios agree with "
          "kube-scheduler; "
          f"decisions changed in {sorted(changed)}; prediction took {predicted_in:.2f}s")
