"""Fake nodes for the lab, in two models.

kwok nodes (the default): Node objects annotated kwok.x-k8s.io/node=fake, created without
a Ready condition, as a node registers itself. kwok (started by lab/lab.sh) reports them
Ready and renews their Lease in kube-node-lease; the node lifecycle controller then lifts
the node.kubernetes.io/not-ready taint the API server's admission put on them, and would
taint them not-ready/unreachable if kwok stopped. Pods bound to them become Running, and a
deleted pod stays Terminating for its grace period. create_nodes waits until they are
Ready and carry only the taints asked for. With ready=False (--not-ready) their kubelet
reports NotReady (kwok still renews the Lease) until make_ready(), as a node whose
container network is not up yet; make_not_ready() does that to a Ready node.

static nodes (--static, static=True): Node objects that say Ready once, with no one behind
them: no heartbeat load, so a benchmark can have thousands. The not-ready admission taint
is lifted here. Use them on a lab without the node lifecycle controller (the benchmark's
LAB_KCM_CONTROLLERS): on a full lab that controller marks them unreachable after its
node-monitor-grace-period (50 s), as it would a silent kubelet.

    .venv/bin/python -m lab.fake_nodes --count 3                  (what `make nodes COUNT=3` runs)
    .venv/bin/python -m lab.fake_nodes --count 5000 --static --prefix node-
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
from typing import Callable

FAKE_NODE_LABEL = "kubesched.io/fake-node"
ZONE_LABEL = "topology.kubernetes.io/zone"
# kwok's own convention: lab/lab.sh starts kwok with --manage-nodes-with-annotation-selector=this.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# While a kwok node carries this annotation, lab/kwok-stages.yaml reports it NotReady.
NOT_READY_ANNOTATION = "kubesched.io/kubelet-not-ready"
# The taints the API server and the node lifecycle controller manage from node conditions.
CONDITION_TAINT_KEYS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
DEFAULT_KUBECONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  ".lab", "admin.kubeconfig")


class NodesNotReady(RuntimeError):
    """kwok nodes did not become Ready and untainted in time; the message says which and why."""


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
                  unschedulable: bool = False, static: bool = False, ready: bool = True) -> dict:
    """A Node: a kwok node (no conditions yet; kwok reports them) or, with static, one that
    says Ready once (or, with ready=False, NotReady: a kubelet that cannot run pods)."""
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
    metadata: dict = {"name": name, "labels": node_labels}
    conditions = []
    if static:
        conditions = [{"type": "Ready", "status": "True" if ready else "False",
                       "reason": "KubeletReady" if ready else "KubeletNotReady",
                       "message": "static fake node (kubesched lab)", "lastHeartbeatTime": now,
                       "lastTransitionTime": now}]
    else:
        metadata["annotations"] = {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]}
        if not ready:
            metadata["annotations"][NOT_READY_ANNOTATION] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
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
    static = KWOK_NODE_ANNOTATION[0] not in (body["metadata"].get("annotations") or {})
    taints = (created.get("spec") or {}).get("taints") or []
    if static and not _node_state(body) and any(t.get("key") in CONDITION_TAINT_KEYS for t in taints):
        # TaintNodesByCondition admission tainted it not-ready; no kubelet will report, so
        # the node's own condition (Ready) stands for it.
        core_v1.patch_node(body["metadata"]["name"], {"spec": {"taints": body["spec"].get("taints")}},
                           _preload_content=False)


def _node_state(node: dict) -> str:
    """Why a node is not yet Ready and untainted, or "" when it is."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if not ready or ready.get("status") != "True":
        return f"Ready={ready.get('status') if ready else 'missing'}"
    condition_taints = sorted(t["key"] for t in (node.get("spec") or {}).get("taints") or []
                              if t.get("key") in CONDITION_TAINT_KEYS)
    return f"tainted {', '.join(condition_taints)}" if condition_taints else ""


