"""Lab helpers (run with PYTHONPATH at the repository root) for `make demo` and the Molecule scenarios.

    python lab/demo.py nodes --prefix demo-node- --count 3   create the missing fake nodes
    python lab/demo.py delete-nodes --prefix demo-node-      delete the nodes with that prefix
    python lab/demo.py workloads                             the demo's S2, S3, S5, S6 pods, afresh
    python lab/demo.py wait                                  until each demo pod is bound or has a reason
    python lab/demo.py table                                 where each demo pod landed, and why
    python lab/demo.py delete-workloads                      remove the demo's namespaces
    python lab/demo.py remove-namespaces NS...               delete and finalize namespaces
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from lab.fake_nodes import core_v1_from_kubeconfig, create_nodes, delete_nodes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_KUBECONFIG = os.path.join(ROOT, ".lab", "admin.kubeconfig")


def existing_nodes(core_v1, prefix: str) -> set[str]:
    return {n.metadata.name for n in core_v1.list_node().items if n.metadata.name.startswith(prefix)}


def parse_label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"demo: --label {text!r}: expected KEY=VALUE")
    return key, value


def parse_taint(text: str) -> dict:
    spec, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise SystemExit(f"demo: --taint {text!r}: expected KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute")
    key, _unused, value = spec.partition("=")
    return {"key": key, "value": value, "effect": effect}


def cmd_nodes(core_v1, args) -> int:
    present = existing_nodes(core_v1, args.prefix)
    wanted = [f"{args.prefix}{i}" for i in range(args.count)]
    if all(name in present for name in wanted):
        print(f"nodes: {len(wanted)} present")
        return 0
    # create_nodes names them <prefix>0..count-1; remove partial leftovers first so the set is whole.
    delete_nodes(core_v1, sorted(present))
    create_nodes(core_v1, args.count, prefix=args.prefix, cpu=args.cpu, memory=args.memory,
                 labels=dict(parse_label(item) for item in args.label),
                 taints=[parse_taint(item) for item in args.taint] or None)
    print(f"nodes: created {args.count}")
    return 0


def cmd_delete_nodes(core_v1, args) -> int:
    names = sorted(existing_nodes(core_v1, args.prefix))
    delete_nodes(core_v1, names)
    print(f"nodes: deleted {len(names)}")
    return 0


DEMO_NAMESPACES = {"demo-s2": "S2 not-ready taint", "demo-s3": "S3 dedicated nodes",
                   "demo-s5": "S5 priority and preemption", "demo-s6": "S6/S7 second scheduler"}
PAUSE = "registry.k8s.io/pause:3.10"
HOSTNAME = "kubernetes.io/hostname"


def pod(name: str, scheduler: str = "default-scheduler", cpu: str | None = None, priority_class: str | None = None,
        node_selector: dict | None = None, tolerations: list | None = None, affinity: dict | None = None) -> dict:
    container: dict = {"name": "app", "image": PAUSE}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict = {"schedulerName": scheduler, "containers": [container],
                  # No kubelet runs in the lab: a zero grace period lets preemption victims go at once.
                  "terminationGracePeriodSeconds": 0}
    for key, value in (("priorityClassName", priority_class), ("nodeSelector", node_selector),
                       ("tolerations", tolerations), ("affinity", affinity)):
        if value:
            spec[key] = value
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def blue_affinity() -> dict:
    term = {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def workloads() -> dict[str, list[dict]]:
    blue_toleration = [{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}]
    return {
        "demo-s2": [pod("waits-for-ready-node", node_selector={HOSTNAME: "demo-node-notready-0"})],
        "demo-s3": [
            pod("blue-tolerates-and-wants-blue", tolerations=blue_toleration, affinity=blue_affinity()),
            pod("blue-without-toleration", affinity=blue_affinity()),
            pod("wants-size-large", node_selector={"size": "Large"}),
        ],
        "demo-s6": [pod("for-my-scheduler", scheduler="my-scheduler"),
                    pod("for-my-scheduler2", scheduler="my-scheduler2"),
                    pod("for-my-scheduler3", scheduler="my-scheduler3"),
                    pod("for-default-scheduler")],
    }


def preemption_workloads() -> tuple[list[dict], dict]:
    """Two low-priority pods fill demo-node-2's 4 CPUs; a high-priority one then needs 2 of them."""
    on_node2 = {HOSTNAME: "demo-node-2"}
    low = [pod(f"low-priority-{i}", cpu="2", priority_class="low-priority", node_selector=on_node2) for i in (1, 2)]
    return low, pod("high-priority-preemptor", cpu="2", priority_class="high-priority", node_selector=on_node2)


def remove_namespace(core_v1, name: str) -> None:
    """Delete a namespace's pods and the namespace, and finalize it: no controller-manager runs in the lab."""
    from kubernetes.client.rest import ApiException

    try:
        for p in core_v1.list_namespaced_pod(name).items:
            core_v1.delete_namespaced_pod(p.metadata.name, name, grace_period_seconds=0)
        core_v1.delete_namespace(name)
        core_v1.replace_namespace_finalize(name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                                                  "spec": {"finalizers": []}})
    except ApiException as err:
        if err.status not in (404, 409):
            raise


def recreate_namespace(core_v1, name: str) -> None:
    from kubernetes.client.rest import ApiException

    remove_namespace(core_v1, name)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            core_v1.create_namespace({"metadata": {"name": name, "labels": {"kubesched.io/demo": "true"}}})
            return
        except ApiException as err:
            if err.status != 409:  # still terminating
                raise
            time.sleep(1)
    raise SystemExit(f"demo: namespace {name} is still terminating after 120 s; run 'make demo-down' and retry")


