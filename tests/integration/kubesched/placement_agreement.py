"""Placement agreement between kubesched and the pinned kube-scheduler on three workloads:
dedicated nodes (selectors, affinity, tolerations), resources, and spreading (20 equal pods
over 5 equal nodes).

For each workload: create the nodes, start one scheduler, create the pods one at a time (same
specs, same order), each once the previous one is bound or reported unschedulable, record
where each pod went and the FailedScheduling message, delete the pods, and repeat with the
other scheduler.

    .venv/bin/python tests/integration/kubesched/placement_agreement.py [--workload dedicated ...]

Among equally scored nodes both schedulers take the root of a heap over the feasible nodes,
whose order in kube-scheduler depends on which parallel filter finishes first, so the report
gives exact agreement and, for spreading, the per-node counts, which must match.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from lab.binaries import binary  # noqa: E402 - after the path that makes lab importable as a script

KUBECONFIG = str(ROOT / ".lab" / "admin.kubeconfig")
KUBE_SCHEDULER = binary("kube-scheduler")
KUBESCHED = str(ROOT / ".venv" / "bin" / "kubesched")
PAUSE = "registry.k8s.io/pause:3.10"


def container(cpu: str = "", memory: str = "", **extra) -> dict:
    c = {"name": extra.pop("name", "c"), "image": PAUSE, **extra}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        c["resources"] = {"requests": requests}
    return c


def term(*expressions: tuple) -> dict:
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": vals} if vals else {})}
                                 for k, op, vals in expressions]}


def required(*expressions: tuple) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        term(*expressions)]}}}


def dedicated() -> tuple[list[dict], list[dict]]:
    """Dedicated nodes: taints, tolerations, selectors, every affinity operator."""
    nodes = [
        {"name": "blue", "labels": {"color": "blue", "size": "Large", "gen": "5"},
         "taints": [{"key": "app", "value": "blue", "effect": "NoSchedule"}]},
        {"name": "large-a", "labels": {"size": "Large", "gen": "3", "ssd": "true"}},
        {"name": "large-b", "labels": {"size": "Large", "gen": "4"}},
        {"name": "small-a", "labels": {"size": "Small", "gen": "2", "ssd": "true"}},
        {"name": "soft", "labels": {"size": "Small", "gen": "1"},
         "taints": [{"key": "soft", "effect": "PreferNoSchedule"}]},
        {"name": "plain", "labels": {"gen": "6"}},
    ]
    tolerate_blue = [{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}]
    pods = [
        {"name": "blue-dedicated", "tolerations": tolerate_blue, "affinity": required(("color", "In", ["blue"]))},
        {"name": "no-toleration-blue-affinity", "affinity": required(("color", "In", ["blue"]))},
        {"name": "selector-large", "nodeSelector": {"size": "Large"}},
        {"name": "notin-large", "affinity": required(("size", "NotIn", ["Large"]))},
        {"name": "exists-ssd", "affinity": required(("ssd", "Exists", None))},
        {"name": "doesnotexist-size", "affinity": required(("size", "DoesNotExist", None))},
        {"name": "gt-gen-3", "affinity": required(("gen", "Gt", ["3"]))},
        {"name": "lt-gen-3", "affinity": required(("gen", "Lt", ["3"]))},
        {"name": "preferred-small", "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": term(("size", "In", ["Small"]))}]}}},
        {"name": "tolerate-everything", "tolerations": [{"operator": "Exists"}],
         "affinity": required(("color", "In", ["blue"]))},
        {"name": "empty-effect", "tolerations": [{"key": "app", "operator": "Exists"}],
         "affinity": required(("gen", "Gt", ["4"]))},
        {"name": "prefer-no-schedule-a", "nodeSelector": {"size": "Small"}},
        {"name": "prefer-no-schedule-b", "nodeSelector": {"size": "Small"}},
        {"name": "nowhere", "nodeSelector": {"size": "Huge"}},
    ]
    return nodes, pods


def resources() -> tuple[list[dict], list[dict]]:
    """Resources in every quantity form, init containers, overhead, and pods that fit nowhere."""
    nodes = [{"name": f"r{i}", "cpu": cpu, "memory": mem} for i, (cpu, mem) in
             enumerate([("2", "4Gi"), ("4", "8Gi"), ("4", "16Gi"), ("8", "32Gi")])]
    pods = [
        {"name": "m100", "containers": [container("100m", "128Mi")]},
        {"name": "half", "containers": [container("0.5", "512Mi")]},
        {"name": "one-gi", "containers": [container("1", "1Gi")]},
        {"name": "decimal-g", "containers": [container("1500m", "1G")]},
        {"name": "exponent", "containers": [container("1e0", "1e9")]},
        {"name": "init-big", "initContainers": [container("3", "1Gi", name="init")],
         "containers": [container("500m", "256Mi")]},
        {"name": "sidecar", "initContainers": [container("1", "512Mi", name="side", restartPolicy="Always")],
         "containers": [container("1", "512Mi")]},
        {"name": "too-much-cpu", "containers": [container("16", "1Gi")]},
        {"name": "too-much-memory", "containers": [container("1", "64Gi")]},
        *({"name": f"fill-{i}", "containers": [container("1", "2Gi")]} for i in range(8)),
    ]
    return nodes, pods


def spread() -> tuple[list[dict], list[dict]]:
    nodes = [{"name": f"eq{i}"} for i in range(5)]
    pods = [{"name": f"spread-{i:02d}"} for i in range(20)]
    return nodes, pods


WORKLOADS = {"dedicated": dedicated, "resources": resources, "spread": spread}


# Other tests may add nodes to the shared lab meanwhile; every pod also selects this label, so
# only the workload's own nodes can be feasible (a nodeSelector filters, it does not score).
WORKLOAD_LABEL = "kubesched.io/placement-run"


def create_nodes(core_v1, prefix: str, nodes: list[dict]) -> list[str]:
    """The workload's kwok nodes, named <prefix><name>0, once Ready with only their own taints."""
    from lab.fake_nodes import create_nodes as create_kwok_nodes

    names = []
    for spec in nodes:
        labels = {**(spec.get("labels") or {}), WORKLOAD_LABEL: prefix.rstrip("-")}
        names += create_kwok_nodes(core_v1, 1, prefix=f"{prefix}{spec['name']}", cpu=spec.get("cpu", "4"),
                                   memory=spec.get("memory", "16Gi"), zones=0, labels=labels,
                                   taints=spec.get("taints"))
    return names


