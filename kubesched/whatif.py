"""`kubesched whatif`: how a proposed KubeSchedulerConfiguration would place the cluster's pods.

The cluster is read once (read_snapshot): pods first, then every other kind the profiles
read at the pods' resourceVersion (resourceVersionMatch=Exact), so all lists show the
cluster at one instant and a pod deleted while the lists are read cannot be half-seen.
Each configuration is then built in-process by the scheduler's own assembly (Scheduler:
config, framework runtime, the informer registry, the Handle), and its informers are
loaded from that snapshot through the scheduler's own event handlers. Two questions are
answered under the current and the new configuration, pod by pod in the same order:

- pending pods (schedulingGates or not), in the queue's order: the node each would get,
  or unschedulable and why; each placement is assumed, so the next pod sees it;
- a re-placement of the running pods of the configurations' profiles (all, or a seeded
  sample), in creation order, from the snapshot without them, as if their owners
  re-created them.

Where the two configurations decide differently, the filter or score results of both
name the plugin that changed the decision. Ties between equal totals are broken by a
random draw seeded with --seed and the pod's uid, so two runs on one snapshot agree and
the same pod breaks the same tie the same way under both configurations.

Nothing is written: the client refuses every verb but GET (ReadOnlyClient), nothing is
bound, no PostFilter (preemption) or PreBind runs. This pass is whatif's own; the
scheduling loop knows nothing of it.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any, Callable

from kubesched import jsoncodec
from kubesched.backend.informers import PAGE_SIZE, RESOURCES
from kubesched.client import ApiClient, ApiError
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.framework.fit_error import FitError
from kubesched.framework.interface import CycleState, Status
from kubesched.framework.types import PodInfo
from kubesched.schedule_one import NO_NODES_AVAILABLE
from kubesched.scheduler import Scheduler

ZONE_LABEL = "topology.kubernetes.io/zone"
NO_ZONE = "(none)"
# The exit statuses (docs/whatif.md): 1 is any error, 2 a bad command line (argparse).
EXIT_WITHIN_BOUNDS = 0
EXIT_NEWLY_UNSCHEDULABLE = 3
EXIT_TOO_MANY_MOVES = 4
# Pods a refusal names, at most.
MAX_NAMED = 10
# Progress on stderr once there are this many pods to place, at most every PROGRESS_EVERY seconds.
PROGRESS_FROM = 500
PROGRESS_EVERY = 2.0
# Moves listed in the table; -o json lists every pod.
MAX_LISTED_MOVES = 20
TERMINAL_PHASES = ("Succeeded", "Failed")
NODE_NAME = attrgetter("name")


class WriteRefused(RuntimeError):
    """A what-if tried to write to the cluster: a bug, never an answer to act on."""


class SnapshotError(RuntimeError):
    """The cluster could not be read as one consistent snapshot."""


class ReadOnlyClient(ApiClient):
    """An API client whose one way to the server (perform) carries GET and nothing else, so
    no bind, patch, delete, event or lease can leave, whichever method asks for it."""

    def perform(self, method: str, path: str, data: bytes | None, params: dict | None, content_type: str,
                timeout: float | None, user_agent: str | None = None) -> tuple[int, bytes]:
        if method != "GET":
            raise WriteRefused(f"kubesched whatif writes nothing; refused {method} {path}")
        return super().perform(method, path, data, params, content_type, timeout, user_agent)

    def watch(self, *args: Any, **kwargs: Any):
        raise WriteRefused("kubesched whatif reads one snapshot; it does not watch")


# ---------------------------------------------------------------------------------------------
# The snapshot
# ---------------------------------------------------------------------------------------------

@dataclass
class ClusterSnapshot:
    resource_version: str
    objects: dict[str, list[dict]]
    unserved: set[str] = field(default_factory=set)


def _list_all(client: Any, resource: str, params: dict) -> tuple[list[dict], str]:
    """Every page of the resource; a continue token goes without the resourceVersion
    (the API server refuses both together; the token carries it)."""
    path = RESOURCES[resource].path
    query = dict(params, limit=PAGE_SIZE)
    items: list[dict] = []
    while True:
        page = client.get(path, query)
        kind = page.get("kind", "").removesuffix("List")
        api_version = page.get("apiVersion", "")
        for item in page.get("items") or ():
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            items.append(item)
        meta = page.get("metadata") or {}
        token = meta.get("continue")
        if not token:
            return items, meta.get("resourceVersion", "")
        query = {"limit": PAGE_SIZE, "continue": token}


def read_snapshot(client: Any, resources: list[str]) -> ClusterSnapshot:
    """Pods, then every other resource at exactly the pods' resourceVersion. Raises
    SnapshotError when the server can no longer serve that version (its history was
    compacted while the lists were read, continue tokens included)."""
    resource_version = ""
    objects: dict[str, list[dict]] = {}
    unserved: set[str] = set()
    for resource in ["pods"] + [r for r in resources if r != "pods"]:
        params = {"resourceVersion": resource_version, "resourceVersionMatch": "Exact"} if resource_version else {}
        try:
            objects[resource], listed_at = _list_all(client, resource, params)
        except ApiError as err:
            if err.status == 404 and RESOURCES[resource].optional:
                unserved.add(resource)
                objects[resource] = []
                continue
            if err.status == 410:
                at = f"resourceVersion {resource_version}" if resource_version else "the pods' listing"
                raise SnapshotError(f"the cluster changed faster than it could be read: {at} is no longer "
                                    f"served while listing {resource} (run again)") from None
            raise
        resource_version = resource_version or listed_at
    return ClusterSnapshot(resource_version, objects, unserved)


# --- the running scheduler's configuration ------------------------------------------------------

SCHEDULER_PROGRAMS = ("kube-scheduler", "kubesched")
# kubesched's commands that read a configuration but do not serve it.
NOT_SERVING = ("whatif", "validate-config", "explain")


@dataclass(frozen=True)
class RunningScheduler:
    pid: int
    program: str
    config: str | None   # as the process names it, or None: it runs on its flags and defaults
    readable: str | None  # the file as this host sees it (through /proc/PID/root), or None


def _config_flag(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
    return None


def _as_seen_here(root: str, path: str) -> str:
    """A process's absolute path as this process can open it: itself when the process sees the
    same root directory, else through its /proc/PID/root (a container's)."""
    try:
        theirs, ours = os.stat(root), os.stat("/")
    except OSError:
        return root + path
    return path if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino) else root + path


