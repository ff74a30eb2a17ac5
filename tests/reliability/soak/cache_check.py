"""Does a scheduler's cache equal the API's view? Asked with upstream's own cache debugger.

kube-scheduler answers SIGUSR2 by logging "Cache mismatch" lines (its cache and queue against
its informers) and a dump of every cached node with its pods, and of its queue
(pkg/scheduler/backend/cache/debugger); kubesched answers the same signal with the same lines
(kubesched/backend/debugger.py). klog prints a multi-line value as ``key=<`` and tab-indented
lines up to `` >`` in kube-scheduler's log, and kubesched's as one quoted string with ``\\n``:
``parse_dump`` reads both.

``compare`` sets a dump beside the API's nodes and pods. The cluster need not be quiet (at the
end of a soak on two cores kwok is still finishing and deleting pods), so only what stood still
is judged: the API is listed, then, a window later, the instances dump their caches and the API
is listed again. A pod or node that changed between the two lists is in flux (a cache may hold
either state, by how far its watch has got) and left out; one that did not change had not
changed for the whole window either, so every healthy watch has delivered it, and the cache
must hold it as the API does.

A pod in a scheduling attempt is in neither the cache nor the queue (upstream's dump lists the
queue's heaps, not the pods popped from them), so a leader's one dump can miss a pod that is
fine. The instances dump twice, DUMP_GAP_S apart: a pending pod is missing from the queue, and a
mismatch the scheduler reports is one, only when both dumps say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DUMP_GAP_S = 5.0  # between an instance's two dumps: longer than one scheduling attempt takes
NODES_HEADER = '"Dump of cached NodeInfo"'
QUEUE_HEADER = '"Dump of scheduling queue"'
MISMATCH = '"Cache mismatch"'
# The lists in a "Cache mismatch" line: missedPods=["u9"] (Go) or missedPods="['u9']" (kubesched).
MISMATCH_LIST = re.compile(r'="?\[([^\]]*)\]')
POD_LINE = re.compile(r"name: (\S*), namespace: (\S*), uid: ([0-9a-f-]+), phase: (\w*), nominated node: ?(\S*)")


@dataclass
class CacheDump:
    nodes: dict[str, set[str]] = field(default_factory=dict)        # node -> uids of its cached pods
    nominated: dict[str, set[str]] = field(default_factory=dict)    # node -> uids nominated to it
    queue: set[str] = field(default_factory=set)
    queue_summary: str = ""
    mismatches: list[str] = field(default_factory=list)


def _value(text: str, header_at: int, key: str) -> str:
    """The value of key in the klog line that starts at header_at (either way klog writes it)."""
    line_end = text.find("\n", header_at)
    line = text[header_at:line_end if line_end >= 0 else len(text)]
    multi = f" {key}=<"
    if line.endswith(multi):
        end = text.find("\n >", line_end)
        body = text[line_end + 1:end if end >= 0 else len(text)]
        return "\n".join(part[1:] if part.startswith("\t") else part for part in body.split("\n"))
    match = re.search(rf' {key}="((?:[^"\\]|\\.)*)"', line)
    if not match:
        return ""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), match.group(1))


def parse_dump(log_text: str) -> CacheDump | None:
    """The last complete dump in log_text (a log read from the offset the signal was sent at)."""
    nodes_at, queue_at = log_text.rfind(NODES_HEADER), log_text.rfind(QUEUE_HEADER)
    if nodes_at < 0 or queue_at < nodes_at:
        return None
    dump = CacheDump()
    node, section = "", ""
    for line in _value(log_text, nodes_at, "nodes").split("\n"):
        if line.startswith("Node name: "):
            node, section = line[len("Node name: "):], "scheduled"
            dump.nodes.setdefault(node, set())
        elif line.startswith("Nominated Pods("):
            section = "nominated"
        elif (match := POD_LINE.search(line)) and node:
            (dump.nodes if section == "scheduled" else dump.nominated).setdefault(node, set()).add(match.group(3))
    dump.queue = {m.group(3) for m in POD_LINE.finditer(_value(log_text, queue_at, "pods"))}
    dump.queue_summary = _value(log_text, queue_at, "summary")
    line_start = log_text.rfind("\n", 0, nodes_at) + 1
    dump.mismatches = [line for line in log_text[:line_start].splitlines() if MISMATCH in line]
    return dump


def api_view(nodes: list[dict], pods: list[dict], scheduler_name: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """(node -> uids of its pods that have not finished, our unbound pods, our unbound pods
    being deleted) as the API has them."""
    on_node: dict[str, set[str]] = {n["metadata"]["name"]: set() for n in nodes}
    pending, deleting = set(), set()
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if spec.get("nodeName"):
            on_node.setdefault(spec["nodeName"], set()).add(meta["uid"])
        elif spec.get("schedulerName") == scheduler_name:
            (deleting if meta.get("deletionTimestamp") else pending).add(meta["uid"])
    return on_node, pending, deleting


def pod_state(pod: dict) -> tuple:
    """What a cache and queue hold of a pod: its node, whether it is being deleted, whether it
    has finished (a finished pod leaves both)."""
    return ((pod.get("spec") or {}).get("nodeName") or "", bool(pod["metadata"].get("deletionTimestamp")),
            (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def in_flux(before: list[dict], after: list[dict]) -> set[str]:
    """UIDs (pods) or names (nodes) of the objects that were made, removed or changed (for a pod:
    what pod_state shows) between two lists of the API."""
    def states(objects: list[dict]) -> dict[str, tuple]:
        return {o["metadata"].get("uid") or o["metadata"]["name"]: pod_state(o) if "spec" in o else ()
                for o in objects}
    old, new = states(before), states(after)
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def line_items(line: str) -> set[str]:
    """The node names and pod UIDs in one "Cache mismatch" line."""
    items = (item.strip(" '\"\\") for listed in MISMATCH_LIST.findall(line) for item in listed.split(","))
    return {item for item in items if item}


def mismatch_items(dump: CacheDump) -> set[str]:
    """The node names and pod UIDs the scheduler's own comparison reported."""
    return {item for line in dump.mismatches for item in line_items(line)}


