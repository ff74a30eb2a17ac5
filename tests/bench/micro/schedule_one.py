"""Micro-benchmark of kubesched's scheduling cycle: schedule_one over a fake cache, no API server.

Not a test. Run it from the repository root:

    .venv/bin/python tests/bench/micro/schedule_one.py [--nodes 5000] [--pods 3000] [--workload basic|affinity|spread]
        [--feature-gates GenericWorkload=true]

It registers the nodes with the scheduler's informer handlers (as the node watch would),
then schedules pods one by one with the default profile; binds go to a client that
answers at once. With --watch-lag N, each binding comes back as the pod watch's update
N pods later (as on a real API server, where confirmations trail the scheduling loop and
change nodes the next cycles look at). It prints the mean CPU and wall milliseconds per pod of the scheduling
cycles (warm-up pods excluded) and how many nodes each cycle evaluated.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from typing import Any

sys.path.insert(0, ".")

from kubesched import features  # noqa: E402
from kubesched.config import parse_config  # noqa: E402
from kubesched.framework.types import PodInfo  # noqa: E402
from kubesched.scheduler import Scheduler  # noqa: E402
from tests.bench.loop import NullClient  # noqa: E402

ZONES = ("zone-a", "zone-b", "zone-c")


def node_manifest(index: int, workload: str) -> dict:
    """upstream scheduler_perf's node-default.yaml: 4 cpu, 32Gi, 110 pods, in one of three zones."""
    name = f"node-{index:05d}"
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[index % 3]}
    if workload == "affinity":
        labels["node-group"] = "group-1" if index % 2 == 0 else "group-2"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, "resourceVersion": "1"},
            "spec": {}, "status": {"allocatable": dict(capacity), "capacity": capacity}}


def pod_manifest(index: int, workload: str) -> dict:
    """pod-default.yaml (100m cpu, 500Mi); the affinity workload requires node-group=group-1, the
    spread workload spreads its pods over the zones with maxSkew 5 (scheduler_perf's
    TopologySpreading, as tests/bench/workloads.py builds it)."""
    container = {"name": "pause", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "default-scheduler", "priority": 0}
    if workload == "affinity":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "node-group", "operator": "In", "values": ["group-1"]}]}]}}}
    if workload == "spread":
        spec["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "bench"}}}]
    meta = {"name": f"pod-{index:06d}", "namespace": "bench", "uid": f"uid-{index:06d}", "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "bench"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--workload", choices=("basic", "affinity", "spread"), default="basic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--watch-lag", type=int, default=0, metavar="N",
                        help="deliver each binding as a pod update N pods later (0: never)")
    parser.add_argument("--feature-gates", action="append", default=[], metavar="GATES",
                        help="as kubesched's flag: what pods of no group pay for a gate (GenericWorkload=true)")
    opts = parser.parse_args()

    gates = features.parse_feature_gates(opts.feature_gates).enabled
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{}]}, feature_gates=gates)
    client = NullClient()
    sched = Scheduler(cfg, client, rng=random.Random(opts.seed), feature_gates=gates)
    for i in range(opts.nodes):
        sched.on_node_add(node_manifest(i, opts.workload))
    pods = [PodInfo(pod_manifest(i, opts.workload)) for i in range(opts.warmup + opts.pods)]
    by_name = {pod.name: pod for pod in pods}
    hosts: dict[str, int] = {}
    confirmed = 0

    def confirm(upto: int) -> None:
        nonlocal confirmed
        while confirmed < upto:
            name, node = client.bound[confirmed]
            old = by_name[name].raw
            new = dict(old, spec=dict(old["spec"], nodeName=node),
                       metadata=dict(old["metadata"], resourceVersion="2"))
            sched.on_pod_update(old, new)
            confirmed += 1

    def run(batch: list[PodInfo]) -> tuple[float, float]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for pod in batch:
            sched.schedule_one(pod)
            if opts.watch_lag:
                confirm(len(client.bound) - opts.watch_lag)
        sched.wait_for_binds(60)
        return time.process_time() - cpu0, time.perf_counter() - wall0

    run(pods[:opts.warmup])
    cpu, wall = run(pods[opts.warmup:])
    for info in sched.cache.dump().values():
        if info.pods:
            hosts[info.name] = len(info.pods)
    bound = sum(hosts.values())
    print(f"workload={opts.workload} nodes={opts.nodes} pods={opts.pods} (+{opts.warmup} warm-up) bound={bound} "
          f"nodes_used={len(hosts)} gates={','.join(f'{k}={v}' for k, v in sorted(gates.items())) or 'defaults'}")
    print(f"cpu_ms_per_pod={1000 * cpu / opts.pods:.3f} wall_ms_per_pod={1000 * wall / opts.pods:.3f} "
          f"pods_per_s={opts.pods / wall:.0f} peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