def running_schedulers(proc: str = "/proc") -> list[RunningScheduler]:
    """Every kube-scheduler or kubesched serving on this host, its static pod's container
    included, with the --config it runs (kubeadm's kube-scheduler runs on flags alone). A
    process's file is read through /proc/PID/root, so a container's path is found as the
    container sees it; a relative one is resolved against the process's working directory."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as f:
                argv = [arg.decode(errors="replace") for arg in f.read().split(b"\0") if arg]
        except OSError:
            continue  # gone, or not ours to read
        # kubesched's console script runs as `python .../bin/kubesched ...`.
        at = next((i for i, arg in enumerate(argv[:2]) if os.path.basename(arg) in SCHEDULER_PROGRAMS), None)
        if at is None or (len(argv) > at + 1 and argv[at + 1] in NOT_SERVING):
            continue
        config = _config_flag(argv[at + 1:])
        readable = None
        if config is not None:
            if not config.startswith("/"):
                try:
                    config = os.path.join(os.readlink(os.path.join(proc, entry, "cwd")), config)
                except OSError:
                    pass
            readable = _as_seen_here(os.path.join(proc, entry, "root"), config) if config.startswith("/") else None
        found.append(RunningScheduler(int(entry), os.path.basename(argv[at]), config, readable))
    return sorted(found, key=attrgetter("pid"))


class CurrentConfigError(RuntimeError):
    """The running scheduler's configuration cannot be told: say which with --current."""