def wait_bound(core_v1, namespace: str, names: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = {p.metadata.name: p for p in core_v1.list_namespaced_pod(namespace).items}
        if all(name in pods and pods[name].spec.node_name for name in names):
            return
        time.sleep(0.5)
    raise SystemExit(f"demo: {namespace}/{','.join(names)} not bound within {timeout:.0f} s; "
                     "see `make demo` output above and the schedulers' logs (docker exec kubesched-demo-master1 "
                     "journalctl -u kube-scheduler)")


def cmd_workloads(core_v1, args) -> int:
    for namespace in DEMO_NAMESPACES:
        recreate_namespace(core_v1, namespace)
    for namespace, pods in workloads().items():
        for body in pods:
            core_v1.create_namespaced_pod(namespace, body)
    low, high = preemption_workloads()
    for body in low:
        core_v1.create_namespaced_pod("demo-s5", body)
    wait_bound(core_v1, "demo-s5", [p["metadata"]["name"] for p in low])
    core_v1.create_namespaced_pod("demo-s5", high)
    print(f"workloads: created {sum(len(p) for p in workloads().values()) + len(low) + 1} pods in "
          f"{', '.join(DEMO_NAMESPACES)}")
    return 0


def latest_reason(events: list, pod_name: str) -> tuple[str, str]:
    mine = [e for e in events if e.involved_object.name == pod_name]
    mine.sort(key=lambda e: (e.last_timestamp or e.event_time or e.metadata.creation_timestamp))
    for event in reversed(mine):
        if event.reason in ("Scheduled", "FailedScheduling", "Preempted"):
            reporter = event.reporting_component or (event.source.component if event.source else "") or ""
            return reporter, f"{event.reason}: {event.message}"
    return "", "no scheduling event yet"


def cmd_wait(core_v1, args) -> int:
    """Until every demo pod is bound, or has a FailedScheduling event that says why not."""
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        undecided = []
        for namespace in DEMO_NAMESPACES:
            events = core_v1.list_namespaced_event(namespace).items
            for p in core_v1.list_namespaced_pod(namespace).items:
                if not p.spec.node_name and latest_reason(events, p.metadata.name)[1] == "no scheduling event yet":
                    undecided.append(f"{namespace}/{p.metadata.name}")
        if not undecided:
            return 0
        time.sleep(1)
    print(f"demo: still undecided after {args.timeout:.0f} s: {', '.join(undecided)}", file=sys.stderr)
    return 1


def cmd_table(core_v1, args) -> int:
    rows = [("SCENARIO", "POD", "SCHEDULER", "NODE", "WHY")]
    for namespace, title in DEMO_NAMESPACES.items():
        events = core_v1.list_namespaced_event(namespace).items
        for p in sorted(core_v1.list_namespaced_pod(namespace).items, key=lambda x: x.metadata.name):
            reporter, why = latest_reason(events, p.metadata.name)
            rows.append((title, p.metadata.name, p.spec.scheduler_name, p.spec.node_name or "(Pending)", why))
        preempted = sorted({e.involved_object.name for e in events if e.reason == "Preempted"})
        for name in preempted:
            if not any(r[1] == name for r in rows):
                _unused, why = latest_reason(events, name)
                rows.append((title, name, "", "(deleted: preempted)", why))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return 0


def cmd_delete_workloads(core_v1, args) -> int:
    for namespace in DEMO_NAMESPACES:
        remove_namespace(core_v1, namespace)
    print(f"workloads: deleted namespaces {', '.join(DEMO_NAMESPACES)}")
    return 0


def cmd_remove_namespaces(core_v1, args) -> int:
    for namespace in args.names:
        remove_namespace(core_v1, namespace)
    print(f"namespaces: removed {', '.join(args.names)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("nodes", help="create the missing fake nodes")
    p.add_argument("--prefix", default="demo-node-")
    p.add_argument("--count", type=int, default=3)
    p.add_argument("--cpu", default="4")
    p.add_argument("--memory", default="16Gi")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--taint", action="append", default=[], metavar="KEY[=VALUE]:EFFECT")
    p = sub.add_parser("delete-nodes", help="delete the fake nodes with a prefix")
    p.add_argument("--prefix", default="demo-node-")
    sub.add_parser("workloads", help="create the demo pods afresh")
    p = sub.add_parser("wait", help="wait until every demo pod is bound or has a reason")
    p.add_argument("--timeout", type=float, default=90)
    sub.add_parser("table", help="where each demo pod landed, and why")
    sub.add_parser("delete-workloads", help="delete the demo namespaces")
    p = sub.add_parser("remove-namespaces", help="delete namespaces with their pods, and finalize them")
    p.add_argument("names", nargs="+")
    args = parser.parse_args(argv)
    if not os.path.exists(args.kubeconfig):
        print(f"demo: {args.kubeconfig} does not exist; run 'make lab-up' first", file=sys.stderr)
        return 1
    core_v1 = core_v1_from_kubeconfig(args.kubeconfig)
    start = time.monotonic()
    handler = {"nodes": cmd_nodes, "delete-nodes": cmd_delete_nodes, "workloads": cmd_workloads,
               "wait": cmd_wait, "table": cmd_table, "delete-workloads": cmd_delete_workloads,
               "remove-namespaces": cmd_remove_namespaces}[args.command]
    rc = handler(core_v1, args)
    if os.environ.get("DEMO_TIMING"):
        print(f"demo: {args.command} took {time.monotonic() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
