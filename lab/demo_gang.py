"""The demo's gang (docs/gang.md), run with PYTHONPATH at the repository root:

    python lab/demo_gang.py up         three GPU nodes (demo-node-gang-0..2, one nvidia.com/gpu each,
                                       tainted for the gang alone), PodGroup trainer (gang, minCount 4)
                                       and its four workers, each asking for one GPU (namespace
                                       demo-gang), afresh; exit 2 when the lab API server does not serve
                                       PodGroups (it was started without GenericWorkload)
    python lab/demo_gang.py waiting    until the scheduler has tried the group: none of the four bound,
                                       the PodGroup's condition says why; exit 1 when a worker was bound
                                       alone (a scheduler without the gate places them one by one)
    python lab/demo_gang.py add-node   a fourth GPU node joins (demo-node-gang-3)
    python lab/demo_gang.py started    until all four are bound; each worker, its node and when it was
                                       bound; exit 1 unless all four are bound, each on a node of its own
    python lab/demo_gang.py down       delete the namespace and the GPU nodes

The kubeconfig defaults to $LAB_DIR/admin.kubeconfig, as lab/demo.py's. The scheduler (kubesched
or kube-scheduler, as site.yml deployed it with scheduler_feature_gates GenericWorkload) places
the group; this script only creates objects and reads what the scheduler did.
"""

from __future__ import annotations

import argparse
import sys
import time

from lab.demo import default_kubeconfig, recreate_namespace, remove_namespace
from lab.fake_nodes import NodesNotReady, core_v1_from_kubeconfig, create_nodes, delete_nodes

NAMESPACE = "demo-gang"
GROUP_NAME = "trainer"
WORKERS = 4
NODE_PREFIX = "demo-node-gang-"
POOL = ("demo.kubesched.io/pool", "gang-gpu")
TAINT = {"key": "demo.kubesched.io/gang", "value": "true", "effect": "NoSchedule"}
GPU = "nvidia.com/gpu"
API = ("scheduling.k8s.io", "v1beta1", "podgroups")
CONDITION = "PodGroupInitiallyScheduled"


def pod_group() -> dict:
    return {"apiVersion": f"{API[0]}/{API[1]}", "kind": "PodGroup", "metadata": {"name": GROUP_NAME},
            "spec": {"schedulingPolicy": {"gang": {"minCount": WORKERS}}}}