def running_config(proc: str = "/proc") -> tuple[str | None, str]:
    """The configuration to compare with when --current is not given: (the file to load, or
    None for kube-scheduler's defaults; a line saying where it came from)."""
    schedulers = running_schedulers(proc)
    if not schedulers:
        return None, ("no kube-scheduler or kubesched runs on this host: comparing with kube-scheduler's "
                      "defaults (pass --current with the running scheduler's file)")
    configs = sorted({s.config for s in schedulers}, key=lambda c: c or "")
    if len(configs) > 1:
        named = ", ".join(f"pid {s.pid} {s.program} {s.config or '(no --config)'}" for s in schedulers)
        raise CurrentConfigError(f"several schedulers run on this host ({named}): pass --current with the "
                                 "file of the one the new configuration replaces")
    first = schedulers[0]
    if first.config is None:
        return None, (f"the running {first.program} (pid {first.pid}) has no --config: comparing with "
                      "kube-scheduler's defaults")
    if first.readable is None or not os.access(first.readable, os.R_OK):
        raise CurrentConfigError(f"the running {first.program} (pid {first.pid}) runs {first.config}, which "
                                 "this user cannot read: run as root, or pass --current with a copy")
    return first.readable, f"the current configuration is {first.config}, which {first.program} (pid {first.pid}) runs"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _key(obj: dict) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def load_scheduler(scheduler: Scheduler, snapshot: ClusterSnapshot, without: set[str] = frozenset()) -> None:
    """Hand the snapshot to the scheduler's informers as a listing, as InformerRegistry.load
    does: nodes and pods last, so pods meet what they refer to; pods whose uid is in
    `without` left out. Each scheduler gets its own copy: informers trim what they store in place."""
    registry = scheduler.informers
    for resource in sorted(registry.requested, key=lambda r: (r == "pods", r == "nodes", r)):
        if resource in snapshot.unserved:
            registry.unserved.add(resource)
            continue
        objects = snapshot.objects.get(resource, [])
        if resource == "pods" and without:
            objects = [p for p in objects if _meta(p).get("uid") not in without]
        informer = registry.informers[resource]
        informer.apply_list([informer.transform(o) for o in jsoncodec.loads(jsoncodec.dumps(objects))],
                            snapshot.resource_version)


# ---------------------------------------------------------------------------------------------
# One decision
# ---------------------------------------------------------------------------------------------

@dataclass
class Decision:
    """Where one configuration puts one pod, and what it read to decide (the filter statuses
    and the weighted score per plugin and node, kept until the two decisions are compared)."""
    node: str | None
    reason: str = ""
    tied: list[str] = field(default_factory=list)
    rejected: dict[str, Status] = field(default_factory=dict)
    rejected_all: Status | None = None
    scores: dict[str, Mapping[str, int]] = field(default_factory=dict)
    # No profile of this configuration serves the pod's schedulerName.
    unserved: bool = False

    def placement(self) -> dict:
        out: dict[str, Any] = {"node": self.node}
        if self.node is None:
            out["reason"] = self.reason
        if len(self.tied) > 1:
            out["tied"] = self.tied
        return out

    def scored(self, node: str) -> bool:
        # Every plugin (and the extenders) scored the same nodes: one plugin's answer is theirs.
        return not self.scores or node in next(iter(self.scores.values()))

    def filter_plugin(self, node: str) -> str:
        """The plugin that filtered node out, or ""."""
        status = self.rejected.get(node) or self.rejected_all
        return (status.plugin or "") if status is not None else ""


