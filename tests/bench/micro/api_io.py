"""Micro-benchmark of the scheduler's API I/O alone, without scheduling: what one pod's watch
events, binding and Scheduled event cost the scheduling process, in-process and with the
API children of kubesched/apiproc.py.

Not a test. Needs a real API server (a private lab's kubeconfig). Run from the repository root:

    .venv/bin/python tests/bench/micro/api_io.py --kubeconfig .lab-priv/admin.kubeconfig [--pods 2000]

It watches a fresh namespace's pods through an Informer (trimmed as kubesched trims them),
creates the pods from another thread (its CPU is left out), and for each pending pod the
informer reports, binds it and posts an event from a pool of 16 threads, as the binding
cycle does; it stops when every pod has come back bound. It prints the CPU milliseconds per
pod of this process (the scheduling process's share) and of the children, for both modes.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, ".")

from kubesched.apiproc import ApiProcesses  # noqa: E402
from kubesched.backend.informer import Informer  # noqa: E402
from kubesched.backend.trim import trim_pod  # noqa: E402
from kubesched.client import ApiClient, load_kubeconfig  # noqa: E402
from kubesched.events import micro_time  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def pod_body(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "api-io"}},
            "spec": {"schedulerName": "api-io-bench", "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}


def event_body(namespace: str, pod: dict) -> dict:
    meta = pod["metadata"]
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"generateName": meta["name"] + ".", "namespace": namespace},
            "eventTime": micro_time(), "reportingController": "api-io-bench", "reportingInstance": "bench",
            "action": "Binding", "reason": "Scheduled", "type": "Normal",
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": meta["name"],
                          "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            "note": f"Successfully assigned {namespace}/{meta['name']} to api-io-node"}


def children_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def run(kubeconfig: str, pods: int, remote: bool) -> dict:
    creds = load_kubeconfig(kubeconfig)
    admin = ApiClient(creds, qps=0, burst=0)
    namespace = f"api-io-{uuid.uuid4().hex[:6]}"
    admin.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    processes = ApiProcesses(creds, qps=0, burst=0) if remote else None
    if processes:
        client = processes.client(qps=0, burst=0, user_agent="api-io scheduler", watches=True)
    else:
        client = ApiClient(creds, qps=0, burst=0, pool_size=80)
    binder = ThreadPoolExecutor(max_workers=16)
    bound = threading.Event()
    seen_bound: set[str] = set()
    creator_cpu = [0.0]

    def bind(pod: dict) -> None:
        meta = pod["metadata"]
        client.bind(namespace, meta["name"], meta["uid"], "api-io-node")
        client.create_event(namespace, event_body(namespace, pod))

    def on_add(pod: dict) -> None:
        if not pod["spec"].get("nodeName"):
            binder.submit(bind, pod)

    def on_update(_old: dict, new: dict) -> None:
        if new["spec"].get("nodeName"):
            seen_bound.add(new["metadata"]["name"])
            if len(seen_bound) >= pods:
                bound.set()

    def create() -> None:
        for index in range(pods):
            admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod_body(f"p{index}"))
        creator_cpu[0] = time.thread_time()

    informer = Informer(client, f"/api/v1/namespaces/{namespace}/pods", name="pods", on_add=on_add,
                        on_update=on_update, on_delete=lambda pod: None, transform=trim_pod)
    stop = threading.Event()
    informer.start(stop)
    informer.synced.wait(30)
    child_pids = [processes.watcher.process.pid, processes.writer.process.pid] if processes else []
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    before_children = children_cpu(child_pids)
    started = time.monotonic()
    creator = threading.Thread(target=create)
    creator.start()
    finished = bound.wait(600)
    wall = time.monotonic() - started
    creator.join()
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    own = (after_self.ru_utime + after_self.ru_stime - before_self.ru_utime - before_self.ru_stime) - creator_cpu[0]
    children = children_cpu(child_pids) - before_children
    stop.set()
    binder.shutdown()
    if processes:
        processes.close()
    admin.request("DELETE", f"/api/v1/namespaces/{namespace}")
    return {"mode": "children" if remote else "in-process", "complete": finished, "pods": pods,
            "main_ms_per_pod": round(own / pods * 1000, 3), "children_ms_per_pod": round(children / pods * 1000, 3),
            "wall_s": round(wall, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--mode", choices=("both", "in-process", "children"), default="both")
    args = parser.parse_args()
    modes = {"both": (False, True), "in-process": (False,), "children": (True,)}[args.mode]
    print(f"load average {os.getloadavg()[0]:.2f}")
    for remote in modes:
        print(run(args.kubeconfig, args.pods, remote))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
