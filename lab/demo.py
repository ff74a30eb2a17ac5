"""Lab helpers (run with PYTHONPATH at the repository root) for `make demo` and the Molecule scenarios.

    python lab/demo.py nodes --prefix demo-node- --count 3   create the missing fake nodes
    python lab/demo.py delete-nodes --prefix demo-node-      delete the nodes with that prefix
    python lab/demo.py workloads                             the demo's pods, afresh
    python lab/demo.py wait                                  until each demo pod is where its scenario says
    python lab/demo.py table                                 where each demo pod landed, and why
    python lab/demo.py delete-workloads                      remove the demo's namespaces
    python lab/demo.py remove-namespaces NS...               delete and finalize namespaces

The kubeconfig defaults to $LAB_DIR/admin.kubeconfig (LAB_DIR defaults to .lab), as lab/lab.sh writes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from dataclasses import dataclass

from lab.fake_nodes import core_v1_from_kubeconfig, create_nodes, delete_nodes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_kubeconfig() -> str:
    """The admin kubeconfig lab/lab.sh writes into LAB_DIR (default .lab at the repository root)."""
    return os.path.join(os.environ.get("LAB_DIR") or os.path.join(ROOT, ".lab"), "admin.kubeconfig")


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


# The demo's cluster (lab/demo.sh and inventories/lab make it so): demo-node-0 is tainted
# app=blue:NoSchedule and labelled color=blue, demo-node-1 is labelled size=Large, demo-node-2
# is plain, and demo-node-notready-0 carries the not-ready taint until the demo lifts it. 4 CPU each.
DEMO_NAMESPACES = {"demo-s2": "S2 the not-ready taint", "demo-s3": "S3 dedicated nodes",
                   "demo-s5": "S5 priority and preemption", "demo-s6": "S6 a second scheduler"}
PAUSE = "registry.k8s.io/pause:3.10"
HOSTNAME = "kubernetes.io/hostname"
# What a pod of the demo asks for, in words, kept on the pod so the table reads it from the API.
WHY_ANNOTATION = "kubesched.io/demo-why"
PENDING = "(Pending)"
PREEMPTED = "(preempted)"
UNTAINTED_NODES = ("demo-node-1", "demo-node-2")


@dataclass(frozen=True)
class DemoPod:
    """One pod of the demo, what it asks for, and the outcomes its scenario allows."""

    namespace: str
    manifest: dict
    why: str
    allowed: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]


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


def demo_pods() -> list[DemoPod]:
    """Every pod of the demo but the S5 preemptor (preemptor() makes it, once its victims run)."""
    blue_toleration = [{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}]
    on_node2 = {HOSTNAME: "demo-node-2"}
    return [
        DemoPod("demo-s2", pod("waits-for-ready-node", node_selector={HOSTNAME: "demo-node-notready-0"}),
                "its node is tainted not-ready until node_taint lifts it",
                ("demo-node-notready-0",)),
        DemoPod("demo-s3", pod("tolerates-blue", tolerations=blue_toleration, affinity=blue_affinity()),
                "tolerates app=blue, requires color In [blue]: demo-node-0",
                ("demo-node-0",)),
        DemoPod("demo-s3", pod("blue-no-toleration", affinity=blue_affinity()),
                "requires color In [blue], no toleration: stays Pending",
                (PENDING,)),
        DemoPod("demo-s3", pod("wants-large", node_selector={"size": "Large"}),
                "nodeSelector size=Large: only demo-node-1 has it",
                ("demo-node-1",)),
        *(DemoPod("demo-s5", pod(f"low-priority-{i}", cpu="2", priority_class="low-priority", node_selector=on_node2),
                  "low priority, 2 of demo-node-2's 4 CPU; first to go",
                  ("demo-node-2", PREEMPTED))
          for i in (1, 2)),
        *(DemoPod("demo-s6", pod(f"for-{scheduler}", scheduler=scheduler),
                  f"only {scheduler} may bind it",
                  UNTAINTED_NODES)
          for scheduler in ("my-scheduler", "my-scheduler2", "my-scheduler3", "default-scheduler")),
    ]


def preemptor() -> DemoPod:
    return DemoPod("demo-s5", pod("high-priority", cpu="2", priority_class="high-priority",
                                  node_selector={HOSTNAME: "demo-node-2"}),
                   "high priority, 2 CPU on the full demo-node-2: preempts one",
                   ("demo-node-2",))


def all_demo_pods() -> list[DemoPod]:
    return [*demo_pods(), preemptor()]


def create_demo_pod(core_v1, demo_pod: DemoPod) -> None:
    body = dict(demo_pod.manifest, metadata={**demo_pod.manifest["metadata"],
                                             "annotations": {WHY_ANNOTATION: demo_pod.why}})
    core_v1.create_namespaced_pod(demo_pod.namespace, body)


def remove_namespace(core_v1, name: str) -> None:
    """Delete a namespace's pods, its events and the namespace, and finalize it.

    No controller-manager runs in the lab, so nothing else empties the namespace: its events
    would outlive it and be read as the history of the next pods of the same name.
    """
    from kubernetes.client.rest import ApiException

    try:
        for p in core_v1.list_namespaced_pod(name).items:
            core_v1.delete_namespaced_pod(p.metadata.name, name, grace_period_seconds=0)
        core_v1.delete_collection_namespaced_event(name)
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
    pods = demo_pods()
    for demo_pod in pods:
        create_demo_pod(core_v1, demo_pod)
    # S5: the preemptor comes once the low-priority pods fill demo-node-2.
    wait_bound(core_v1, "demo-s5", [p.name for p in pods if p.namespace == "demo-s5"])
    create_demo_pod(core_v1, preemptor())
    print(f"workloads: created {len(pods) + 1} pods in {', '.join(DEMO_NAMESPACES)}")
    # S2: the pod must be seen waiting on the taint before lab/demo.sh lifts it.
    print(f"workloads: demo-s2/waits-for-ready-node is Pending: {wait_failed_scheduling(core_v1, 'demo-s2', 'waits-for-ready-node')}")
    return 0


def wait_failed_scheduling(core_v1, namespace: str, name: str, timeout: float = 60) -> str:
    """The message of the pod's first FailedScheduling event, once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in core_v1.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items:
            if event.reason == "FailedScheduling":
                return event.message
        time.sleep(0.5)
    raise SystemExit(f"demo: {namespace}/{name} has no FailedScheduling event after {timeout:.0f} s; is the default "
                     "scheduler running? (docker exec kubesched-demo-master1 journalctl -u kube-scheduler)")