def wait_until_ready(core_v1, names: list[str], timeout: float = 60.0) -> None:
    """Wait until every named node is Ready with no not-ready/unreachable taint: kwok has
    reported it and the node lifecycle controller has lifted the admission taint."""
    pending = set(names)
    deadline = time.monotonic() + timeout
    why: dict[str, str] = {}
    while pending:
        items = json.loads(core_v1.list_node(label_selector=f"{FAKE_NODE_LABEL}=true",
                                             _preload_content=False).data)["items"]
        by_name = {n["metadata"]["name"]: n for n in items}
        why = {name: _node_state(by_name[name]) if name in by_name else "deleted" for name in pending}
        pending = {name for name, state in why.items() if state}
        if not pending:
            return
        if time.monotonic() > deadline:
            sample = ", ".join(f"{name} ({why[name]})" for name in sorted(pending)[:5])
            raise NodesNotReady(
                f"{len(pending)} of {len(names)} kwok nodes not Ready and untainted after {timeout:.0f} s: {sample}. "
                "Ready=missing means kwok does not manage them: check 'make lab-status' and the lab's kwok.log; "
                "a not-ready taint that stays means kube-controller-manager's node lifecycle controller does not run "
                "(kube-controller-manager.log, LAB_KCM_CONTROLLERS).")
        time.sleep(0.2)


def create_nodes(core_v1, count: int, prefix: str = "node-", cpu: str = "4",
                 memory: str = "16Gi", pods: int = 110, zones: int = 3,
                 labels: dict | None = None, taints: list | None = None,
                 workers: int = 16, static: bool = False, ready: bool = True, wait: bool = True,
                 ready_timeout: float = 60.0, indices: list[int] | None = None,
                 extended_per_node: Callable[[int], dict] | None = None, **extra) -> list[str]:
    """Create count nodes named <prefix>0..; zones spread them round-robin over zone-0.. .

    kwok nodes unless static; with wait (the default) this returns once kwok nodes are
    Ready and carry exactly the taints asked for (wait_until_ready). ready=False: nodes
    that report NotReady (make_ready turns a kwok one Ready). indices: create only these
    of the count (a deleted node comes back as it was, in the same zone). extended_per_node(i):
    extended resources of the i-th node alone (scheduler_perf's node-with-extended-resource
    gives each node a resource of its own)."""
    chosen = range(count) if indices is None else indices
    names = [f"{prefix}{i}" for i in chosen]
    extended = extra.pop("extended", None) or {}
    bodies = [node_manifest(name, cpu=cpu, memory=memory, pods=pods,
                            zone=f"zone-{i % zones}" if zones else None,
                            labels=labels, taints=taints, static=static, ready=ready,
                            extended={**extended, **(extended_per_node(i) if extended_per_node else {})}, **extra)
              for i, name in zip(chosen, names)]
    with ThreadPoolExecutor(max_workers=min(workers, max(1, count))) as pool:
        list(pool.map(lambda b: _create_one(core_v1, b), bodies))
    if wait and ready and not static:
        wait_until_ready(core_v1, names, ready_timeout)
    return names


def make_ready(core_v1, name: str, timeout: float = 60.0) -> None:
    """The NotReady kwok node's kubelet recovers: kwok reports it Ready, and once the node
    lifecycle controller has lifted the not-ready taint this returns."""
    core_v1.patch_node(name, {"metadata": {"annotations": {NOT_READY_ANNOTATION: None}}}, _preload_content=False)
    wait_until_ready(core_v1, [name], timeout)


def make_not_ready(core_v1, name: str) -> None:
    """The Ready kwok node's kubelet reports NotReady from now on (kwok still renews its Lease):
    the node lifecycle controller taints it not-ready, NoSchedule and NoExecute."""
    core_v1.patch_node(name, {"metadata": {"annotations": {NOT_READY_ANNOTATION: "true"}}}, _preload_content=False)


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
    parser.add_argument("--static", action="store_true",
                        help="static nodes (Ready once, no heartbeat) for benchmarks with thousands of nodes")
    parser.add_argument("--not-ready", action="store_true",
                        help="kwok nodes whose kubelet reports NotReady until the annotation "
                             f"{NOT_READY_ANNOTATION} is removed")
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
    try:
        create_nodes(core_v1, args.count, prefix=args.prefix, cpu=args.cpu, memory=args.memory,
                     pods=args.pods, zones=args.zones, labels=labels, static=args.static,
                     ready=not args.not_ready)
    except NodesNotReady as err:
        print(f"fake_nodes: {err}", file=sys.stderr)
        return 1
    model = "static" if args.static else "kwok, Ready"
    print(f"created {args.count} nodes ({model}) in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