def decide(scheduler: Scheduler, pod: PodInfo, seed: int) -> Decision:
    """PreFilter, Filter, PreScore, Score as the scheduling cycle runs them (schedule_one.py);
    a tie drawn with Random(seed, uid); then assume and Reserve, so the next pod sees it."""
    fwk = scheduler.frameworks.get(pod.scheduler_name)
    if fwk is None:
        return Decision(None, f"no profile {pod.scheduler_name!r} in this configuration", unserved=True)
    scheduler.cache.update_snapshot(scheduler.snapshot)
    if scheduler.snapshot.num_nodes() == 0:
        return Decision(None, NO_NODES_AVAILABLE)
    state = CycleState()
    try:
        feasible, diagnosis, _hint, _signature = scheduler.find_nodes_that_fit_pod(fwk, state, pod)
        if not feasible:
            fit = FitError(pod.key, scheduler.snapshot.num_nodes(), diagnosis)
            absent = diagnosis.node_to_status.absent_nodes_status
            return Decision(None, str(fit), rejected=dict(diagnosis.node_to_status),
                            rejected_all=absent if absent.plugin else None)
        scores: dict[str, Mapping[str, int]] = {}
        totals = scheduler.prioritize_nodes(fwk, state, pod, feasible, scores)
    except Exception as err:  # noqa: BLE001 - a plugin's error is this pod's answer, not the run's end
        return Decision(None, f"error: {err}")
    best = max(totals)
    if totals.count(best) == 1:  # C-level scans: most decisions have one best node
        tied = [feasible[totals.index(best)].name]
    else:
        tied = sorted(map(NODE_NAME, compress(feasible, map(best.__eq__, totals))))
    host = tied[0] if len(tied) == 1 else random.Random(f"{seed}/{pod.uid}").choice(tied)
    decision = Decision(host, tied=tied, rejected=dict(diagnosis.node_to_status), scores=scores)
    assumed = scheduler.cache.assume_pod(pod, host)
    scheduler.nominator.delete_nominated_pod_if_exists(pod)
    status = fwk.run_reserve_plugins_reserve(state, assumed, host)
    if status is not None:
        fwk.run_reserve_plugins_unreserve(state, assumed, host)
        scheduler.cache.forget_pod(assumed)
        return Decision(None, f"Reserve on {host}: {status.message()}", rejected={host: status})
    return decision


def changed_by(current: Decision, new: Decision) -> list[dict]:
    """The plugins that make the new decision differ from the current one, strongest first:
    a filter that accepts or rejects the other configuration's node, else the score plugins
    whose difference between the two nodes grew in the new node's favour."""
    if current.node == new.node:
        return []
    if current.unserved or new.unserved:
        return [{"plugin": "", "via": "profile"}]
    if new.node is None:
        plugin = new.filter_plugin(current.node) if current.node else ""
        if plugin:
            return [{"plugin": plugin, "via": "filter"}]
        return [{"plugin": p, "via": "filter"} for p in sorted({s.plugin for s in new.rejected.values() if s.plugin})]
    if current.node is None:
        plugin = current.filter_plugin(new.node)
        return [{"plugin": plugin, "via": "filter"}] if plugin else []
    plugin = current.filter_plugin(new.node)
    if plugin:
        return [{"plugin": plugin, "via": "filter"}]
    plugin = new.filter_plugin(current.node)
    if plugin:
        return [{"plugin": plugin, "via": "filter"}]
    if not (current.scored(current.node) and current.scored(new.node) and new.scored(current.node)
            and new.scored(new.node)):
        # percentageOfNodesToScore: one decision did not score the other's node at all.
        return [{"plugin": "", "via": "window"}]
    gains = {}
    for name in set(current.scores) | set(new.scores):
        now = new.scores.get(name, {})
        before = current.scores.get(name, {})
        gain = (now.get(new.node, 0) - now.get(current.node, 0)) - \
            (before.get(new.node, 0) - before.get(current.node, 0))
        if gain > 0:
            gains[name] = gain
    if gains:
        return [{"plugin": name, "via": "score", "delta": gain}
                for name, gain in sorted(gains.items(), key=lambda item: (-item[1], item[0]))]
    if current.node in new.tied:
        return [{"plugin": "", "via": "tie"}]
    return [{"plugin": "", "via": "earlier"}]


def _changed_text(entries: list[dict]) -> str:
    if not entries:
        return ""
    first = entries[0]
    if first["via"] == "profile":
        return "profile"
    if first["via"] == "tie":
        return "tie-break"
    if first["via"] == "earlier":
        return "earlier placements"
    if first["via"] == "window":
        return "nodes scored (percentageOfNodesToScore)"
    more = f" +{len(entries) - 1}" if len(entries) > 1 else ""
    delta = f" {first['delta']:+d}" if "delta" in first else ""
    return f"{first['plugin']} ({first['via']}{delta}){more}"