SCHEDULING_REASONS = ("FailedScheduling", "Scheduled", "Preempted")


def event_time(event):
    return event.last_timestamp or event.event_time or event.metadata.creation_timestamp


def event_reporter(event) -> str:
    return event.reporting_component or (event.source.component if event.source else "") or ""


def scheduling_history(events: list, pod_name: str, uid: str | None = None, names: dict | None = None) -> list[str]:
    """The pod's scheduling events, oldest first, each once: "Reason (reporter): message".

    With a uid, only the events of that very pod, not of an earlier pod of the same name.
    names maps pod uids to names, so "Preempted by pod <uid>" also says which pod.
    """
    mine = [e for e in events if e.involved_object.name == pod_name and e.reason in SCHEDULING_REASONS
            and (uid is None or e.involved_object.uid == uid)]
    lines: list[str] = []
    for event in sorted(mine, key=event_time):
        message = event.message or ""
        for pod_uid, name in (names or {}).items():
            message = message.replace(f"pod {pod_uid}", f"pod {pod_uid} ({name})")
        line = f"{event.reason} ({event_reporter(event)}): {message}"
        if line not in lines:
            lines.append(line)
    return lines


def latest_uid(events: list, pod_name: str) -> str | None:
    mine = sorted((e for e in events if e.involved_object.name == pod_name), key=event_time)
    return mine[-1].involved_object.uid if mine else None


