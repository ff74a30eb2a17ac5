"""`kubesched explain NAMESPACE/POD`: the per-node story `kubectl describe` only sums up.

Lists nodes and pods once and hands them to the scheduler's own event handlers, so the
cache is filled exactly as a running scheduler fills it; then runs the pod's profile over
every node: PreFilter, every filter on every node (no percentageOfNodesToScore cut-off, no
round-robin start, no nominated-node shortcut), and every score plugin with its share of
the total. Nothing is bound or written. This pass is explain's own: the scheduling cycle's
hot loop knows nothing of it.
"""

from __future__ import annotations

from kubesched.client import ApiClient
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.framework.fit_error import Diagnosis, FitError
from kubesched.framework.interface import Code, CycleState
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.schedule_one import NO_NODES_AVAILABLE
from kubesched.scheduler import Scheduler


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in rows:
        lines.append("   ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


def _filter_every_node(scheduler: Scheduler, fwk, state: CycleState, pod: PodInfo) -> tuple[list[NodeInfo], Diagnosis]:
    diagnosis = Diagnosis()
    nodes = scheduler.pre_filter(fwk, state, pod, diagnosis)
    if not nodes:
        return [], diagnosis
    return scheduler.filter_nodes(fwk, state, pod, nodes, fwk.active_filter_plugins(state), diagnosis), diagnosis


def explain_pod(cfg: KubeSchedulerConfiguration, client: ApiClient, pod_ref: str) -> str:
    namespace, name = pod_ref.split("/", 1)
    scheduler = Scheduler(cfg, client, bind_workers=1)
    for node in client.list("/api/v1/nodes", page_size=500).get("items") or ():
        scheduler.on_node_add(node)
    target = None
    for raw in client.list("/api/v1/pods", page_size=500).get("items") or ():
        meta = raw.get("metadata") or {}
        if meta.get("namespace") == namespace and meta.get("name") == name:
            target = raw
        scheduler.on_pod_add(raw)
    if target is None:
        raise LookupError(f"pod {pod_ref} not found")
    pod = PodInfo(target)
    if pod.node_name:
        raise LookupError(f"pod {pod_ref} is already scheduled to node {pod.node_name}; explain is for pending pods")
    fwk = scheduler.frameworks.get(pod.scheduler_name)
    if fwk is None:
        raise LookupError(f"pod {pod_ref} asks for schedulerName {pod.scheduler_name!r}, which no profile "
                          f"of this configuration serves ({', '.join(scheduler.frameworks)})")
    scheduler.cache.update_snapshot(scheduler.snapshot)
    out = [f"Pod {pod_ref} (schedulerName {pod.scheduler_name}, priority {pod.priority}), "
           f"{scheduler.snapshot.num_nodes()} node(s)\n\n"]
    if scheduler.snapshot.num_nodes() == 0:
        return out[0] + NO_NODES_AVAILABLE + "\n"
    state = CycleState()
    feasible, diagnosis = _filter_every_node(scheduler, fwk, state, pod)
    rows = []
    feasible_names = {n.name for n in feasible}
    for node in scheduler.snapshot.node_info_list:
        if node.name in feasible_names:
            rows.append([node.name, "feasible", "", ""])
            continue
        status = diagnosis.node_to_status[node.name]
        plugin = status.plugin or "-"
        reason = status.message() or ("rejected in PreFilter" if diagnosis.pre_filter_msg else "")
        rows.append([node.name, "unresolvable" if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                     else "rejected", plugin, reason])
    out.append(_table(["NODE", "RESULT", "PLUGIN", "REASON"], rows))
    if not feasible:
        out.append("\n" + str(FitError(pod.key, scheduler.snapshot.num_nodes(), diagnosis)) + "\n")
        return "".join(out)
    breakdown: dict[str, dict[str, int]] = {}
    totals = scheduler.prioritize_nodes(fwk, state, pod, feasible, breakdown)
    plugins = list(breakdown)
    score_rows = sorted(
        ([n.name, str(t)] + [str(breakdown[p].get(n.name, 0)) for p in plugins] for n, t in zip(feasible, totals)),
        key=lambda r: (-int(r[1]), r[0]))
    out.append("\nScores of feasible nodes (weighted; highest wins, ties broken at random):\n")
    out.append(_table(["NODE", "TOTAL", *plugins], score_rows))
    return "".join(out)