# ---------------------------------------------------------------------------------------------
# The two passes
# ---------------------------------------------------------------------------------------------

def _creation_order(pod: dict) -> tuple:
    return (_meta(pod).get("creationTimestamp") or "", _key(pod))


def _queue_order(pod: dict) -> tuple:
    """The default QueueSort (PrioritySort): higher priority first, then the earlier pod."""
    return (-((pod.get("spec") or {}).get("priority") or 0), *_creation_order(pod))


def pending_pods(snapshot: ClusterSnapshot, profiles: set[str]) -> list[dict]:
    return sorted((p for p in snapshot.objects["pods"] if not (p.get("spec") or {}).get("nodeName")
                   and _live(p) and _profile(p) in profiles), key=_queue_order)


def running_pods(snapshot: ClusterSnapshot, profiles: set[str]) -> list[dict]:
    return sorted((p for p in snapshot.objects["pods"] if (p.get("spec") or {}).get("nodeName")
                   and _live(p) and _profile(p) in profiles), key=_creation_order)


def _live(pod: dict) -> bool:
    return not _meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def _profile(pod: dict) -> str:
    return (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"


# What a re-created pod keeps of its status: the names of the claims made for it from its
# ResourceClaimTemplates (without them DynamicResources finds no claim: "ResourceClaim not created
# yet"), so it keeps its claims as it keeps its volumes.
KEPT_STATUS = ("resourceClaimStatuses", "extendedResourceClaimStatus")


def recreated(pods: list[dict]) -> list[dict]:
    """The pods as their owners would create them again: no node, no nomination, no status but
    the claims made for them."""
    fresh = jsoncodec.loads(jsoncodec.dumps(pods))
    for pod in fresh:
        pod["spec"].pop("nodeName", None)
        kept = {k: v for k, v in (pod.get("status") or {}).items() if k in KEPT_STATUS}
        pod["status"] = {"phase": "Pending", **kept}
    return fresh


class Progress:
    def __init__(self, total: int, out: Callable[[str], None] | None):
        self.total = total
        self.done = 0
        self.out = out if total >= PROGRESS_FROM else None
        self.last = time.monotonic()

    def step(self, what: str) -> None:
        self.done += 1
        if self.out is not None and time.monotonic() - self.last >= PROGRESS_EVERY:
            self.last = time.monotonic()
            self.out(f"whatif: {what}: {self.done}/{self.total} pods\n")


def _compare(pods: list[PodInfo], current: Scheduler, new: Scheduler, seed: int,
             progress: Progress, what: str) -> list[dict]:
    rows = []
    for pod in pods:
        before = decide(current, pod, seed)
        after = decide(new, pod, seed)
        rows.append({"pod": pod.key, "profile": pod.scheduler_name, "current": before.placement(),
                     "new": after.placement(), "changedBy": changed_by(before, after)})
        progress.step(what)
    return rows


# ---------------------------------------------------------------------------------------------
# Spread: pods and requested resources per node and zone
# ---------------------------------------------------------------------------------------------

def _percent(used: int, allocatable: int) -> float | None:
    return round(100.0 * used / allocatable, 1) if allocatable else None


def spread(scheduler: Scheduler) -> dict[str, dict]:
    """node -> pods, zone and requested CPU/memory/GPU as a percentage of allocatable (GPU:
    every extended resource whose name says gpu, summed)."""
    scheduler.cache.update_snapshot(scheduler.snapshot)
    out = {}
    for node in scheduler.snapshot.node_info_list:
        gpus = [name for name in node.allocatable.scalar if "gpu" in name.lower()]
        out[node.name] = {
            "zone": node.labels.get(ZONE_LABEL) or NO_ZONE,
            "pods": len(node.pods),
            "cpu": _percent(node.requested.milli_cpu, node.allocatable.milli_cpu),
            "memory": _percent(node.requested.memory, node.allocatable.memory),
            "gpu": _percent(sum(node.requested.scalar.get(g, 0) for g in gpus),
                            sum(node.allocatable.scalar[g] for g in gpus)),
        }
    return out


def spread_report(now: dict[str, dict], current: dict[str, dict], new: dict[str, dict]) -> dict:
    nodes = []
    zones: dict[str, dict[str, int]] = {}
    for name in sorted(now):
        row = {"node": name, "zone": now[name]["zone"]}
        for label, picture in (("now", now), ("current", current), ("new", new)):
            entry = picture.get(name, {})
            row[label] = {k: entry.get(k) for k in ("pods", "cpu", "memory", "gpu")}
            counts = zones.setdefault(row["zone"], {"now": 0, "current": 0, "new": 0})
            counts[label] += entry.get("pods", 0)
        nodes.append(row)
    return {"nodes": nodes, "zones": [{"zone": zone, **counts} for zone, counts in sorted(zones.items())]}


# ---------------------------------------------------------------------------------------------
# The what-if
# ---------------------------------------------------------------------------------------------

def _scheduler(cfg: KubeSchedulerConfiguration, client: Any, feature_gates: Mapping[str, bool]) -> Scheduler:
    # OpportunisticBatching reuses the previous pod's ranking; it promises the same answer as
    # scoring afresh, which is what whatif does for every pod.
    return Scheduler(cfg, client, bind_workers=1, feature_gates={**feature_gates, "OpportunisticBatching": False})


def what_if(current_cfg: KubeSchedulerConfiguration, new_cfg: KubeSchedulerConfiguration, client: Any, *,
            seed: int = 0, sample: int | None = None, progress: Callable[[str], None] | None = None,
            feature_gates: Mapping[str, bool] | None = None) -> dict:
    """The report (the -o json document; see docs/whatif.md). client should be a ReadOnlyClient;
    feature_gates are the ones the scheduler runs with (its --feature-gates)."""
    gates = feature_gates or {}
    pending_current, pending_new = _scheduler(current_cfg, client, gates), _scheduler(new_cfg, client, gates)
    resources = sorted(set(pending_current.informers.requested) | set(pending_new.informers.requested))
    snapshot = read_snapshot(client, resources)
    profiles = set(pending_current.frameworks) | set(pending_new.frameworks)
    for scheduler in (pending_current, pending_new):
        load_scheduler(scheduler, snapshot)
    now = spread(pending_current)

    pending = pending_pods(snapshot, profiles)
    running = running_pods(snapshot, profiles)
    if sample is not None and sample < len(running):
        chosen = set(id(p) for p in random.Random(seed).sample(running, sample))
        running = [p for p in running if id(p) in chosen]
    counter = Progress(len(pending) + len(running), progress)

    pending_rows = _compare([PodInfo(pending_current.informers.get("pods", _key(p)) or p) for p in pending],
                            pending_current, pending_new, seed, counter, "pending")
    gated = {_key(p) for p in pending if (p.get("spec") or {}).get("schedulingGates")}
    for row in pending_rows:
        row["gated"] = row["pod"] in gated

    replaced = {_meta(p).get("uid") for p in running}
    replace_current, replace_new = _scheduler(current_cfg, client, gates), _scheduler(new_cfg, client, gates)
    for scheduler in (replace_current, replace_new):
        load_scheduler(scheduler, snapshot, without=replaced)
    replacement_rows = _compare([PodInfo(p) for p in recreated(running)], replace_current, replace_new,
                                seed, counter, "re-placement")
    for row, pod in zip(replacement_rows, running):
        row["running"] = pod["spec"]["nodeName"]

    return _report(current_cfg, new_cfg, snapshot, seed, sample, pending_rows, replacement_rows,
                   spread_report(now, spread(replace_current), spread(replace_new)))


def _newly_unschedulable(row: dict) -> bool:
    return row["current"]["node"] is not None and row["new"]["node"] is None


def _report(current_cfg: KubeSchedulerConfiguration, new_cfg: KubeSchedulerConfiguration,
            snapshot: ClusterSnapshot, seed: int, sample: int | None, pending_rows: list[dict],
            replacement_rows: list[dict], spread_doc: dict) -> dict:
    plugins: dict[str, int] = {}
    for row in pending_rows + replacement_rows:
        for entry in row["changedBy"]:
            if entry["plugin"]:
                plugins[entry["plugin"]] = plugins.get(entry["plugin"], 0) + 1
    newly = [row["pod"] for row in pending_rows + replacement_rows if _newly_unschedulable(row)]
    placed_new = [row for row in replacement_rows if row["new"]["node"] is not None]
    report = {
        "snapshot": {"resourceVersion": snapshot.resource_version, "nodes": len(snapshot.objects.get("nodes", ())),
                     "pods": len(snapshot.objects["pods"])},
        "configs": {label: {"source": cfg.source, "profiles": [p.scheduler_name for p in cfg.profiles]}
                    for label, cfg in (("current", current_cfg), ("new", new_cfg))},
        "seed": seed,
        "pending": pending_rows,
        "replacement": {
            "pods": len(replacement_rows),
            "sample": sample,
            "moved": sum(1 for row in replacement_rows if row["current"]["node"] is not None
                         and row["new"]["node"] is not None and row["current"]["node"] != row["new"]["node"]),
            "movedFromRunning": sum(1 for row in placed_new if row["new"]["node"] != row["running"]),
            "newlyUnschedulable": sum(1 for row in replacement_rows if _newly_unschedulable(row)),
            "rows": replacement_rows,
        },
        "spread": spread_doc,
        "plugins": [{"plugin": name, "pods": count}
                    for name, count in sorted(plugins.items(), key=lambda item: (-item[1], item[0]))],
        "newlyUnschedulable": newly,
    }
    judge(report)
    return report


def _named(pods: list[str], rows: dict[str, dict]) -> str:
    named = ", ".join(f"{pod} ({_changed_text(rows[pod]['changedBy']) or 'no plugin'})" for pod in pods[:MAX_NAMED])
    return named + (f" and {len(pods) - MAX_NAMED} more" if len(pods) > MAX_NAMED else "")


def judge(report: dict, max_newly_unschedulable: int = 0, max_moved_percent: float | None = None) -> None:
    """Hold the report to the bounds a rollout may not pass: at most max_newly_unschedulable
    pods the current configuration places become unschedulable (exit 3), and at most
    max_moved_percent of the re-placed pods land on another node (exit 4; None: no bound).
    Sets report["bounds"], report["refused"] (one line naming the pods and the plugins, or
    None) and report["exitCode"]."""
    rows = {row["pod"]: row for row in report["pending"] + report["replacement"]["rows"]}
    report["bounds"] = {"maxNewlyUnschedulable": max_newly_unschedulable, "maxMovedPercent": max_moved_percent}
    report["refused"], report["exitCode"] = None, EXIT_WITHIN_BOUNDS
    newly = report["newlyUnschedulable"]
    if len(newly) > max_newly_unschedulable:
        report["refused"] = (f"{len(newly)} pod(s) the current configuration places become unschedulable under the "
                             f"new one (at most {max_newly_unschedulable} allowed): {_named(newly, rows)}")
        report["exitCode"] = EXIT_NEWLY_UNSCHEDULABLE
        return
    replacement = report["replacement"]
    if max_moved_percent is None or not replacement["pods"]:
        return
    share = 100.0 * replacement["moved"] / replacement["pods"]
    if share > max_moved_percent:
        moved = [row["pod"] for row in replacement["rows"] if None not in (row["current"]["node"], row["new"]["node"])
                 and row["current"]["node"] != row["new"]["node"]]
        report["refused"] = (f"{replacement['moved']} of {replacement['pods']} re-placed pods ({share:.1f}%) land on "
                             f"another node (at most {max_moved_percent:g}% allowed): {_named(moved, rows)}")
        report["exitCode"] = EXIT_TOO_MANY_MOVES


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["   ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def _where(placement: dict) -> str:
    if placement["node"] is None:
        return "unschedulable"
    return placement["node"] + (f" (tie of {len(placement['tied'])})" if "tied" in placement else "")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _reasons(rows: list[dict]) -> list[str]:
    return [f"  {row['pod']} under the {label} configuration: {row[label]['reason']}\n"
            for row in rows for label in ("current", "new")
            if row[label]["node"] is None and (label == "new" or row["new"]["node"] is not None)]


def render(report: dict) -> str:
    snap, configs = report["snapshot"], report["configs"]
    out = [f"What-if of {configs['new']['source']} against {configs['current']['source']}: snapshot at "
           f"resourceVersion {snap['resourceVersion']}, {snap['nodes']} node(s), {snap['pods']} pod(s), "
           f"seed {report['seed']}\n"]
    pending = report["pending"]
    out.append(f"\nPending pods: {len(pending)}\n")
    if pending:
        out.append(_table(["POD", "PROFILE", "CURRENT", "NEW", "CHANGED BY"], [
            [row["pod"] + (" (gated)" if row["gated"] else ""), row["profile"], _where(row["current"]),
             _where(row["new"]), _changed_text(row["changedBy"])] for row in pending]))
        out.extend(_reasons(pending))
    replacement = report["replacement"]
    rows = replacement["rows"]
    placed = {label: sum(1 for row in rows if row[label]["node"] is not None) for label in ("current", "new")}
    sampled = f" (a sample of {replacement['sample']})" if replacement["sample"] is not None else ""
    out.append(f"\nRe-placement of {replacement['pods']} running pod(s){sampled} in creation order, from the "
               "cluster without them:\n")
    out.append(f"  placed: {placed['current']} under the current configuration, {placed['new']} under the new\n")
    share = f" ({100.0 * replacement['moved'] / len(rows):.1f}%)" if rows else ""
    out.append(f"  on another node under the new configuration than under the current: {replacement['moved']}"
               f"{share}; on another node than where they run now: {replacement['movedFromRunning']}\n")
    out.append(f"  newly unschedulable: {replacement['newlyUnschedulable']}\n")
    moves = [row for row in rows if row["current"]["node"] != row["new"]["node"]]
    if moves:
        listed = moves[:MAX_LISTED_MOVES]
        out.append(_table(["POD", "RUNNING ON", "CURRENT", "NEW", "CHANGED BY"], [
            [row["pod"], row["running"], _where(row["current"]), _where(row["new"]),
             _changed_text(row["changedBy"])] for row in listed]))
        if len(moves) > len(listed):
            out.append(f"  and {len(moves) - len(listed)} more (-o json lists every pod)\n")
        out.extend(_reasons(rows))
    if report["plugins"]:
        out.append("\nDecisions changed, per plugin:\n")
        out.append(_table(["PLUGIN", "PODS"], [[p["plugin"], str(p["pods"])] for p in report["plugins"]]))
    nodes = report["spread"]["nodes"]
    if nodes:
        out.append("\nSpread per node (now / after re-placement under the current / under the new configuration; "
                   "requested % of allocatable):\n")
        out.append(_table(["NODE", "ZONE", "PODS", "CPU%", "MEMORY%", "GPU%"], [
            [n["node"], n["zone"], "/".join(str(n[k]["pods"] or 0) for k in ("now", "current", "new"))]
            + ["/".join(_pct(n[k][r]) for k in ("now", "current", "new")) for r in ("cpu", "memory", "gpu")]
            for n in nodes]))
        out.append("\nPods per zone (now / current / new):\n")
        out.append(_table(["ZONE", "PODS"], [[z["zone"], f"{z['now']}/{z['current']}/{z['new']}"]
                                             for z in report["spread"]["zones"]]))
    if report["refused"]:
        out.append(f"\nRefused: {report['refused']}\n")
    elif report["newlyUnschedulable"]:
        out.append(f"\n{len(report['newlyUnschedulable'])} pod(s) the current configuration places become "
                   "unschedulable under the new one, within the bound.\n")
    else:
        out.append("\nNo pod the current configuration places becomes unschedulable under the new one.\n")
    return "".join(out)


def progress_to_stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()
