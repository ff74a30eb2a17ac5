"""Fake nodes for the lab: Node objects with capacity, allocatable, labels and a Ready
condition. No kubelet runs; a pod counts as scheduled once it is bound.

    .venv/bin/python -m lab.fake_nodes --count 1000 --prefix node-
    .venv/bin/python -m lab.fake_nodes --delete
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

FAKE_NODE_LABEL = "kubesched.io/fake-node"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEFAULT_KUBECONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  ".lab", "admin.kubeconfig")


def core_v1_from_kubeconfig(path: str = DEFAULT_KUBECONFIG, pool_size: int = 32):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size
    return client.CoreV1Api(client.ApiClient(configuration))


def node_manifest(name: str, cpu: str = "4", memory: str = "16Gi", pods: int = 110,
                  zone: str | None = None, labels: dict | None = None,
                  taints: list | None = None, ephemeral_storage: str = "100Gi",
                  extended: dict | None = None, images: list | None = None,
                  unschedulable: bool = False) -> dict:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", FAKE_NODE_LABEL: "true"}
    if zone:
        node_labels[ZONE_LABEL] = zone
    node_labels.update(labels or {})
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": ephemeral_storage}
    capacity.update(extended or {})
    spec: dict = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node (kubesched lab)", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
            "images": images or [],
            "nodeInfo": {"kubeletVersion": "v1.37.1-fake", "operatingSystem": "linux",
                         "architecture": "amd64", "containerRuntimeVersion": "fake://1",
                         "kernelVersion": "", "osImage": "kubesched lab", "kubeProxyVersion": "",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    }


def _create_one(core_v1, body: dict) -> None:
    resp = core_v1.create_node(body=body, _preload_content=False)
    created = json.loads(resp.data)
    # The API server keeps status on create, but make sure allocatable is there.
    if not (created.get("status") or {}).get("allocatable"):
        core_v1.patch_node_status(body["metadata"]["name"], {"status": body["status"]},
                                  _preload_content=False)


def create_nodes(core_v1, count: int, prefix: str = "node-", cpu: str = "4",
                 memory: str = "16Gi", pods: int = 110, zones: int = 3,
                 labels: dict | None = None, taints: list | None = None,
                 workers: int = 16, **extra) -> list[str]:
    """Create count nodes named <prefix>0..; zones spread them round-robin over zone-0.. ."""
    names = [f"{prefix}{i}" for i in range(count)]
    bodies = [node_manifest(name, cpu=cpu, memory=memory, pods=pods,
                            zone=f"zone-{i % zones}" if zones else None,
                            labels=labels, taints=taints, **extra)
              for i, name in enumerate(names)]
    with ThreadPoolExecutor(max_workers=min(workers, max(1, count))) as pool:
        list(pool.map(lambda b: _create_one(core_v1, b), bodies))
    return names


def delete_nodes(core_v1, names: list[str] | None = None, workers: int = 16) -> int:
    """Delete the named nodes, or every node when names is None. Returns how many."""
    if names is None:
        resp = core_v1.list_node(_preload_content=False)
        names = [n["metadata"]["name"] for n in json.loads(resp.data)["items"]]

    def delete(name: str) -> None:
        from kubernetes.client.rest import ApiException

        try:
            core_v1.delete_node(name, grace_period_seconds=0, _preload_content=False)
        except ApiException as err:
            if err.status != 404:
                raise

    with ThreadPoolExecutor(max_workers=min(workers, max(1, len(names)))) as pool:
        list(pool.map(delete, names))
    return len(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--prefix", default="node-")
    parser.add_argument("--cpu", default="4")
    parser.add_argument("--memory", default="16Gi")
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--delete", action="store_true", help="delete every node instead")
    args = parser.parse_args(argv)
    if not os.path.exists(args.kubeconfig):
        print(f"fake_nodes: {args.kubeconfig} does not exist; run 'make lab-up' first", file=sys.stderr)
        return 1
    core_v1 = core_v1_from_kubeconfig(args.kubeconfig)
    start = time.monotonic()
    if args.delete:
        n = delete_nodes(core_v1)
        print(f"deleted {n} nodes in {time.monotonic() - start:.1f} s")
        return 0
    labels = {}
    for item in args.label:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--label {item!r}: expected KEY=VALUE")
        labels[key] = value
    create_nodes(core_v1, args.count, prefix=args.prefix, cpu=args.cpu, memory=args.memory,
                 pods=args.pods, zones=args.zones, labels=labels)
    print(f"created {args.count} nodes in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
