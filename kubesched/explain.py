"""`kubesched explain NAMESPACE/POD`: the per-node story `kubectl describe` only sums up.

Reads the pod, then lists once (InformerRegistry.load) what the profiles read (nodes, pods, the storage objects
of the enabled volume plugins, the ResourceClaims, ResourceSlices and DeviceClasses when
DynamicResources is enabled) and hands them to the scheduler's own event handlers, so the
cache is filled exactly as a running scheduler fills it; then runs the pod's profile over
every node: PreFilter, every filter on every node (no percentageOfNodesToScore cut-off, no
round-robin start, no nominated-node shortcut), and every score plugin with its share of
the total. The pod's volumes and resource claims get a section of their own: what each claim
is bound or allocated to, and for a claim still to be allocated how many devices each node
has for each request. Nothing is bound or written. This pass is explain's own: the
scheduling cycle's hot loop knows nothing of it.
"""

from __future__ import annotations

from kubesched.client import ApiClient, ApiError
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.dra.allocator import AllocationError, Allocator
from kubesched.dra.manager import DRAManager, claim_key
from kubesched.framework.fit_error import Diagnosis, FitError
from kubesched.framework.interface import Code, CycleState
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.volumes import claim_class, pod_claim_volumes
from kubesched.schedule_one import NO_NODES_AVAILABLE
from kubesched.scheduler import Scheduler

