"""`--loop-only`: kubesched's scheduling loop alone, with the API work left out, so its own
ceiling is known whatever the API server and the cores beside it can do.

In one process, the watch events a run's API server would send are replayed into kubesched's
informer handlers: the workload's nodes (as the bench creates them, static), its bound init
pods, then every pending pod, each with the fields the API server adds. Then the scheduler's
own loop (Scheduler.run: pop, schedule_one, bind on a worker) runs on its thread against a
null API client whose bind returns at once, while this thread plays the informer: each
binding comes back as the pod update the watch would deliver, so the cache confirms assumed
pods as in a real run. No HTTP, no JSON, no event or status writes reach a server.

Measured: CPU seconds of the process over the run (the loop, the bind workers and the
confirmations: everything kubesched does in-process for these pods) and wall time from the
loop's start to the last binding, so pods/s is the loop's throughput on one core.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from kubesched import gctuning
from kubesched.config import parse_config
from kubesched.scheduler import Scheduler
from lab.fake_nodes import node_manifest
from tests.bench.schedulers import scheduler_config
from tests.bench.workloads import Workload, init_pod_bodies, node_names

LOOP_ONLY = "loop-only"  # the qps_profile of a loop-only record: no API server, no client limits


def unsupported_reason(workload: Workload) -> str | None:
    """None when the loop can replay the workload, else why not."""
    if workload.mode != "backlog":
        return "steady arrival measures latency from creation, which needs the API server"
    if workload.objects_before_pods is not None:
        return "its claims, volumes, devices or PodGroups come from informers the replay does not feed"
    if workload.operations:
        return "its churn and deletions go through the API server"
    if workload.priority_classes:
        return "preemption deletes victims through the API server"
    return None


class NullClient:
    """The API client the scheduling and binding cycles call: every call returns at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bound: list[tuple[str, str]] = []  # (pod name, node), in binding order

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        with self.lock:
            self.bound.append((name, node_name))

    def patch_pod_status(self, namespace: str, name: str, patch: dict) -> dict:
        return {}

    def create_event(self, namespace: str, event: dict, api: str = "events.k8s.io/v1") -> dict:
        return event

    def patch_event(self, namespace: str, name: str, patch: dict) -> dict:
        return {}

    def list(self, path: str, params: dict | None = None, page_size: int = 0) -> dict:
        return {"items": []}


def as_served(body: dict, namespace: str, index: int) -> dict:
    """A pod as the API server's watch delivers it: the fields admission and storage add."""
    meta = dict(body["metadata"], namespace=namespace, uid=f"loop-uid-{index:07d}", resourceVersion=str(index + 1),
                creationTimestamp="2026-01-01T00:00:00Z")
    spec = dict(body["spec"], priority=0, enableServiceLinks=True, preemptionPolicy="PreemptLowerPriority")
    return {**body, "metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": "Guaranteed"}}


def replayed_nodes(workload: Workload) -> list[dict]:
    nodes = []
    for group in workload.nodes:
        for i in range(group.count):
            node = node_manifest(f"{group.prefix}{i}", cpu=group.cpu, memory=group.memory, pods=group.pods,
                                 zone=f"zone-{i % group.zones}" if group.zones else None, labels=dict(group.labels),
                                 taints=[dict(taint) for taint in group.taints] or None, static=True,
                                 extended={group.resource_per_node.format(index=i): "1"}
                                 if group.resource_per_node else None)
            node["metadata"]["resourceVersion"] = "1"
            nodes.append(node)
    return nodes


def apart(function: Callable[..., dict], *args: Any) -> dict:
    """function(*args) in a fresh interpreter, so its peak RSS and CPU are its own."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(function, args)


def run_loop_apart(workload_name: str, scheduler_name: str, namespace: str,
                   feature_gates: dict[str, bool] | None = None) -> dict:
    """run_loop in a fresh interpreter."""
    return apart(_run_named, workload_name, scheduler_name, namespace, feature_gates)


def _run_named(workload_name: str, scheduler_name: str, namespace: str, feature_gates: dict[str, bool] | None) -> dict:
    from tests.bench.workloads import WORKLOADS

    return run_loop(next(w for w in WORKLOADS if w.name == workload_name), scheduler_name, namespace, feature_gates)


def run_loop(workload: Workload, scheduler_name: str, namespace: str,
             feature_gates: dict[str, bool] | None = None, timeout_s: float = 1800) -> dict:
    """Replay the workload into an in-process kubesched and schedule every pending pod."""
    config = scheduler_config("unused", scheduler_name, 5000, 5000)
    config.pop("clientConnection")
    client = NullClient()
    gctuning.tune()  # as the kubesched process does
    scheduler = Scheduler(parse_config(config, feature_gates=feature_gates), client, rng=random.Random(1),
                          feature_gates=feature_gates)
    for node in replayed_nodes(workload):
        scheduler.on_node_add(node)
    for index, body in enumerate(init_pod_bodies(workload, node_names(workload.nodes))):
        scheduler.on_pod_add(as_served(body, namespace, 10_000_000 + index))
    pending = {}
    for index in range(workload.pods):
        raw = as_served(workload.measured_pod(index, scheduler_name), namespace, index)
        pending[raw["metadata"]["name"]] = raw
        scheduler.on_pod_add(raw)

    gctuning.freeze_synced()  # the replayed lists are the synced caches
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop,), name="scheduling-loop", daemon=True)
    cpu_start, started = time.process_time(), time.perf_counter()
    loop.start()
    confirmed = 0
    deadline = started + timeout_s
    last_bind = started
    try:
        while confirmed < workload.pods and time.perf_counter() < deadline:
            with client.lock:
                fresh = client.bound[confirmed:]
            if not fresh:
                time.sleep(0.001)
                continue
            last_bind = time.perf_counter()
            for name, node in fresh:  # the watch's update of each bound pod
                old = pending[name]
                scheduler.on_pod_update(old, {**old, "spec": {**old["spec"], "nodeName": node},
                                              "metadata": {**old["metadata"], "resourceVersion": f"b{confirmed}"}})
                confirmed += 1
    finally:
        stop.set()
        loop.join(10)
        cpu = time.process_time() - cpu_start
        scheduler.shutdown(5)
    wall = last_bind - started
    bound = len(client.bound)
    return {
        "workload": workload.name,
        "mode": LOOP_ONLY,
        "scheduler": "kubesched",
        "nodes": workload.node_count,
        "pods": workload.pods,
        "bound": bound,
        "complete": bound >= workload.pods,
        "qps_profile": LOOP_ONLY,
        "qps": None,
        "burst": None,
        "pods_per_s": round(bound / wall, 1) if wall > 0 else None,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_pod": round(1000 * cpu / bound, 3) if bound else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "feature_gates": dict(scheduler.feature_gates),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