@dataclass
class Placement:
    """Where one demo pod is, as the API server tells it."""

    demo_pod: DemoPod
    scheduler: str
    node: str
    history: list[str]

    @property
    def as_expected(self) -> bool:
        return self.node in self.demo_pod.allowed


def placements(core_v1) -> list[Placement]:
    found = []
    for namespace in DEMO_NAMESPACES:
        events = core_v1.list_namespaced_event(namespace).items
        pods = {p.metadata.name: p for p in core_v1.list_namespaced_pod(namespace).items}
        preempted = {e.involved_object.name for e in events if e.reason == "Preempted"}
        names = {p.metadata.uid: p.metadata.name for p in pods.values()}
        for demo_pod in all_demo_pods():
            if demo_pod.namespace != namespace:
                continue
            live = pods.get(demo_pod.name)
            if live is None or live.metadata.deletion_timestamp:
                node = PREEMPTED if demo_pod.name in preempted else "(missing)"
                # Gone from the API: its history is that of the latest pod of the name.
                scheduler, uid = demo_pod.manifest["spec"]["schedulerName"], latest_uid(events, demo_pod.name)
            else:
                node = live.spec.node_name or PENDING
                scheduler, uid = live.spec.scheduler_name, live.metadata.uid
            found.append(Placement(demo_pod, scheduler, node, scheduling_history(events, demo_pod.name, uid, names)))
    return found


def surprises(found: list[Placement]) -> list[str]:
    """What the scenarios do not allow: a pod elsewhere, or more S5 victims than needed."""
    problems = [f"{p.demo_pod.namespace}/{p.demo_pod.name} is on {p.node}, expected {' or '.join(p.demo_pod.allowed)}"
                for p in found if not p.as_expected]
    victims = [p.demo_pod.name for p in found if p.node == PREEMPTED]
    if len(victims) != 1:
        problems.append(f"S5 preempted {len(victims)} low-priority pods ({', '.join(victims) or 'none'}); one is enough")
    return problems


def cmd_wait(core_v1, args) -> int:
    """Until every demo pod is where its scenario says, or the timeout passes (then the table tells)."""
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if not surprises(placements(core_v1)):
            return 0
        time.sleep(1)
    print(f"demo: not every pod is where its scenario says after {args.timeout:.0f} s; see the table", file=sys.stderr)
    return 0


def render_table(found: list[Placement], width: int = 120) -> str:
    """One row per pod (POD, SCHEDULER, NODE, WHY), grouped by scenario, with what the schedulers said beneath."""
    header = ("POD", "SCHEDULER", "NODE", "WHY")
    rows = [(p.demo_pod.name, p.scheduler, p.node, p.demo_pod.why) for p in found]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]

    def line(row: tuple[str, ...], mark: str = " ") -> str:
        return f"{mark} " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]

    def said(text: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent="      ", subsequent_indent="        ", break_on_hyphens=False)

    out = [line(header)]
    for namespace, title in DEMO_NAMESPACES.items():
        out.append(f"{title} (namespace {namespace})")
        for placement, row in zip(found, rows):
            if placement.demo_pod.namespace == namespace:
                out.append(line(row, " " if placement.as_expected else "!"))
                for text in placement.history or ["no scheduling event yet"]:
                    out += said(text)
    return "\n".join(out)


def cmd_table(core_v1, args) -> int:
    found = placements(core_v1)
    print(render_table(found, args.width))
    problems = surprises(found)
    if problems:
        print("\ndemo: NOT as the scenarios say (rows marked !):\n  " + "\n  ".join(problems))
        return 1
    print("\ndemo: every pod is where its scenario says.")
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
    parser.add_argument("--kubeconfig", default=default_kubeconfig())
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
    p = sub.add_parser("wait", help="wait until every demo pod is where its scenario says")
    p.add_argument("--timeout", type=float, default=90)
    p = sub.add_parser("table", help="where each demo pod landed, and why; exit 1 when a scenario is not met")
    p.add_argument("--width", type=int, default=120, help="wrap the table at this many columns")
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
