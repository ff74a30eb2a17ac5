"""The scheduler: the path of one pod, top to bottom.

informer events -> cache and queue (this file's first part, upstream eventhandlers.go)
-> schedule_one: pop, snapshot, PreFilter/Filter, PreScore/Score, select a host
-> assume the pod onto the node in the cache -> Reserve/Permit
-> bind on a worker thread (PreBind/Bind/PostBind) while the next pod is scheduled
-> the Scheduled event; or, on failure, PostFilter (preemption), the FailedScheduling event,
   the PodScheduled=False condition, and the pod back in the queue.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import numpy as np

from kubesched import klog, metrics
from kubesched.backend.cache import SchedulerCache
from kubesched.backend.informer import Informer
from kubesched.backend.queue import Nominator, SchedulingQueue
from kubesched.backend.trim import trim_metadata, trim_node, trim_pod
from kubesched.client import ApiClient
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.events import EventBroadcaster
from kubesched.extender import (
    EXTENDER_NAME,
    build_extenders,
    extender_scores,
    extenders_binding,
    find_nodes_that_pass_extenders,
)
from kubesched.framework.fit_error import Diagnosis, FitError, truncate_message
from kubesched.framework.interface import ActionType, ClusterEvent, Code, CycleState, EventResource, Status
from kubesched.framework.runtime import Framework, build_frameworks
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo

# numFeasibleNodesToFind constants (schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

NO_NODES_AVAILABLE = "no nodes available to schedule pods"

# Objects plugins read beside nodes and pods (namespace selectors of InterPodAffinity, the
# default spreading constraints of PodTopologySpread), each kept by its own informer.
OBJECT_PATHS = {
    "namespaces": "/api/v1/namespaces",
    "services": "/api/v1/services",
    "replicationcontrollers": "/api/v1/replicationcontrollers",
    "replicasets": "/apis/apps/v1/replicasets",
    "statefulsets": "/apis/apps/v1/statefulsets",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
}
TERMINAL_PHASES = ("Succeeded", "Failed")


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes to find before scoring (upstream numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        # Go's int32 division truncates toward zero.
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num_nodes = num_all_nodes * percentage // 100
    return max(num_nodes, MIN_FEASIBLE_NODES_TO_FIND)


def select_host(names: list[str], totals: list[int], rng: random.Random = random) -> str:  # type: ignore[assignment]
    """The highest total; ties broken uniformly at random (the same distribution as
    upstream's reservoir sampling, with one random draw instead of one per tie)."""
    return names[select_host_index(totals, rng)]


def select_host_index(totals: list[int], rng: random.Random = random) -> int:  # type: ignore[assignment]
    """select_host's choice as an index into totals."""
    best = max(totals)
    if totals.count(best) == 1:  # hot path: C-level scans, no per-node Python
        return totals.index(best)
    tied = np.flatnonzero(np.asarray(totals) == best)
    return int(tied[rng.randrange(len(tied))])


class ScheduleResult:
    __slots__ = ("suggested_host", "evaluated_nodes", "feasible_nodes")

    def __init__(self, suggested_host: str, evaluated_nodes: int, feasible_nodes: int):
        self.suggested_host = suggested_host
        self.evaluated_nodes = evaluated_nodes
        self.feasible_nodes = feasible_nodes


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return NO_NODES_AVAILABLE


def _node_events(old: dict, new: dict) -> ActionType:
    """Which node properties a scheduling decision reads changed (nodeSchedulingPropertiesChange)."""
    action = ActionType(0)
    os_, ns = old.get("spec") or {}, new.get("spec") or {}
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    ost, nst = old.get("status") or {}, new.get("status") or {}
    if bool(os_.get("unschedulable")) != bool(ns.get("unschedulable")) or os_.get("taints") != ns.get("taints"):
        action |= ActionType.UPDATE_NODE_TAINT
    if ost.get("allocatable") != nst.get("allocatable"):
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if om.get("labels") != nm.get("labels"):
        action |= ActionType.UPDATE_NODE_LABEL
    if [(c.get("type"), c.get("status")) for c in ost.get("conditions") or ()] != \
            [(c.get("type"), c.get("status")) for c in nst.get("conditions") or ()]:
        action |= ActionType.UPDATE_NODE_CONDITION
    if om.get("annotations") != nm.get("annotations"):
        action |= ActionType.UPDATE_NODE_ANNOTATION
    return action


def _is_terminal(raw: dict) -> bool:
    return (raw.get("status") or {}).get("phase") in TERMINAL_PHASES


def _assigned(raw: dict) -> bool:
    return bool((raw.get("spec") or {}).get("nodeName"))


class Scheduler:
    def __init__(self, cfg: KubeSchedulerConfiguration, client: ApiClient | None, *,
                 registry: dict[str, type] | None = None, event_client: ApiClient | None = None,
                 instance: str = "kubesched", bind_workers: int = 32, rng: random.Random | None = None):
        if registry is None:
            from kubesched.plugins.outoftree import full_registry

            registry = full_registry()
        self.cfg = cfg
        self.client = client
        self.rng = rng or random.Random()
        self.cache = SchedulerCache()
        self.nominator = Nominator()
        self.snapshot = Snapshot()
        self.broadcaster = EventBroadcaster(event_client or client, instance)
        self.object_informers: dict[str, Informer] = {}
        self.extenders = build_extenders(cfg.extenders)
        self.frameworks: dict[str, Framework] = {}
        for profile in cfg.profiles:
            self.frameworks.update(build_frameworks(
                [profile], registry, client=client, nominator=self.nominator, extenders=self.extenders,
                event_recorder=self.broadcaster.recorder(profile.scheduler_name),
                parallelism=cfg.parallelism, pdb_lister=self._pdbs, object_lister=self.list_objects))
        for fwk in self.frameworks.values():
            fwk.set_snapshot(self.snapshot)
        first = next(iter(self.frameworks.values()))
        plugin_events: dict[str, list[ClusterEvent]] = {}
        for fwk in self.frameworks.values():
            plugin_events.update(fwk.events_to_register())
        self.queue = SchedulingQueue(
            first.less, pre_enqueue=self._pre_enqueue, plugin_events=plugin_events,
            initial_backoff=cfg.pod_initial_backoff_seconds, max_backoff=cfg.pod_max_backoff_seconds,
            nominator=self.nominator)
        self.next_start_node_index = 0
        self.bind_pool = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="bind")
        self.binds_in_flight = 0
        self.binds_lock = threading.Lock()
        self._binding_goroutines = metrics.goroutines.labels("binding")  # resolved once, set per pod
        self._attempt_metrics: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.stop = threading.Event()
        self.node_informer: Informer | None = None
        self.pod_informer: Informer | None = None

    # =========================================================================================
    # Informer events -> cache and queue (upstream eventhandlers.go)
    # =========================================================================================

    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod: PodInfo) -> Status | None:
        fwk = self.frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue_plugins(pod) if fwk is not None else None

    def on_node_add(self, raw: dict) -> None:
        self.cache.add_node(raw)
        self.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd"))

    def on_node_update(self, old: dict, new: dict) -> None:
        self.cache.update_node(new)
        action = _node_events(old, new)
        if action:
            self.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.NODE, action, "NodeUpdate"))

    def on_node_delete(self, raw: dict) -> None:
        self.cache.remove_node((raw.get("metadata") or {}).get("name", ""))

    def on_pod_add(self, raw: dict) -> None:
        if _assigned(raw):
            if _is_terminal(raw):
                return
            pod = PodInfo(raw)
            self.cache.add_pod(pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"))
            return
        pod = PodInfo(raw)
        if self.responsible_for(pod) and not _is_terminal(raw):
            self.queue.add(pod)

    def on_pod_update(self, old_raw: dict, new_raw: dict) -> None:
        if _assigned(new_raw):
            self._on_assigned_pod_update(old_raw, new_raw)
            return
        if ((new_raw.get("spec") or {}).get("schedulerName") or "default-scheduler") not in self.frameworks:
            return
        if self.cache.is_assumed((new_raw.get("metadata") or {}).get("uid", "")):
            return  # binding (or waiting on Permit): the binding cycle decides its fate
        new_pod = PodInfo(new_raw)
        if _is_terminal(new_raw):
            self.queue.delete(new_pod)
            return
        self.queue.update(PodInfo(old_raw), new_pod)

    def _on_assigned_pod_update(self, old_raw: dict, new_raw: dict) -> None:
        # Hot path: every bind comes back here, so the old object is parsed only when needed.
        was_assigned = _assigned(old_raw)
        if was_assigned and not _is_terminal(new_raw) and old_raw.get("spec") == new_raw.get("spec") and \
                (old_raw.get("metadata") or {}).get("labels") == (new_raw.get("metadata") or {}).get("labels"):
            return  # a status-only change: nothing the scheduler reads
        new_pod = PodInfo(new_raw)
        if not was_assigned:
            # Bound: leaves the queue, enters (or confirms in) the cache.
            self.queue.delete(new_pod)
        if _is_terminal(new_raw):
            self.cache.remove_pod(new_pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"))
            return
        self.cache.update_pod(new_pod)
        if not was_assigned:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"))
            return
        action = ActionType(0)
        if (old_raw.get("metadata") or {}).get("labels") != (new_raw.get("metadata") or {}).get("labels"):
            action |= ActionType.UPDATE_POD_LABEL
        if PodInfo(old_raw).requests != new_pod.requests:
            action |= ActionType.UPDATE_POD_SCALE_DOWN
        if action:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, action, "AssignedPodUpdate"))

    def on_pod_delete(self, raw: dict) -> None:
        pod = PodInfo(raw)
        if _assigned(raw):
            self.queue.delete(pod)
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"))
            return
        if self.responsible_for(pod):
            self.queue.delete(pod)
            # A waiting pod rejected here was assumed: its room is free again.
            if self.frameworks[pod.scheduler_name].reject_waiting_pod(pod.uid):
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"))

    def _pdbs(self) -> list[dict]:
        return self.list_objects("poddisruptionbudgets")

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict]:
        informer = self.object_informers.get(resource)
        if informer is not None and informer.synced.is_set():
            items = informer.list()
        elif self.client is not None:
            # Not watching (explain, tests): read the API directly.
            items = self.client.list(OBJECT_PATHS[resource]).get("items") or []
        else:
            return []
        if namespace is None:
            return items
        return [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]

    def start_informers(self, stop: threading.Event) -> None:
        if self.client is None:
            raise RuntimeError("start_informers needs an API client")
        # Extenders are sent whole pods and nodes, as kube-scheduler sends them.
        pod_transform, node_transform = (trim_metadata, trim_metadata) if self.extenders else (trim_pod, trim_node)
        self.node_informer = Informer(self.client, "/api/v1/nodes", name="nodes", on_add=self.on_node_add,
                                      on_update=self.on_node_update, on_delete=self.on_node_delete,
                                      page_size=500, transform=node_transform).start(stop)
        self.pod_informer = Informer(self.client, "/api/v1/pods", name="pods", on_add=self.on_pod_add,
                                     on_update=self.on_pod_update, on_delete=self.on_pod_delete,
                                     page_size=500, transform=pod_transform).start(stop)
        for resource, path in OBJECT_PATHS.items():
            self.object_informers[resource] = Informer(
                self.client, path, name=resource, on_add=_ignore, on_update=_ignore2,
                on_delete=_ignore, page_size=500).start(stop)

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in (self.node_informer, self.pod_informer, *self.object_informers.values()):
            if informer is None:
                return False
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(remaining):
                return False
        return True

    def caches_synced(self) -> bool:
        informers = (self.node_informer, self.pod_informer, *self.object_informers.values())
        return len(self.object_informers) == len(OBJECT_PATHS) and all(
            i is not None and i.synced.is_set() for i in informers)

    # =========================================================================================
    # The scheduling loop
    # =========================================================================================

    def run(self, stop: threading.Event) -> None:
        """Schedule pods until stop is set (call after the caches synced)."""
        self.stop = stop
        self.broadcaster.start()
        self.queue.run_flushers(stop)
        last_cleanup = time.monotonic()
        while not stop.is_set():
            pod = self.queue.pop(timeout=0.5)
            if time.monotonic() - last_cleanup > 1.0:
                self.cache.cleanup_expired_assumed_pods()
                last_cleanup = time.monotonic()
            if pod is None:
                continue
            try:
                self.schedule_one(pod)
            except Exception as err:  # noqa: BLE001 - one pod's bug must not stop the scheduler
                klog.error("Error scheduling pod; retrying", pod=pod.key, err=repr(err))
                pod.unschedulable_plugins = set()
                pod.pending_plugins = set()
                self.queue.add_unschedulable_if_not_present(pod)

    def wait_for_binds(self, timeout: float) -> bool:
        """Wait until no bind is queued or in flight (True), or timeout (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.binds_lock:
                if self.binds_in_flight == 0:
                    return True
            time.sleep(0.01)
        return False

    def shutdown(self, timeout: float = 5.0) -> None:
        self.queue.close()
        self.bind_pool.shutdown(wait=True, cancel_futures=False)
        self.broadcaster.shutdown(timeout)

    def schedule_one(self, pod: PodInfo) -> None:
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None:
            self.queue.done(pod.uid)
            return
        if pod.deleting:
            fwk.event_recorder.eventf(pod.raw, "Warning", "FailedScheduling", "Scheduling",
                                      f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            self.queue.done(pod.uid)
            return
        if self.cache.is_assumed(pod.uid) or self.cache.has_pod(pod.uid):
            self.queue.done(pod.uid)
            return
        if klog.V(3):
            klog.info("Attempting to schedule pod", pod=pod.key)
        start = time.perf_counter()
        state = CycleState()
        try:
            result = self.schedule_pod(fwk, state, pod)
        except FitError as fit:
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
            nominated: str | None = None
            nominating = False
            if fwk.has_post_filter_plugins():
                nominated, status = fwk.run_post_filter_plugins(state, pod, fit.diagnosis.node_to_status)
                fit.diagnosis.post_filter_msg = status.message()
                nominating = nominated is not None
                if status.code == Code.ERROR:
                    klog.error("Status after running PostFilter plugins for pod", pod=pod.key,
                               status=status.message())
            status = Status(Code.UNSCHEDULABLE, str(fit))
            self.handle_scheduling_failure(fwk, pod, status, fit, nominated if nominating else None,
                                           start, clear_nomination=False)
            return
        except NoNodesAvailable:
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
            self.handle_scheduling_failure(fwk, pod, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_NODES_AVAILABLE),
                                           None, None, start, clear_nomination=True)
            return
        except Exception as err:  # noqa: BLE001 - reported as a scheduler error, pod retried
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
            klog.error("Error selecting node for pod", pod=pod.key, err=str(err))
            self.handle_scheduling_failure(fwk, pod, Status(Code.ERROR, str(err)), None, None, start,
                                           clear_nomination=True)
            return
        metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
        self._assume_and_bind(fwk, state, pod, result, start)

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo,
                     explain: dict[str, Any] | None = None) -> ScheduleResult:
        """Filter, score and select a node for pod (upstream schedulePod). Raises FitError."""
        self.cache.update_snapshot(self.snapshot)
        if self.snapshot.num_nodes() == 0:
            raise NoNodesAvailable()
        feasible, diagnosis = self.find_nodes_that_fit_pod(fwk, state, pod, explain)
        if not feasible:
            raise FitError(pod.key, self.snapshot.num_nodes(), diagnosis)
        if len(feasible) == 1 and explain is None:
            return ScheduleResult(feasible[0].name, 1 + len(diagnosis.node_to_status), 1)
        totals = self.prioritize_nodes(fwk, state, pod, feasible,
                                       explain.setdefault("scores", {}) if explain is not None else None)
        host = feasible[select_host_index(totals, self.rng)].name
        if explain is not None:
            explain["totals"] = dict(zip((n.name for n in feasible), totals))
        return ScheduleResult(host, len(feasible) + len(diagnosis.node_to_status), len(feasible))

    def find_nodes_that_fit_pod(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                explain: dict[str, Any] | None = None) -> tuple[list[NodeInfo], Diagnosis]:
        diagnosis = Diagnosis()
        all_nodes = self.snapshot.node_info_list
        pre_result, status, plugins = fwk.run_pre_filter_plugins(state, pod, all_nodes)
        diagnosis.unschedulable_plugins = set(plugins)
        if status is not None and not status.is_success():
            if not status.is_rejected():
                raise RuntimeError(status.message())
            diagnosis.node_to_status.absent_nodes_status = status
            diagnosis.pre_filter_msg = status.message()
            diagnosis.add_plugin_status(status)
            return [], diagnosis
        if pod.nominated_node_name and explain is None:
            node = self.snapshot.get(pod.nominated_node_name)
            if node is not None:
                feasible = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, [node])
                if feasible and self.extenders:
                    feasible = find_nodes_that_pass_extenders(self.extenders, pod, feasible, diagnosis.node_to_status)
                if feasible:
                    return feasible, diagnosis
        nodes = all_nodes
        if pre_result is not None and not pre_result.all_nodes():
            node_map = self.snapshot.node_info_map
            nodes = sorted((node_map[n] for n in pre_result.node_names or () if n in node_map),
                           key=lambda n: n.index)
            diagnosis.node_to_status.absent_nodes_status = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]")
        feasible = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, nodes,
                                                     find_all=explain is not None)
        processed = len(feasible) + len(diagnosis.node_to_status)
        if explain is None:
            self.next_start_node_index = (self.next_start_node_index + processed) % len(all_nodes)
        if self.extenders and feasible:
            passed = find_nodes_that_pass_extenders(self.extenders, pod, feasible, diagnosis.node_to_status)
            if len(passed) != len(feasible):
                diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
            feasible = passed
        return feasible, diagnosis

    def find_nodes_that_pass_filters(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                     diagnosis: Diagnosis, nodes: list[NodeInfo],
                                     find_all: bool = False) -> list[NodeInfo]:
        # Hot path: the per-node loop of the scheduler.
        num_all = len(nodes)
        if not num_all:
            return []
        percentage = fwk.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.cfg.percentage_of_nodes_to_score
        to_find = num_all if find_all else num_feasible_nodes_to_find(percentage, num_all)
        if not find_all and not fwk.has_score_plugins() and \
                not any(e.is_filter() or e.is_prioritizer() for e in self.extenders):
            to_find = 1
        start_index = 0 if find_all else self.next_start_node_index
        if not fwk.has_filter_plugins():
            return [nodes[(start_index + i) % num_all] for i in range(min(to_find, num_all))]
        started = time.perf_counter()
        plugins = fwk.active_filter_plugins(state)
        feasible: list[NodeInfo] = []
        statuses = diagnosis.node_to_status
        code = "Success"
        position = 0
        try:
            # Chunks of exactly the number still needed: never more nodes are evaluated than
            # node-by-node filtering would, so the round-robin start index moves the same.
            while position < num_all and len(feasible) < to_find:
                size = min(to_find - len(feasible), num_all - position)
                first = (start_index + position) % num_all
                chunk = nodes[first:first + size]
                if len(chunk) < size:  # wrapped around the end of the node list
                    chunk += nodes[:size - len(chunk)]
                position += size
                rejected = self._filter_chunk(fwk, state, pod, chunk, plugins, feasible)
                statuses.update((node.name, status) for node, status in rejected)
                # Rejections share a few Status instances; each counts once in the diagnosis.
                for status in {id(status): status for _unused, status in rejected}.values():
                    diagnosis.add_plugin_status(status)
            return feasible
        except Exception:
            code = "Error"
            raise
        finally:
            fwk.observe_duration("Filter", code, started)

    def _filter_chunk(self, fwk: Framework, state: CycleState, pod: PodInfo, chunk: list[NodeInfo],
                      plugins: list[Any], feasible: list[NodeInfo]) -> list[tuple[NodeInfo, Status]]:
        """Filter one chunk, appending fitting nodes to feasible in chunk order."""
        if not self.nominator.has_nominated_pods():
            passed, rejected = fwk.run_filter_plugins_on_nodes(state, pod, chunk, plugins)
            feasible.extend(passed)
            return rejected
        # Nodes with nominated pods need the two-pass check; the rest go in one batch.
        plain = [n for n in chunk if not self.nominator.nominated_pods_for_node(n.name)]
        passed_plain, rejected = fwk.run_filter_plugins_on_nodes(state, pod, plain, plugins)
        fits = {n.name for n in passed_plain}
        for node in chunk:
            if self.nominator.nominated_pods_for_node(node.name):
                status = fwk.run_filter_plugins_with_nominated_pods(state, pod, node, plugins)
                if status is None or status.code == Code.SUCCESS:
                    fits.add(node.name)
                elif status.code == Code.ERROR:
                    raise RuntimeError(status.message())
                else:
                    rejected.append((node, status))
        feasible.extend(n for n in chunk if n.name in fits)
        return rejected

    def prioritize_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                         breakdown: dict[str, dict[str, int]] | None = None) -> list[int]:
        if not fwk.has_score_plugins() and not self.extenders:
            return [1] * len(nodes)
        status = fwk.run_pre_score_plugins(state, pod, nodes)
        if status is not None and not status.is_success():
            raise RuntimeError(status.message())
        totals = fwk.run_score_plugins(state, pod, nodes, breakdown)
        if self.extenders:
            by_node = extender_scores(self.extenders, pod, nodes)
            if by_node:
                totals = [total + by_node.get(node.name, 0) for total, node in zip(totals, nodes)]
                if breakdown is not None:
                    breakdown[EXTENDER_NAME] = {node.name: by_node.get(node.name, 0) for node in nodes}
        return totals

    # =========================================================================================
    # Assume, Reserve, Permit, then bind asynchronously
    # =========================================================================================

    def _assume_and_bind(self, fwk: Framework, state: CycleState, pod: PodInfo, result: ScheduleResult,
                         start: float) -> None:
        host = result.suggested_host
        try:
            assumed = self.cache.assume_pod(pod, host)
        except Exception as err:  # noqa: BLE001
            self.handle_scheduling_failure(fwk, pod, Status(Code.ERROR, str(err)), None, None, start,
                                           clear_nomination=True)
            return
        self.nominator.delete_nominated_pod_if_exists(pod)
        status = fwk.run_reserve_plugins_reserve(state, assumed, host)
        if status is None:
            status, wait_times = fwk.run_permit_plugins(state, assumed, host)
            if status is not None and status.code == Code.WAIT:
                fwk.add_waiting_pod(assumed, wait_times)
                status = None
        if status is not None:
            fwk.run_reserve_plugins_unreserve(state, assumed, host)  # as upstream's unreserveAndForget
            self.cache.forget_pod(assumed)
            fit = None
            if status.is_rejected():
                diagnosis = Diagnosis()
                diagnosis.node_to_status[host] = status
                diagnosis.add_plugin_status(status)
                fit = FitError(pod.key, 1, diagnosis)
                status = Status(status.code, str(fit), plugin=status.plugin)
            self.handle_scheduling_failure(fwk, pod, status, fit, None, start, clear_nomination=True)
            return
        with self.binds_lock:
            self.binds_in_flight += 1
            self._binding_goroutines.set(self.binds_in_flight)
        self.bind_pool.submit(self._binding_cycle, fwk, state, pod, assumed, result, start)

    def _binding_cycle(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                       result: ScheduleResult, start: float, permit_waited: bool = False) -> None:
        host = result.suggested_host
        self.queue.done(pod.uid)
        waiting = fwk.get_waiting_pod(pod.uid) if not permit_waited else None
        if waiting is not None:
            self._wait_on_permit(fwk, state, pod, assumed, result, start, waiting)
            return
        if self.stop.is_set():
            # Leadership is gone or we are shutting down, and binds queued behind the client's
            # rate limit must not land after the lease has passed on: the next leader may have
            # decided differently. The pod stays Pending for it.
            fwk.run_reserve_plugins_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            with self.binds_lock:
                self.binds_in_flight -= 1
                self._binding_goroutines.set(self.binds_in_flight)
            return
        status: Status | None
        bind_start = time.perf_counter()
        try:
            status = fwk.run_pre_bind_plugins(state, assumed, host)
            if status is None or status.is_success():
                bound, status = extenders_binding(self.extenders, assumed, host) if self.extenders else (False, None)
                if not bound:
                    status = fwk.run_bind_plugins(state, assumed, host)
        except Exception as err:  # noqa: BLE001 - a failed bind is retried, never fatal
            status = Status(Code.ERROR, str(err), error=err)
        finally:
            self.cache.finish_binding(assumed)
            metrics.binding_duration.observe(time.perf_counter() - bind_start)
            with self.binds_lock:
                self.binds_in_flight -= 1
                self._binding_goroutines.set(self.binds_in_flight)
        if status is not None and not status.is_success():
            if klog.V(1):
                klog.info("Failed to bind pod", pod=pod.key, node=host, err=status.message())
            fwk.run_reserve_plugins_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            # The forgotten pod freed room, like a deleted pod would.
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
                pre_check=lambda other: other.uid != pod.uid)
            self.handle_scheduling_failure(fwk, pod, status, None, None, start, clear_nomination=True)
            return
        fwk.event_recorder.eventf(pod.raw, "Normal", "Scheduled", "Binding",
                                  f"Successfully assigned {pod.namespace}/{pod.name} to {host}")
        if klog.V(2):
            klog.info("Successfully bound pod to node", pod=pod.key, node=host,
                      evaluatedNodes=result.evaluated_nodes, feasibleNodes=result.feasible_nodes)
        elapsed = time.perf_counter() - start
        attempts, duration = self._attempt_series(metrics.SCHEDULED, fwk.profile_name)
        attempts.inc()
        duration.observe(elapsed)
        metrics.pod_scheduling_attempts.observe(pod.attempts)
        if pod.initial_attempt_ts:
            metrics.pod_scheduling_sli_duration.labels(metrics.attempts_label(pod.attempts)).observe(
                max(0.0, time.time() - pod.initial_attempt_ts))
        fwk.run_post_bind_plugins(state, assumed, host)

    def _wait_on_permit(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                        result: ScheduleResult, start: float, waiting: Any) -> None:
        """WaitOnPermit without holding a bind thread: the binding cycle resumes on a bind
        thread once the waiting pod is allowed or rejected."""
        host = result.suggested_host
        # NominatedNodeNameForExpectation (on by default in v1.37): tell other components where
        # the waiting pod is about to go.
        if (assumed.raw.get("status") or {}).get("nominatedNodeName") != host:
            self._submit_status_patch_raw(pod, {"status": {"nominatedNodeName": host}})
        if klog.V(4):
            klog.info("Pod waiting on permit", pod=pod.key)

        def resume(_signal: Status) -> None:
            with self.binds_lock:
                self.binds_in_flight += 1
                self._binding_goroutines.set(self.binds_in_flight)
            self.bind_pool.submit(self._after_permit, fwk, state, pod, assumed, result, start, waiting)

        with self.binds_lock:  # a waiting pod is not a bind in flight: shutdown need not wait for it
            self.binds_in_flight -= 1
            self._binding_goroutines.set(self.binds_in_flight)
        waiting.on_done(resume)

    def _after_permit(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                      result: ScheduleResult, start: float, waiting: Any) -> None:
        status = fwk.finish_waiting(waiting)
        if status is None:
            self._binding_cycle(fwk, state, pod, assumed, result, start, permit_waited=True)
            return
        host = result.suggested_host
        try:
            if status.is_rejected():
                klog.info("Pod rejected while waiting on permit", pod=pod.key, status=status.message())
            else:
                klog.error("Failed waiting on permit for pod", pod=pod.key, err=status.message())
            fwk.run_reserve_plugins_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            # The forgotten pod freed room, like a deleted pod would (handleBindingCycleError).
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
                pre_check=(lambda other: other.uid != pod.uid) if status.is_rejected() else None)
            fit = None
            if status.is_rejected():
                diagnosis = Diagnosis()
                diagnosis.node_to_status[host] = status
                diagnosis.unschedulable_plugins = {status.plugin} if status.plugin else set()
                fit = FitError(pod.key, 1, diagnosis)
                status = Status(status.code, str(fit), plugin=status.plugin)
            self.handle_scheduling_failure(fwk, pod, status, fit, None, start, clear_nomination=True)
        finally:
            with self.binds_lock:
                self.binds_in_flight -= 1
                self._binding_goroutines.set(self.binds_in_flight)

    # =========================================================================================
    # Failure: event, condition, nomination, back to the queue
    # =========================================================================================

    def _attempt_series(self, result: str, profile: str) -> tuple[Any, Any]:
        """schedule_attempts_total and scheduling_attempt_duration_seconds for (result, profile),
        resolved once: labels() takes a lock and a lookup on every call."""
        key = (result, profile)
        series = self._attempt_metrics.get(key)
        if series is None:
            series = self._attempt_metrics[key] = (metrics.schedule_attempts.labels(result, profile),
                                                   metrics.scheduling_attempt_duration.labels(result, profile))
        return series

    def handle_scheduling_failure(self, fwk: Framework, pod: PodInfo, status: Status, fit: FitError | None,
                                  nominated_node: str | None, start: float, clear_nomination: bool) -> None:
        rejected = status.is_rejected()
        reason = "Unschedulable" if rejected else "SchedulerError"
        result = metrics.UNSCHEDULABLE if rejected else metrics.ERROR
        attempts, duration = self._attempt_series(result, fwk.profile_name)
        attempts.inc()
        duration.observe(time.perf_counter() - start)
        message = status.message()
        if fit is not None:
            pod.unschedulable_plugins = set(fit.diagnosis.unschedulable_plugins)
            pod.pending_plugins = set(fit.diagnosis.pending_plugins)
            if klog.V(2):
                klog.info("Unable to schedule pod; no fit; waiting", pod=pod.key, err=message)
        else:
            pod.unschedulable_plugins = set()
            pod.pending_plugins = set()
            if message == NO_NODES_AVAILABLE:
                if klog.V(2):
                    klog.info("Unable to schedule pod; no nodes are registered to the cluster; waiting", pod=pod.key)
            else:
                klog.error("Error scheduling pod; retrying", pod=pod.key, err=message)
        current = self.pod_informer.get(pod.key) if self.pod_informer is not None else pod.raw
        if current is None:
            klog.info("Pod doesn't exist in informer cache", pod=pod.key)
            self.queue.done(pod.uid)
        elif _assigned(current):
            klog.info("Pod has been assigned to node. Abort adding it back to queue.", pod=pod.key,
                      node=(current.get("spec") or {}).get("nodeName"))
            self.queue.done(pod.uid)
        else:
            fresh = PodInfo(current) if current is not pod.raw else pod
            if fresh is not pod:
                fresh.unschedulable_plugins = pod.unschedulable_plugins
                fresh.pending_plugins = pod.pending_plugins
            self.queue.add_unschedulable_if_not_present(fresh)
        if nominated_node:
            self.nominator.add_nominated_pod(pod, nominated_node)
        msg = truncate_message(message)
        fwk.event_recorder.eventf(pod.raw, "Warning", "FailedScheduling", "Scheduling", msg)
        self._submit_status_patch(pod, reason, message, nominated_node, clear_nomination)

    def _submit_status_patch(self, pod: PodInfo, reason: str, message: str, nominated_node: str | None,
                             clear_nomination: bool) -> None:
        patch = status_patch(pod.raw, reason, message, nominated_node, clear_nomination)
        if patch is not None:
            self._submit_status_patch_raw(pod, patch)

    def _submit_status_patch_raw(self, pod: PodInfo, patch: dict) -> None:
        if self.client is None:
            return
        client = self.client

        def send() -> None:
            try:
                client.patch_pod_status(pod.namespace, pod.name, patch)
            except Exception as err:  # noqa: BLE001
                klog.error("Error updating pod", pod=pod.key, err=str(err))

        self.bind_pool.submit(send)


def status_patch(raw: dict, reason: str, message: str, nominated_node: str | None,
                 clear_nomination: bool) -> dict | None:
    """The pods/status patch for a failed attempt, or None when nothing would change
    (upstream updatePod + podutil.UpdatePodCondition)."""
    status = raw.get("status") or {}
    existing = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
    patch_status: dict[str, Any] = {}
    if existing is None or (existing.get("status"), existing.get("reason"), existing.get("message")) != \
            ("False", reason, message):
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        transition = now if existing is None or existing.get("status") != "False" else \
            existing.get("lastTransitionTime") or now
        patch_status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": reason,
                                       "message": message, "lastProbeTime": None,
                                       "lastTransitionTime": transition}]
    current_nnn = status.get("nominatedNodeName") or ""
    if nominated_node is not None and nominated_node != current_nnn:
        patch_status["nominatedNodeName"] = nominated_node
    elif clear_nomination and current_nnn:
        patch_status["nominatedNodeName"] = None
    return {"status": patch_status} if patch_status else None


def _ignore(_obj: dict) -> None:
    pass


def _ignore2(_old: dict, _new: dict) -> None:
    pass