def pod_body(spec: dict, scheduler_name: str, run: str) -> dict:
    spec = dict(spec)
    name = spec.pop("name")
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), WORKLOAD_LABEL: run}
    spec.setdefault("containers", [container()])
    spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def run_scheduler(kind: str, scheduler_name: str, workdir: Path) -> subprocess.Popen:
    config = workdir / f"{kind}.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": KUBECONFIG}, "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name}]}))
    binary = KUBESCHED if kind == "kubesched" else KUBE_SCHEDULER
    args = [binary, "--config", str(config), "--secure-port", "0", "-v=2"]
    if kind == "kubesched":
        args += ["--bind-address", "127.0.0.1"]
    return subprocess.Popen(args, stdout=open(workdir / f"{kind}.log", "w"), stderr=subprocess.STDOUT)


def outcome(core_v1, namespace: str, names: list[str], only: str = "", timeout: float = 30.0) -> dict[str, dict]:
    """Where each named pod went ("" and the message when unschedulable), once all are decided."""
    deadline = time.monotonic() + timeout
    while True:
        items = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
        result = {}
        for pod in items:
            if only and pod["metadata"]["name"] != only:
                continue
            node = pod["spec"].get("nodeName") or ""
            cond = next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), {})
            if node or cond.get("status") == "False":
                result[pod["metadata"]["name"]] = {"node": node, "message": "" if node else cond.get("message", "")}
        if len(result) == len(names) or time.monotonic() > deadline:
            return result
        time.sleep(0.3)


def delete_pods(core_v1, namespace: str, names: list[str]) -> None:
    """Remove the pods at once (grace period 0) between one scheduler's run and the next."""
    for name in names:
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False)
    deadline = time.monotonic() + 30
    while json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]:
        if time.monotonic() > deadline:
            raise RuntimeError("pods were not deleted within 30s")
        time.sleep(0.2)


def compare(workload: str, core_v1, workdir: Path) -> dict:
    nodes, pods = WORKLOADS[workload]()
    tag = uuid.uuid4().hex[:5]
    prefix = f"pa{tag}-"
    namespace = f"placement-{workload.lower()}-{tag}"
    scheduler_name = f"placement-{tag}"
    core_v1.create_namespace({"metadata": {"name": namespace}}, _preload_content=False)
    from lab.namespaces import wait_for_default_service_account

    wait_for_default_service_account(core_v1, namespace)
    node_names = create_nodes(core_v1, prefix, nodes)
    results = {}
    try:
        for kind in ("kube-scheduler", "kubesched"):
            proc = run_scheduler(kind, scheduler_name, workdir)
            try:
                time.sleep(3)  # caches synced; pods then arrive one by one, as users create them
                results[kind] = {}
                for spec in pods:
                    core_v1.create_namespaced_pod(namespace, pod_body(spec, scheduler_name, prefix.rstrip("-")),
                                                  _preload_content=False)
                    results[kind].update(outcome(core_v1, namespace, [spec["name"]], only=spec["name"]))
            finally:
                proc.terminate()
                proc.wait(15)
            delete_pods(core_v1, namespace, [p["name"] for p in pods])
    finally:
        from lab.fake_nodes import delete_nodes

        delete_nodes(core_v1, node_names)
        core_v1.delete_namespace(namespace, _preload_content=False)
    upstream, ours = results["kube-scheduler"], results["kubesched"]
    names = [p["name"] for p in pods]
    same_node = [n for n in names if n in upstream and n in ours and upstream[n]["node"] == ours[n]["node"]]
    same_outcome = [n for n in names if n in upstream and n in ours
                    and bool(upstream[n]["node"]) == bool(ours[n]["node"])
                    and (upstream[n]["node"] or upstream[n]["message"] == ours[n]["message"])]
    strip = len(prefix)
    return {
        "workload": workload, "pods": len(names),
        "same_node": len(same_node), "same_outcome": len(same_outcome),
        "per_node_counts": {k: sorted(Counter(r[n]["node"][strip:] for n in names if n in r).items())
                            for k, r in results.items()},
        "upstream_placements": {n: (upstream.get(n) or {}).get("node", "")[strip:] for n in names},
        "differences": {n: {k: (results[k].get(n) or {}).get("node", "")[strip:] or
                            (results[k].get(n) or {}).get("message", "missing") for k in results}
                        for n in names if n not in same_node},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--workdir", default="/tmp/kubesched-placement")
    args = parser.parse_args(argv)
    from kubernetes import client, config

    config.load_kube_config(KUBECONFIG)
    core_v1 = client.CoreV1Api()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    reports = [compare(w, core_v1, workdir) for w in args.workload or sorted(WORKLOADS)]
    print(json.dumps(reports, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
