"""Benchmark of `kubesched whatif` at scale: a what-if over an in-memory snapshot, no API server.

Not a test. Run it from the repository root:

    .venv/bin/python tests/bench/micro/whatif.py [--nodes 5000] [--running 10000] [--pending 20]

The cluster is upstream scheduler_perf's node-default nodes (4 cpu, 32Gi, 110 pods, three
zones) with `--running` pod-default pods bound round-robin and `--pending` pods not yet bound;
the change is the default profile's NodeResourcesFit scoring from LeastAllocated to
MostAllocated. what_if reads it through a client that serves the manifests as an API server's
lists would, and re-places every running pod under both configurations. It prints the wall
and CPU seconds of what_if and the process's peak RSS. `make bench` records the same run as
workload WhatIf/5000Nodes_10000Pods (`python -m tests.bench --workload WhatIf` runs it alone).

Where the time goes: `--profile FILE` writes a cProfile of what_if (function-call heavy code
looks slower under it than it is); `.venv/bin/py-spy record --format raw --function -o OUT --
.venv/bin/python tests/bench/micro/whatif.py` samples it instead, and
`tests.bench.profile.summarise(OUT)` sums the samples per function.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, ".")

from kubesched import gctuning  # noqa: E402
from kubesched.backend.informers import RESOURCES  # noqa: E402
from kubesched.config import parse_config  # noqa: E402
from kubesched.whatif import what_if  # noqa: E402
from tests.bench.workloads import WHATIF_MODE, WHATIF_SIZE  # noqa: E402

ZONES = ("zone-a", "zone-b", "zone-c")
BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def node_manifest(index: int) -> dict:
    """upstream scheduler_perf's node-default.yaml: 4 cpu, 32Gi, 110 pods, in one of three zones."""
    name = f"node-{index:05d}"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-uid-{index:05d}", "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[index % 3]}},
            "spec": {}, "status": {"allocatable": dict(capacity), "capacity": capacity}}


def pod_manifest(index: int, node: str | None) -> dict:
    """pod-default.yaml (100m cpu, 500Mi), created one second after the previous one; bound to
    node when one is given."""
    container = {"name": "pause", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
    spec: dict = {"containers": [container], "schedulerName": "default-scheduler", "priority": 0}
    if node:
        spec["nodeName"] = node
    created = datetime.fromtimestamp(1_767_225_600 + index, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"name": f"pod-{index:06d}", "namespace": "bench", "uid": f"pod-uid-{index:06d}", "resourceVersion": "1",
            "creationTimestamp": created, "labels": {"app": "bench"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


class SnapshotServer:
    """The client what_if reads through: each list is served whole from the manifests, at one
    resourceVersion, as JSON the way an API server's answer is decoded."""

    def __init__(self, objects: dict[str, list[dict]]):
        self.by_path = {RESOURCES[resource].path: items for resource, items in objects.items()}

    def get(self, path: str, params: dict | None = None) -> dict:
        items = json.loads(json.dumps(self.by_path.get(path, [])))
        return {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1000"}, "items": items}


def cluster(nodes: int, running: int, pending: int) -> SnapshotServer:
    names = [node_manifest(i) for i in range(nodes)]
    pods = [pod_manifest(i, names[i % nodes]["metadata"]["name"]) for i in range(running)]
    pods += [pod_manifest(running + i, None) for i in range(pending)]
    return SnapshotServer({"nodes": names, "pods": pods})


def configs() -> tuple:
    current = parse_config({**BASE, "profiles": [{"schedulerName": "default-scheduler"}]}, source="current")
    new = parse_config({**BASE, "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}]}, source="new")
    return current, new


def run(nodes: int = WHATIF_SIZE["nodes"], running: int = WHATIF_SIZE["running"],
        pending: int = WHATIF_SIZE["pending"]) -> dict:
    """One what-if over a generated cluster; the record `make bench` keeps (without the load
    it was measured under, which tests/bench/cli.py adds)."""
    gctuning.tune()  # as the kubesched process does
    server = cluster(nodes, running, pending)
    current, new = configs()
    cpu_start, started = time.process_time(), time.perf_counter()
    report = what_if(current, new, server)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_start
    replacement = report["replacement"]
    return {
        "workload": f"WhatIf/{nodes}Nodes_{running}Pods",
        "mode": WHATIF_MODE,
        "scheduler": "kubesched",
        "qps_profile": WHATIF_MODE,
        "nodes": nodes,
        "pods": running + pending,
        "running": running,
        "pending": pending,
        "replaced": replacement["pods"],
        "moved": replacement["moved"],
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "complete": replacement["pods"] == running and len(report["pending"]) == pending,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=WHATIF_SIZE["nodes"])
    parser.add_argument("--running", type=int, default=WHATIF_SIZE["running"])
    parser.add_argument("--pending", type=int, default=WHATIF_SIZE["pending"])
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of what_if to FILE")
    opts = parser.parse_args()
    if opts.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        record = run(opts.nodes, opts.running, opts.pending)
        profiler.disable()
        profiler.dump_stats(opts.profile)
    else:
        record = run(opts.nodes, opts.running, opts.pending)
    print(f"nodes={record['nodes']} running={record['running']} pending={record['pending']} "
          f"moved={record['moved']} complete={record['complete']}")
    print(f"wall_s={record['wall_s']} cpu_s={record['cpu_s']} peak_rss_mb={record['peak_rss_mb']:.0f}")


if __name__ == "__main__":
    main()