def worker(index: int) -> dict:
    resources = {"cpu": "500m", "memory": "1Gi", GPU: "1"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{GROUP_NAME}-{index}", "labels": {"app": GROUP_NAME}},
            "spec": {"schedulingGroup": {"podGroupName": GROUP_NAME},
                     "nodeSelector": {POOL[0]: POOL[1]},
                     "tolerations": [{"key": TAINT["key"], "operator": "Exists", "effect": TAINT["effect"]}],
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "worker", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": resources, "limits": resources}}]}}


def add_gpu_nodes(core_v1, indices: list[int]) -> None:
    try:
        create_nodes(core_v1, max(indices) + 1, prefix=NODE_PREFIX, zones=0, labels=dict([POOL]), taints=[TAINT],
                     indices=indices, extended={GPU: "1"})
    except NodesNotReady as err:
        raise SystemExit(f"demo-gang: {err}") from None


def serves_pod_groups(custom) -> bool:
    from kubernetes.client.rest import ApiException

    try:
        custom.list_cluster_custom_object(*API, limit=1)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def cmd_up(core_v1, custom) -> int:
    if not serves_pod_groups(custom):
        print(f"demo-gang: skipped: the lab API server does not serve {API[0]}/{API[1]} {API[2]}: it was started "
              "without GenericWorkload (make demo starts it with the gate; 'make lab-down' first to restart it so)")
        return 2
    delete_nodes(core_v1, sorted(n.metadata.name for n in core_v1.list_node().items
                                 if n.metadata.name.startswith(NODE_PREFIX)))
    add_gpu_nodes(core_v1, list(range(WORKERS - 1)))
    recreate_namespace(core_v1, NAMESPACE)
    custom.create_namespaced_custom_object(*API[:2], NAMESPACE, API[2], pod_group())
    for index in range(WORKERS):
        core_v1.create_namespaced_pod(NAMESPACE, worker(index), _preload_content=False)
    print(f"demo-gang: PodGroup {NAMESPACE}/{GROUP_NAME} (minCount {WORKERS}) and {WORKERS} workers, one {GPU} each; "
          f"{WORKERS - 1} GPU nodes ({NODE_PREFIX}0..{WORKERS - 2}, one GPU each)")
    return 0


def workers(core_v1) -> list[dict]:
    """Per worker: node, and when the scheduler bound it or said it could not (PodScheduled)."""
    rows = []
    for pod in sorted(core_v1.list_namespaced_pod(NAMESPACE, label_selector=f"app={GROUP_NAME}").items,
                      key=lambda p: p.metadata.name):
        scheduled = next((c for c in pod.status.conditions or () if c.type == "PodScheduled"), None)
        rows.append({"pod": pod.metadata.name, "node": pod.spec.node_name or "",
                     "status": (scheduled.status if scheduled else "") or "",
                     "at": scheduled.last_transition_time if scheduled else None,
                     "message": (scheduled.message if scheduled else "") or ""})
    return rows


def group_condition(custom) -> dict | None:
    group = custom.get_namespaced_custom_object(*API[:2], NAMESPACE, API[2], GROUP_NAME)
    return next((c for c in (group.get("status") or {}).get("conditions") or () if c.get("type") == CONDITION), None)


def cmd_waiting(core_v1, custom, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = workers(core_v1)
        bound = [r["pod"] for r in rows if r["node"]]
        if bound:
            print(f"! {', '.join(bound)} bound while the group cannot have {WORKERS} GPUs: the scheduler places them "
                  "one by one (does it run with GenericWorkload?)")
            return 1
        condition = group_condition(custom)
        if condition is not None and len(rows) == WORKERS and all(r["status"] == "False" for r in rows):
            print(f"demo-gang: none of the {WORKERS} workers is bound. PodGroup {GROUP_NAME}: {CONDITION}="
                  f"{condition['status']} ({condition.get('reason')}): {condition.get('message')}")
            print(f"demo-gang: each worker says: {rows[0]['message']}")
            return 0
        time.sleep(0.5)
    print(f"demo-gang: the scheduler did not try the group within {timeout:.0f} s", file=sys.stderr)
    return 1


def cmd_add_node(core_v1) -> int:
    add_gpu_nodes(core_v1, [WORKERS - 1])
    print(f"demo-gang: {NODE_PREFIX}{WORKERS - 1} joined with one {GPU}")
    return 0


def problems(rows: list[dict]) -> list[str]:
    out = []
    if len(rows) != WORKERS:
        out.append(f"{len(rows)} workers, the group has {WORKERS}")
    out += [f"{r['pod']} is not bound" for r in rows if not r["node"]]
    nodes = [r["node"] for r in rows if r["node"]]
    if len(set(nodes)) != len(nodes):
        out.append("two workers share a node with one GPU")
    return out


def cmd_started(core_v1, custom, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    rows = workers(core_v1)
    while problems(rows) and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = workers(core_v1)
    width = max(len(r["pod"]) for r in rows) if rows else 3
    print(f"{'POD'.ljust(width)}  {'NODE'.ljust(len(NODE_PREFIX) + 1)}  BOUND AT (PodScheduled)")
    for r in rows:
        at = r["at"].strftime("%H:%M:%S") if r["at"] and r["node"] else ""
        print(f"{r['pod'].ljust(width)}  {(r['node'] or '-').ljust(len(NODE_PREFIX) + 1)}  {at}".rstrip())
    found = problems(rows)
    for text in found:
        print(f"! {text}")
    if found:
        return 1
    times = [r["at"] for r in rows]
    condition = group_condition(custom) or {}
    print(f"demo-gang: all {WORKERS} workers bound together, within {(max(times) - min(times)).total_seconds():.0f} s "
          f"of each other (the API's times are whole seconds); PodGroup {GROUP_NAME}: {CONDITION}="
          f"{condition.get('status')} ({condition.get('reason')})")
    return 0


def cmd_down(core_v1) -> int:
    remove_namespace(core_v1, NAMESPACE)
    names = sorted(n.metadata.name for n in core_v1.list_node().items if n.metadata.name.startswith(NODE_PREFIX))
    delete_nodes(core_v1, names)
    print(f"demo-gang: namespace {NAMESPACE} deleted, {len(names)} GPU nodes removed")
    return 0


def main(argv: list[str] | None = None) -> int:
    from kubernetes import client

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=default_kubeconfig())
    parser.add_argument("command", choices=("up", "waiting", "add-node", "started", "down"))
    parser.add_argument("--timeout", type=float, default=60, help="for waiting and started: seconds (default 60)")
    args = parser.parse_args(argv)
    core_v1 = core_v1_from_kubeconfig(args.kubeconfig)
    custom = client.CustomObjectsApi(core_v1.api_client)
    if args.command == "up":
        return cmd_up(core_v1, custom)
    if args.command == "waiting":
        return cmd_waiting(core_v1, custom, args.timeout)
    if args.command == "add-node":
        return cmd_add_node(core_v1)
    if args.command == "started":
        return cmd_started(core_v1, custom, args.timeout)
    return cmd_down(core_v1)


if __name__ == "__main__":
    sys.exit(main())