DYNAMIC_RESOURCES = "DynamicResources"
# A claim's unbound PersistentVolumes listed by name, at most this many.
MAX_LISTED_VOLUMES = 10
TIE_NOTE = (
    "Equal totals: v1.37 draws no random number between them (only extender scores add one); it takes\n"
    "the root of a max-heap built over the feasible nodes in the order its filtering found them. That\n"
    "order starts where the previous cycle's filtering stopped and, filtering in parallel, follows\n"
    "which node's filters finished first: which of the tied nodes wins is not fixed by this table.\n")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in rows:
        lines.append("   ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def load_cluster_objects(scheduler: Scheduler, client: ApiClient, namespace: str, name: str) -> dict:
    """Everything explain reads, listed once and handed to the scheduler's event handlers as its
    informers would hand it: returns the pod. The pod is read first, so a missing one is
    reported (LookupError) before anything else is listed."""
    try:
        target = client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as err:
        if err.status == 404:
            raise LookupError(f"pod {namespace}/{name} not found") from None
        raise
    scheduler.informers.load()
    return scheduler.informers.get("pods", f"{namespace}/{name}") or target


def _filter_every_node(scheduler: Scheduler, fwk, state: CycleState, pod: PodInfo) -> tuple[list[NodeInfo], Diagnosis]:
    diagnosis = Diagnosis()
    nodes = scheduler.pre_filter(fwk, state, pod, diagnosis)
    if not nodes:
        return [], diagnosis
    return scheduler.filter_nodes(fwk, state, pod, nodes, fwk.active_filter_plugins(state), diagnosis), diagnosis


def explain_pod(cfg: KubeSchedulerConfiguration, client: ApiClient, pod_ref: str) -> str:
    namespace, name = pod_ref.split("/", 1)
    scheduler = Scheduler(cfg, client, bind_workers=1)
    pod = PodInfo(load_cluster_objects(scheduler, client, namespace, name))
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
    out.append(volumes_section(scheduler, pod))
    if DYNAMIC_RESOURCES in fwk.plugins:
        out.append(claims_section(scheduler.dra, scheduler.snapshot.node_info_list, pod))
    if not feasible:
        out.append("\n" + str(FitError(pod.key, scheduler.snapshot.num_nodes(), diagnosis)) + "\n")
        return "".join(out)
    breakdown: dict[str, dict[str, int]] = {}
    totals = scheduler.prioritize_nodes(fwk, state, pod, feasible, breakdown)
    plugins = list(breakdown)
    score_rows = sorted(
        ([n.name, str(t)] + [str(breakdown[p].get(n.name, 0)) for p in plugins] for n, t in zip(feasible, totals)),
        key=lambda r: (-int(r[1]), r[0]))
    out.append("\nScores of feasible nodes (weighted; the highest total wins):\n")
    out.append(_table(["NODE", "TOTAL", *plugins], score_rows))
    if len(score_rows) > 1 and score_rows[0][1] == score_rows[1][1]:
        out.append(TIE_NOTE)
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Volumes
# ---------------------------------------------------------------------------------------------

def _selector_text(selector: dict | None) -> str:
    """A NodeSelector in one line: terms joined by `or`, expressions by `,`."""
    terms = []
    for term in (selector or {}).get("nodeSelectorTerms") or ():
        parts = [f"{e.get('key')} {e.get('operator')} [{','.join(e.get('values') or ())}]"
                 for e in (term.get("matchExpressions") or []) + (term.get("matchFields") or [])]
        terms.append(", ".join(parts))
    return " or ".join(terms) or "any node"


def _pv_text(pv: dict) -> str:
    affinity = ((_spec(pv).get("nodeAffinity") or {}).get("required"))
    size = ((_spec(pv).get("capacity") or {}).get("storage")) or "?"
    return f"{_meta(pv).get('name')} ({size}, {_selector_text(affinity)})"


def volumes_section(scheduler: Scheduler, pod: PodInfo) -> str:
    """Each claim-backed volume: bound to which PersistentVolume, or what a binding can use."""
    lines = []
    volumes = scheduler.volumes
    for claim_name, ephemeral in pod_claim_volumes(pod):
        label = f"  claim {pod.namespace}/{claim_name}" + (" (generic ephemeral volume)" if ephemeral else "")
        pvc = volumes.pvc(pod.namespace, claim_name)
        if pvc is None:
            where = " (created with the pod by the ephemeral volume controller)" if ephemeral else ""
            lines.append(f"{label}: not found{where}\n")
            continue
        phase = (pvc.get("status") or {}).get("phase") or "Pending"
        bound = _spec(pvc).get("volumeName")
        if bound:
            pv = volumes.pv(bound)
            lines.append(f"{label}: {phase}, bound to " + (_pv_text(pv) if pv else f"{bound} (not found)") + "\n")
            continue
        class_name = claim_class(pvc)
        storage_class = volumes.storage_class(class_name) if class_name else None
        size = (((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage")) or "?"
        modes = ",".join(_spec(pvc).get("accessModes") or ()) or "no access mode"
        if storage_class is None:
            where = f"storageClass {class_name!r} " + ("not found" if class_name else "(none)")
        else:
            where = (f"storageClass {class_name} ({storage_class.get('volumeBindingMode') or 'Immediate'}, "
                     f"provisioner {storage_class.get('provisioner') or 'none'})")
        lines.append(f"{label}: {phase}, {where}, requests {size} {modes}\n")
        available = sorted((pv for pv in volumes.pvs_of_class(class_name) if not _spec(pv).get("claimRef")
                            and not _meta(pv).get("deletionTimestamp")), key=lambda pv: _meta(pv).get("name", ""))
        listed = ", ".join(_pv_text(pv) for pv in available[:MAX_LISTED_VOLUMES])
        more = f", and {len(available) - MAX_LISTED_VOLUMES} more" if len(available) > MAX_LISTED_VOLUMES else ""
        lines.append(f"    {len(available)} unbound PersistentVolume(s) of class {class_name or '(none)'}"
                     + (f": {listed}{more}" if available else "") + "\n")
    return "\nVolumes:\n" + "".join(lines) if lines else ""


# ---------------------------------------------------------------------------------------------
# Dynamic Resource Allocation
# ---------------------------------------------------------------------------------------------

def _pod_claims(manager: DRAManager, pod: PodInfo) -> list[tuple[str, str, dict | None]]:
    """(how the pod names it, what explain says about it, the ResourceClaim or None) per
    spec.resourceClaims."""
    statuses = {s.get("name"): s for s in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ()}
    found = []
    for pod_claim in _spec(pod.raw).get("resourceClaims") or ():
        label = pod_claim.get("name", "")
        template = pod_claim.get("resourceClaimTemplateName")
        if template:
            status = statuses.get(label)
            if status is None:
                found.append((label, f"from ResourceClaimTemplate {template}: not created yet (kube-controller-"
                                     "manager's resourceclaim controller creates it)", None))
                continue
            claim_name = status.get("resourceClaimName")
            if claim_name is None:
                found.append((label, f"from ResourceClaimTemplate {template}: no claim needed", None))
                continue
        else:
            claim_name = pod_claim.get("resourceClaimName") or ""
        claim = manager.get_claim(pod.namespace, claim_name)
        source = f" (from ResourceClaimTemplate {template})" if template else ""
        found.append((label, f"ResourceClaim {pod.namespace}/{claim_name}{source}" + ("" if claim else ": not found"),
                      claim))
    return found


def _requests_text(claim: dict) -> list[str]:
    lines = []
    for raw in (_spec(claim).get("devices") or {}).get("requests") or ():
        choices = raw.get("firstAvailable") or [raw.get("exactly") or {}]
        described = []
        for choice in choices:
            mode = choice.get("allocationMode") or "ExactCount"
            count = f"{choice.get('count') or 1} device(s)" if mode == "ExactCount" else "all devices"
            selectors = len(choice.get("selectors") or ())
            described.append(f"{count} of class {choice.get('deviceClassName')}"
                             + (f" with {selectors} selector(s)" if selectors else ""))
        lines.append(f"      request {raw.get('name')}: " + ", else ".join(described) + "\n")
    return lines


def claims_section(manager: DRAManager, nodes: list[NodeInfo], pod: PodInfo) -> str:
    """Each of the pod's claims: allocated (to which devices) or not; for the claims still to
    allocate, per node and request, the devices the request's class and selectors select and
    how many of them are free (no claim holds them, no untolerated NoSchedule taint)."""
    claims = _pod_claims(manager, pod)
    if not claims:
        return ""
    lines = ["\nResource claims:\n"]
    to_allocate = []
    for label, text, claim in claims:
        if claim is None:
            lines.append(f"  {label}: {text}\n")
            continue
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            devices = ", ".join(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')} (request {r.get('request')})"
                                for r in (allocation.get("devices") or {}).get("results") or ())
            lines.append(f"  {label}: {text}: allocated {devices or 'no device'}, on "
                         f"{_selector_text(allocation.get('nodeSelector'))}\n")
            continue
        lines.append(f"  {label}: {text}: not allocated yet\n")
        lines.extend(_requests_text(claim))
        to_allocate.append(claim)
    if to_allocate:
        lines.append("  Devices per node for each request (selected by its class and selectors / of those, free):\n")
        lines.append(_indent(_device_table(manager, nodes, to_allocate), "    "))
    return "".join(lines)


def _request_names(claim: dict) -> list[str]:
    """The requests of claim as device_availability names them: each subrequest of a
    firstAvailable list as <request>/<subrequest>."""
    names = []
    for raw in (_spec(claim).get("devices") or {}).get("requests") or ():
        subs = raw.get("firstAvailable")
        if subs:
            names.extend(f"{raw.get('name')}/{sub.get('name')}" for sub in subs)
        else:
            names.append(raw.get("name"))
    return names


def _device_table(manager: DRAManager, nodes: list[NodeInfo], claims: list[dict]) -> str:
    allocated, shared = manager.allocated_state()
    slices, pool_cache = manager.slices_and_pools()
    allocator = Allocator(allocated, dict(manager.classes), slices, manager.cel, claim_key, shared=shared,
                          pool_cache=pool_cache)
    headers = [f"{_meta(claim).get('name')}/{request}" for claim in claims for request in _request_names(claim)]
    rows = []
    for node in nodes:
        cells = []
        for claim in claims:
            try:
                counts = allocator.device_availability(node, claim)
            except AllocationError as err:
                cells.extend([f"error: {err}"] + [""] * (len(_request_names(claim)) - 1))
                continue
            cells.extend(f"no class {class_name}" if selected < 0 else f"{selected}/{free}"
                         for _request, class_name, selected, free in counts)
        rows.append([node.name, *cells])
    return _table(["NODE", *headers], rows)


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line + "\n" for line in text.splitlines())
