"""Lab helpers (run with PYTHONPATH at the repository root) for `make demo` and the Molecule scenarios.

    python lab/demo.py nodes --prefix demo-node- --count 3   create the missing kwok nodes (Ready)
    python lab/demo.py nodes --prefix demo-node-notready- --count 1 --not-ready
                                                             ... or nodes whose kubelet says NotReady
    python lab/demo.py become-ready NODE                     its kubelet recovers: kwok reports it Ready
    python lab/demo.py delete-nodes --prefix demo-node-      delete the nodes with that prefix
    python lab/demo.py workloads                             the demo's pods (not-ready node, dedicated nodes,
                                                             preemption, second scheduler), a Deployment
                                                             and a DaemonSet, afresh
    python lab/demo.py wait                                  until each demo pod is where its scenario says
    python lab/demo.py table                                 where each demo pod landed, and why
    python lab/demo.py delete-workloads                      remove the demo's namespaces
    python lab/demo.py stateful                              S10: local PVs on demo-node-0..2 and a StatefulSet
                                                             of 3 replicas claiming them, afresh
    python lab/demo.py stateful-table                        replica -> node -> PV, once each replica runs
    python lab/demo.py delete-stateful                       its namespace, PVs and StorageClass
    python lab/demo.py remove-namespaces NS...               delete namespaces (their pods at once)

The kubeconfig defaults to $LAB_DIR/admin.kubeconfig (LAB_DIR defaults to .lab), as lab/lab.sh writes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from dataclasses import dataclass

from lab import demo_stateful
from lab.fake_nodes import (
    NOT_READY_ANNOTATION,
    NodesNotReady,
    core_v1_from_kubeconfig,
    create_nodes,
    delete_nodes,
    make_ready,
)
from lab.namespaces import NoDefaultServiceAccount, wait_for_default_service_account

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
    # NotReady nodes a run before made Ready are registered afresh (kwok picks up a node's
    # NotReady annotation only when the node is new).
    if all(name in present for name in wanted) and not (args.not_ready and any(
            NOT_READY_ANNOTATION not in (core_v1.read_node(name).metadata.annotations or {}) for name in wanted)):
        print(f"nodes: {len(wanted)} present")
        return 0
    # create_nodes names them <prefix>0..count-1; remove partial leftovers first so the set is whole.
    delete_nodes(core_v1, sorted(present))
    try:
        create_nodes(core_v1, args.count, prefix=args.prefix, cpu=args.cpu, memory=args.memory,
                     labels=dict(parse_label(item) for item in args.label),
                     taints=[parse_taint(item) for item in args.taint] or None,
                     ready=not args.not_ready)
    except NodesNotReady as err:
        raise SystemExit(f"demo: {err}") from None
    print(f"nodes: created {args.count}" + (" (NotReady)" if args.not_ready else ""))
    return 0


def cmd_become_ready(core_v1, args) -> int:
    """The NotReady node's kubelet recovers: kwok reports it Ready, and the node lifecycle
    controller lifts the not-ready taint."""
    try:
        make_ready(core_v1, args.node)
    except NodesNotReady as err:
        raise SystemExit(f"demo: {err}") from None
    print(f"nodes: {args.node} is Ready and untainted")
    return 0


def cmd_delete_nodes(core_v1, args) -> int:
    names = sorted(existing_nodes(core_v1, args.prefix))
    delete_nodes(core_v1, names)
    print(f"nodes: deleted {len(names)}")
    return 0


# The demo's cluster (lab/demo.sh and inventories/lab make it so): demo-node-0 is tainted
# app=blue:NoSchedule and labelled color=blue, demo-node-1 is labelled size=Large, demo-node-2
# is plain, and demo-node-notready-0 says NotReady (so the API server and the node lifecycle
# controller taint it not-ready) until its kubelet recovers in the not-ready step. 4 CPU each; kwok runs the
# pods bound to them.
DEMO_NAMESPACES = {"demo-s2": "S2 the not-ready taint", "demo-s3": "S3 dedicated nodes",
                   "demo-s5": "S5 priority and preemption", "demo-s6": "S6, S7 a second scheduler and its profiles",
                   "demo-apps": "Workloads: controllers make the pods, kwok runs them"}
PAUSE = "registry.k8s.io/pause:3.10"
HOSTNAME = "kubernetes.io/hostname"
# What a pod of the demo asks for, in words, kept on the pod so the table reads it from the API.
WHY_ANNOTATION = "kubesched.io/demo-why"
PENDING = "(Pending)"
PREEMPTED = "(preempted)"
UNTAINTED_NODES = ("demo-node-1", "demo-node-2")
DEMO_NODES = ("demo-node-0", "demo-node-1", "demo-node-2")
RUNNING = "Running"


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


def pod_spec(scheduler: str = "default-scheduler", cpu: str | None = None, priority_class: str | None = None,
             node_selector: dict | None = None, tolerations: list | None = None, affinity: dict | None = None,
             grace_seconds: int | None = None, **extra) -> dict:
    container: dict = {"name": "app", "image": PAUSE}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict = {"schedulerName": scheduler, "containers": [container]}
    for key, value in (("priorityClassName", priority_class), ("nodeSelector", node_selector),
                       ("tolerations", tolerations), ("affinity", affinity),
                       ("terminationGracePeriodSeconds", grace_seconds), *extra.items()):
        if value is not None and value != {} and value != []:
            spec[key] = value
    return spec


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec(**spec)}


def blue_affinity() -> dict:
    term = {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def demo_pods() -> list[DemoPod]:
    """Every pod of the demo but the S5 preemptor (preemptor() makes it, once its victims run)."""
    blue_toleration = [{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}]
    on_node2 = {HOSTNAME: "demo-node-2"}
    return [
        DemoPod("demo-s2", pod("waits-for-ready-node", node_selector={HOSTNAME: "demo-node-notready-0"}),
                "its node is tainted not-ready until its kubelet reports Ready",
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
        # A victim stays Terminating for its grace period (kwok plays the kubelet); the
        # preemptor waits for it on its nominated node.
        *(DemoPod("demo-s5", pod(f"low-priority-{i}", cpu="2", priority_class="low-priority", node_selector=on_node2,
                                 grace_seconds=3),
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


@dataclass(frozen=True)
class DemoWorkload:
    """A Deployment or DaemonSet of the demo: its controller makes the pods, kwok runs them."""

    namespace: str
    manifest: dict
    why: str
    allowed: tuple[str, ...]  # the nodes its pods may land on
    pods: int  # how many pods it runs when all is well
    one_per_node: bool = False

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]


def demo_workloads() -> list[DemoWorkload]:
    web_labels = {"app": "web"}
    on_untainted = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(UNTAINTED_NODES)}]}]}}}
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 4, "selector": {"matchLabels": web_labels},
                    "template": {"metadata": {"labels": web_labels}, "spec": pod_spec(
                        affinity=on_untainted, topologySpreadConstraints=[
                            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                             "labelSelector": {"matchLabels": web_labels}}])}}}
    agent_labels = {"app": "node-agent"}
    on_demo_nodes = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(DEMO_NODES)}]}]}}}
    agent = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-agent"},
             "spec": {"selector": {"matchLabels": agent_labels},
                      "template": {"metadata": {"labels": agent_labels}, "spec": pod_spec(
                          affinity=on_demo_nodes,
                          tolerations=[{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}])}}}
    return [
        DemoWorkload("demo-apps", web, "Deployment, 4 replicas spread over demo-node-1 and -2 (maxSkew 1)",
                     UNTAINTED_NODES, 4),
        DemoWorkload("demo-apps", agent, "DaemonSet tolerating app=blue: one pod on each demo-node-0..2",
                     DEMO_NODES, len(DEMO_NODES), one_per_node=True),
    ]


def create_demo_workload(apps_v1, workload: DemoWorkload) -> None:
    template = workload.manifest["spec"]["template"]
    body = dict(workload.manifest, spec=dict(workload.manifest["spec"], template=dict(
        template, metadata={**template["metadata"], "annotations": {WHY_ANNOTATION: workload.why}})))
    create = {"Deployment": apps_v1.create_namespaced_deployment,
              "DaemonSet": apps_v1.create_namespaced_daemon_set}[workload.kind]
    create(workload.namespace, body)


def create_demo_pod(core_v1, demo_pod: DemoPod) -> None:
    body = dict(demo_pod.manifest, metadata={**demo_pod.manifest["metadata"],
                                             "annotations": {WHY_ANNOTATION: demo_pod.why}})
    core_v1.create_namespaced_pod(demo_pod.namespace, body)


def remove_namespace(core_v1, name: str) -> None:
    """Delete a namespace, its pods at once (a teardown need not wait out grace periods).

    The namespace controller empties it, events included, and removes it; until then a new
    namespace of the name cannot be made (recreate_namespace waits).
    """
    from kubernetes.client.rest import ApiException

    try:
        core_v1.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core_v1.delete_namespace(name)
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
            wait_for_default_service_account(core_v1, name)
            return
        except NoDefaultServiceAccount as err:
            raise SystemExit(f"demo: {err}") from None
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
    apps_v1 = apps_v1_for(core_v1)
    for workload in demo_workloads():
        create_demo_workload(apps_v1, workload)
    # S5: the preemptor comes once the low-priority pods fill demo-node-2.
    wait_bound(core_v1, "demo-s5", [p.name for p in pods if p.namespace == "demo-s5"])
    create_demo_pod(core_v1, preemptor())
    print(f"workloads: created {len(pods) + 1} pods, " + ", ".join(f"{w.kind} {w.name}" for w in demo_workloads())
          + f" in {', '.join(DEMO_NAMESPACES)}")
    # S2: the pod must be seen waiting on the taint before lab/demo.sh lifts it.
    print(f"workloads: demo-s2/waits-for-ready-node is Pending: {wait_failed_scheduling(core_v1, 'demo-s2', 'waits-for-ready-node')}")
    return 0


def apps_v1_for(core_v1):
    from kubernetes import client

    return client.AppsV1Api(core_v1.api_client)


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
    """Where one demo pod is, as the API server tells it, and its phase (kwok runs bound pods)."""

    demo_pod: DemoPod
    scheduler: str
    node: str
    history: list[str]
    phase: str = ""

    @property
    def as_expected(self) -> bool:
        # A bound pod must also run; the pseudo-nodes ((Pending), (preempted)) have no phase to check.
        return self.node in self.demo_pod.allowed and (self.node.startswith("(") or self.phase == RUNNING)


def phase_of(live) -> str:
    status = getattr(live, "status", None)
    return (status.phase if status else "") or ""


def workload_placements(workload: DemoWorkload, pods: dict, events: list, names: dict) -> list[Placement]:
    """One row per live pod of the workload (matched by its app label), in name order."""
    app = workload.manifest["spec"]["selector"]["matchLabels"]["app"]
    found = []
    for name, live in sorted(pods.items()):
        if (live.metadata.labels or {}).get("app") != app or live.metadata.deletion_timestamp:
            continue
        row = DemoPod(workload.namespace, {"metadata": {"name": name}, "spec": {}}, workload.why, workload.allowed)
        found.append(Placement(row, live.spec.scheduler_name, live.spec.node_name or PENDING,
                               scheduling_history(events, name, live.metadata.uid, names), phase_of(live)))
    return found


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
            phase = ""
            if live is None or live.metadata.deletion_timestamp:
                node = PREEMPTED if demo_pod.name in preempted else "(missing)"
                # Gone from the API: its history is that of the latest pod of the name.
                scheduler, uid = demo_pod.manifest["spec"]["schedulerName"], latest_uid(events, demo_pod.name)
            else:
                node = live.spec.node_name or PENDING
                scheduler, uid, phase = live.spec.scheduler_name, live.metadata.uid, phase_of(live)
            found.append(Placement(demo_pod, scheduler, node, scheduling_history(events, demo_pod.name, uid, names),
                                   phase))
        for workload in demo_workloads():
            if workload.namespace == namespace:
                found += workload_placements(workload, pods, events, names)
    return found


def surprises(found: list[Placement]) -> list[str]:
    """What the scenarios do not allow: a pod elsewhere or not running, more S5 victims than
    needed, a workload short of pods or (a DaemonSet) two pods on one node."""
    problems = [f"{p.demo_pod.namespace}/{p.demo_pod.name} is on {p.node}"
                + (f" ({p.phase or 'no phase'})" if p.node in p.demo_pod.allowed else "")
                + f", expected {' or '.join(p.demo_pod.allowed)}"
                + ("" if all(a.startswith("(") for a in p.demo_pod.allowed) else ", Running")
                for p in found if not p.as_expected]
    victims = [p.demo_pod.name for p in found if p.node == PREEMPTED]
    if len(victims) != 1:
        problems.append(f"S5 preempted {len(victims)} low-priority pods ({', '.join(victims) or 'none'}); one is enough")
    for workload in demo_workloads():
        rows = [p for p in found if p.demo_pod.namespace == workload.namespace and p.demo_pod.why == workload.why]
        running = [p for p in rows if p.as_expected]
        if len(running) != workload.pods:
            problems.append(f"{workload.kind} {workload.namespace}/{workload.name} runs {len(running)} of "
                            f"{workload.pods} pods")
        if workload.one_per_node and len({p.node for p in rows}) != len(rows):
            problems.append(f"{workload.kind} {workload.namespace}/{workload.name} has two pods on one node")
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
    """One row per pod (POD, SCHEDULER, NODE, PHASE, WHY), grouped by scenario, with what the
    schedulers said beneath."""
    header = ("POD", "SCHEDULER", "NODE", "PHASE", "WHY")
    rows = [(p.demo_pod.name, p.scheduler, p.node, p.phase or "-", p.demo_pod.why) for p in found]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]

    def line(row: tuple[str, ...], mark: str = " ") -> str:
        return f"{mark} " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]

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


# S10 stateful workloads (lab/demo_stateful.py): a section of its own beside the table above.
def cmd_stateful(core_v1, args) -> int:
    recreate_namespace(core_v1, demo_stateful.NAMESPACE)
    demo_stateful.create(core_v1)
    print(f"stateful: StorageClass {demo_stateful.STORAGE_CLASS}, a local PV on each of "
          f"{', '.join(demo_stateful.PV_NODES)}, StatefulSet {demo_stateful.NAMESPACE}/{demo_stateful.STATEFULSET} "
          f"({demo_stateful.REPLICAS} replicas)")
    return 0


def cmd_stateful_table(core_v1, args) -> int:
    found = demo_stateful.wait(core_v1, args.timeout)
    print(demo_stateful.render(found))
    problems = demo_stateful.problems(found)
    if problems:
        print("\ndemo: NOT as S10 says (rows marked !):\n  " + "\n  ".join(problems))
        return 1
    print("\ndemo: each replica runs on the node of the PV its claim is Bound to, one replica per node.")
    return 0


def cmd_delete_stateful(core_v1, args) -> int:
    remove_namespace(core_v1, demo_stateful.NAMESPACE)
    demo_stateful.delete_cluster_objects(core_v1)
    print(f"stateful: deleted namespace {demo_stateful.NAMESPACE}, its PVs and StorageClass")
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
    p.add_argument("--not-ready", action="store_true",
                   help="nodes whose kubelet says NotReady: tainted not-ready until become-ready")
    p = sub.add_parser("become-ready", help="a NotReady node's kubelet recovers: kwok reports it Ready")
    p.add_argument("node")
    p = sub.add_parser("delete-nodes", help="delete the fake nodes with a prefix")
    p.add_argument("--prefix", default="demo-node-")
    sub.add_parser("workloads", help="create the demo pods afresh")
    p = sub.add_parser("wait", help="wait until every demo pod is where its scenario says")
    p.add_argument("--timeout", type=float, default=90)
    p = sub.add_parser("table", help="where each demo pod landed, and why; exit 1 when a scenario is not met")
    p.add_argument("--width", type=int, default=120, help="wrap the table at this many columns")
    sub.add_parser("delete-workloads", help="delete the demo namespaces")
    p = sub.add_parser("remove-namespaces", help="delete namespaces, their pods at once")
    p.add_argument("names", nargs="+")
    sub.add_parser("stateful", help="S10: local PVs and a StatefulSet claiming them, afresh")
    p = sub.add_parser("stateful-table", help="replica -> node -> PV once each replica runs; exit 1 when S10 is not met")
    p.add_argument("--timeout", type=float, default=90)
    sub.add_parser("delete-stateful", help="delete the S10 namespace, PVs and StorageClass")
    args = parser.parse_args(argv)
    if not os.path.exists(args.kubeconfig):
        print(f"demo: {args.kubeconfig} does not exist; run 'make lab-up' first", file=sys.stderr)
        return 1
    core_v1 = core_v1_from_kubeconfig(args.kubeconfig)
    start = time.monotonic()
    handler = {"nodes": cmd_nodes, "become-ready": cmd_become_ready, "delete-nodes": cmd_delete_nodes, "workloads": cmd_workloads,
               "wait": cmd_wait, "table": cmd_table, "delete-workloads": cmd_delete_workloads,
               "remove-namespaces": cmd_remove_namespaces, "stateful": cmd_stateful,
               "stateful-table": cmd_stateful_table, "delete-stateful": cmd_delete_stateful}[args.command]
    rc = handler(core_v1, args)
    if os.environ.get("DEMO_TIMING"):
        print(f"demo: {args.command} took {time.monotonic() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