def compare(dump: CacheDump, nodes: list[dict], pods: list[dict], scheduler_name: str,
            moving: set[str] = frozenset(), again: CacheDump | None = None) -> dict:
    """What differs between the dump and the API (empty lists when they agree), leaving out the
    pods (by UID) and nodes (by name) in moving. With again, the same instance's later dump: a
    pod missing from the queue, or a mismatch reported, counts only when it is in both."""
    on_node, pending, deleting = api_view(nodes, pods, scheduler_name)
    mismatches = dump.mismatches[-4:]
    held_again: set[str] = set()
    if again is not None:
        held_again = again.queue | {uid for uids in again.nodes.values() for uid in uids}
        both = mismatch_items(dump) & mismatch_items(again)
        mismatches = [line for line in again.mismatches if line_items(line) & both][-4:]
    api_nodes = {n["metadata"]["name"] for n in nodes} - moving
    cached_nodes = set(dump.nodes) - moving
    cached_where = {uid: node for node, uids in dump.nodes.items() for uid in uids if uid not in moving}
    api_where = {uid: node for node, uids in on_node.items() for uid in uids if uid not in moving}
    return {
        "nodes_missing": sorted(api_nodes - cached_nodes),
        "nodes_extra": sorted(cached_nodes - api_nodes),
        "pods_missing": sorted(uid for uid in api_where if uid not in cached_where),
        "pods_extra": sorted(uid for uid in cached_where if uid not in api_where),
        "pods_on_wrong_node": sorted(uid for uid, node in cached_where.items()
                                     if uid in api_where and api_where[uid] != node),
        "queue_missing": sorted(pending - dump.queue - set(cached_where) - held_again - moving),
        "queue_extra": sorted(dump.queue - pending - deleting - moving),
        "scheduler_reported_mismatches": mismatches,
    }


def differences(result: dict) -> int:
    return sum(len(v) for k, v in result.items() if k != "scheduler_reported_mismatches") + \
        len(result.get("scheduler_reported_mismatches") or [])
