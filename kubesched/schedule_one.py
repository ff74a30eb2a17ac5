"""One scheduling cycle, then the binding cycle on a worker thread (upstream schedule_one.go).

schedule_one pops nothing itself: the loop in scheduler.py hands it a pod. The scheduling
cycle (PreFilter, Filter, PostFilter on failure, PreScore, Score, select a host, assume,
Reserve, Permit) returns a Status; every failure, of either cycle, reaches one handler,
handle_scheduling_failure, which records the attempt, requeues the pod, sends the
FailedScheduling event and patches the PodScheduled condition.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

from kubesched import klog, metrics
from kubesched.backend.api_dispatcher import APIDispatcher
from kubesched.backend.cache import SchedulerCache
from kubesched.backend.pod_groups import PodGroups, group_key
from kubesched.backend.queue import Nominator, SchedulingQueue
from kubesched.client import NO_ANSWER, ApiClient, read_back
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.extender import EXTENDER_NAME, extender_scores, extenders_binding, find_nodes_that_pass_extenders
from kubesched.framework.batch import UnrankedNodes, ranked_nodes
from kubesched.framework.fit_error import Diagnosis, FitError, truncate_message
from kubesched.framework.interface import ActionType, ClusterEvent, Code, CycleState, EventResource, Status
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo, assigned

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework

# numFeasibleNodesToFind constants (schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

NO_NODES_AVAILABLE = "no nodes available to schedule pods"

# What a failure does to .status.nominatedNodeName (upstream NominatingInfo): None leaves it
# as it is (ModeNoop), CLEAR_NOMINATION empties it, a node name sets it (ModeOverride).
CLEAR_NOMINATION = ""
# The PodGroup condition the pod group cycle writes (scheduling/v1beta1 PodGroupInitiallyScheduled).
POD_GROUP_SCHEDULED = "PodGroupInitiallyScheduled"
# errPodGroupUnschedulable's text, which leads a member's message when its group was rejected.
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes to find before scoring (upstream numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        # Go's int32 division truncates toward zero.
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num_nodes = num_all_nodes * percentage // 100
    return max(num_nodes, MIN_FEASIBLE_NODES_TO_FIND)


def select_host(names: list[str], totals: list[int]) -> str:
    """The highest total; among equal totals, the node v1.37's selectHost pops first.

    Upstream heapifies the scores in feasible-node order (container/heap, higher TotalScore
    first, then higher Randomizer) and pops the root. Randomizer is only drawn when
    extenders score, so without extenders ties are broken by the heap's layout, not at random."""
    return names[select_host_index(totals)]


def select_host_index(totals: list[int]) -> int:
    """select_host's choice as an index into totals."""
    best = max(totals)
    if totals.count(best) == 1:  # hot path: C-level scans, no per-node Python
        return totals.index(best)
    return heap_root(totals, best)


def heap_root(totals: list[int], best: int) -> int:
    """The index Go's heap.Init leaves at the root (Less = greater total; equal totals never
    swap), without building the heap.

    Heapifying bottom-up leaves at each position its own element when no child subtree holds
    a greater total, else the root of the child subtree with the greater maximum, the left one
    on a tie. So from the root, walk into the left subtree whenever it holds a best total, else
    the right, and stop at the first best total on the way. A subtree's positions k levels
    down form one contiguous run of the list, so each check is a few C-level slice scans."""
    n = len(totals)
    i = 0
    while totals[i] != best:
        left = 2 * i + 1
        first = last = left
        while first < n:  # does the subtree under `left` hold a best total?
            if best in totals[first:last + 1]:
                i = left
                break
            first, last = 2 * first + 1, 2 * last + 2
        else:
            i = left + 1
    return i


class ScheduleResult:
    """The chosen node, how many nodes were looked at, and, when the cycle failed, what the
    failure does to the pod's nomination."""

    __slots__ = ("suggested_host", "evaluated_nodes", "feasible_nodes", "nominating")

    def __init__(self, suggested_host: str = "", evaluated_nodes: int = 0, feasible_nodes: int = 0,
                 nominating: str | None = CLEAR_NOMINATION):
        self.suggested_host = suggested_host
        self.evaluated_nodes = evaluated_nodes
        self.feasible_nodes = feasible_nodes
        self.nominating = nominating


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return NO_NODES_AVAILABLE


def status_patch(raw: dict, reason: str, message: str, nominating: str | None, *,
                 force: bool = False) -> dict | None:
    """The pods/status patch for a failed attempt, or None when nothing would change
    (upstream updatePod + podutil.UpdatePodCondition). With force, the condition is in the patch
    even when raw has it already: it must replace an earlier patch that is still waiting."""
    status = raw.get("status") or {}
    # 1.37 tracks the pod's generation in its conditions (PodObservedGenerationTracking, on by
    # default; podutil.CalculatePodConditionObservedGeneration). 0 is omitted, as Go's omitempty.
    generation = (raw.get("metadata") or {}).get("generation") or 0
    existing = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
    patch_status: dict[str, Any] = {}
    unchanged = existing is not None and (existing.get("status"), existing.get("reason"), existing.get("message"),
                                          existing.get("observedGeneration") or 0) == ("False", reason, message,
                                                                                       generation)
    if force or not unchanged:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        transition = now if existing is None or existing.get("status") != "False" else \
            existing.get("lastTransitionTime") or now
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                     "lastProbeTime": None, "lastTransitionTime": transition}
        if generation:
            condition["observedGeneration"] = generation
        patch_status["conditions"] = [condition]
    current_nnn = status.get("nominatedNodeName") or ""
    if nominating is not None and nominating != current_nnn:
        patch_status["nominatedNodeName"] = nominating or None
    return {"status": patch_status} if patch_status else None


class SchedulingCycle:
    """The Scheduler's scheduling and binding cycles; scheduler.py assembles the attributes used here."""

    cfg: KubeSchedulerConfiguration
    client: ApiClient | None
    rng: random.Random
    cache: SchedulerCache
    nominator: Nominator
    snapshot: Snapshot
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    extenders: list
    next_start_node_index: int
    bind_pool: ThreadPoolExecutor
    api_dispatcher: APIDispatcher
    binds_in_flight: int
    binds_lock: threading.Lock
    stop: threading.Event
    _binding_goroutines: Any
    _attempt_metrics: dict[tuple[str, str], tuple[Any, Any]]
    current_pod: Callable[[PodInfo], dict | None]  # eventhandlers.EventHandlers.current_pod
    pod_groups: PodGroups | None = None  # with the GenericWorkload gate on
    snapshot_pinned = False  # a PodGroupPostFilter simulating on a fork: the cache does not refresh it

    def schedule_one(self, pod: PodInfo) -> None:
        """Schedule one popped pod: the scheduling cycle here, the binding cycle on a worker."""
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None or self._skip_pod_schedule(fwk, pod):
            self.queue.done(pod.uid)
            return
        if pod.pod_group and self.pod_groups is not None:
            self.schedule_one_pod_group(fwk, pod)
            return
        if klog.V(3):
            klog.info("Attempting to schedule pod", pod=pod.key)
        start = time.perf_counter()
        state = CycleState()
        result, assumed, status = self.scheduling_cycle(fwk, state, pod)
        if status is not None:
            self.handle_scheduling_failure(fwk, pod, status, result.nominating, start)
            return
        self._start_binding(fwk, state, pod, assumed, result, start)

    def _start_binding(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                       result: ScheduleResult, start: float) -> None:
        # A PodScheduled=False of an earlier attempt that is still waiting would land after
        # the binding; the nomination it may carry is moot once the pod is bound.
        self.api_dispatcher.drop(("pods", pod.uid))
        with self.binds_lock:
            self.binds_in_flight += 1
            self._binding_goroutines.set(self.binds_in_flight)
        self.bind_pool.submit(self.binding_cycle, fwk, state, pod, assumed, result, start)

    def _skip_pod_schedule(self, fwk: Framework, pod: PodInfo) -> bool:
        if pod.deleting:
            fwk.event_recorder.eventf(pod.raw, "Warning", "FailedScheduling", "Scheduling",
                                      f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            return True
        return self.cache.is_assumed(pod.uid) or self.cache.has_pod(pod.uid)

    # =========================================================================================
    # The pod group cycle (GenericWorkload)
    # =========================================================================================

    def schedule_one_pod_group(self, fwk: Framework, first: PodInfo) -> None:
        """Schedule a PodGroup's queued pods as one (upstream scheduleOnePodGroup with the
        default algorithm, podGroupSchedulingDefaultAlgorithm): each pod is placed and assumed
        in turn, GangScheduling's PlacementFeasible judges the group before the first and after
        each; unless the group ends feasible every assumption is undone, so no pod of a gang
        that cannot reach minCount keeps a place. PostFilter is not run for a member, as
        upstream, which runs the group's PodGroupPostFilter instead (DefaultPreemption's, which
        preempts for the whole group). The group's pods that arrive meanwhile wait in the queue
        and return with the group."""
        assert self.pod_groups is not None
        start = time.perf_counter()
        namespace, name = first.namespace, first.pod_group
        others = [uid for uid in self.pod_groups.member_uids(namespace, name) if uid != first.uid]
        pods = [first]
        for pod in self.queue.pop_pod_group_members(group_key(namespace, name), others):
            if self._skip_pod_schedule(fwk, pod):
                self.queue.done(pod.uid)
                continue
            pods.append(pod)
        try:
            self._schedule_pod_group_members(fwk, pods, start)
        finally:
            self.queue.pod_group_attempted()

    def _schedule_pod_group_members(self, fwk: Framework, pods: list[PodInfo], start: float) -> None:
        assert self.pod_groups is not None
        namespace, name = pods[0].namespace, pods[0].pod_group
        pod_group = self.pod_groups.pod_group(namespace, name)
        invalid = self._validate_pod_group(pods, pod_group)
        if invalid:
            status = Status(Code.ERROR, invalid)
            for pod in pods:
                self.handle_scheduling_failure(self.frameworks.get(pod.scheduler_name) or fwk, pod, status,
                                               CLEAR_NOMINATION, start, group=(len(pods), False))
            self._update_pod_group_condition(pod_group, status)
            return
        gang = fwk.plugins.get("GangScheduling") if pod_group is not None else None

        def feasible(remaining: int, scheduled: int) -> Status | None:
            return gang.placement_feasible(pod_group, remaining, scheduled) if gang is not None else None

        if klog.V(3):
            klog.info("Attempting to schedule pod group", podGroup=f"{namespace}/{name}", pods=len(pods))
        remaining = self.pod_groups.unscheduled_pods_count(namespace, name)
        scheduled = self.pod_groups.scheduled_pods_count(namespace, name)
        group_status = feasible(remaining, scheduled)
        # Upstream wraps a rejection before the first pod, or a Wait left at the end, in
        # errPodGroupUnschedulable, whose text then leads the group's message; not one that
        # ends the loop early.
        wrapped = group_status is not None and group_status.code == Code.UNSCHEDULABLE
        # (pod, its cycle state, its result, the assumed pod or None, its own failure or None)
        results: list[tuple[PodInfo, CycleState, ScheduleResult, PodInfo | None, Status | None]] = []
        if group_status is None or group_status.code == Code.WAIT:
            for pod in pods:
                state = CycleState()
                result, assumed, status = self._place_group_member(fwk, state, pod)
                results.append((pod, state, result, assumed, status))
                if status is not None and not status.is_rejected():
                    group_status = Status(Code.ERROR, f"failed to schedule other pod from a pod group: "
                                                      f"{status.message()}", error=status.error)
                    break
                remaining -= 1
                scheduled += assumed is not None
                group_status = feasible(remaining, scheduled)
                if group_status is not None and group_status.code == Code.UNSCHEDULABLE:
                    break
        metrics.podgroup_scheduling_algorithm_duration.observe(time.perf_counter() - start)
        if group_status is not None and group_status.code == Code.WAIT:
            wrapped = True
            group_status = Status(Code.UNSCHEDULABLE, *group_status.reasons, plugin=group_status.plugin)
        nominations: dict[str, str] = {}
        waiting_on_preemption = False
        # A member never tried keeps the group's status as it stands now, before PodGroupPostFilter.
        unevaluated = Status(Code.UNSCHEDULABLE, *([POD_GROUP_UNSCHEDULABLE] if wrapped else []),
                             *(group_status.reasons if group_status is not None else ()))
        if group_status is not None:
            # Not placed: every assumption is undone before PodGroupPostFilter looks at the
            # cluster (upstream's algorithm reverts its own when it returns).
            for _pod, state, result, assumed, _status in reversed(results):
                if assumed is not None:
                    self.unreserve_and_forget(fwk, state, assumed, result.suggested_host)
        if group_status is not None and group_status.code == Code.UNSCHEDULABLE and pod_group is not None:
            nominations, post_filter = self._run_pod_group_post_filter(fwk, pod_group, pods,
                                                                       [state for _pod, state, *_rest in results])
            if post_filter.code == Code.ERROR:
                group_status = post_filter  # applyPodGroupPostFilterResult: an error replaces the group's status
            else:
                # A success is a preemption made (or still going on) for the group: its members
                # wait, nominated where the group was placed without the victims.
                waiting_on_preemption = post_filter.is_success()
                reasons = ([POD_GROUP_UNSCHEDULABLE] if wrapped else []) + group_status.reasons
                if post_filter.reasons:
                    reasons.append(post_filter.message())
                group_status = Status(Code.UNSCHEDULABLE, *reasons, plugin=group_status.plugin)
        if group_status is None:
            self._submit_pod_group(fwk, results, start)
        else:
            self._reject_pod_group(fwk, pods, results, group_status, start, nominations, unevaluated,
                                   waiting_on_preemption)
        self._update_pod_group_condition(pod_group, group_status)
        result = metrics.SCHEDULED if group_status is None else metrics.WAITING_ON_PREEMPTION \
            if waiting_on_preemption else metrics.UNSCHEDULABLE if group_status.is_rejected() else metrics.ERROR
        metrics.podgroup_schedule_attempts.labels(result, fwk.profile_name).inc()
        metrics.podgroup_scheduling_attempt_duration.labels(result, fwk.profile_name).observe(
            time.perf_counter() - start)

    def _place_group_member(self, fwk: Framework, state: CycleState,
                            pod: PodInfo) -> tuple[ScheduleResult, PodInfo | None, Status | None]:
        """Filter, score, select, assume and Reserve one member (podGroupPodSchedulingAlgorithm)."""
        algorithm_start = time.perf_counter()
        try:
            result = self.schedule_pod(fwk, state, pod)
        except FitError as err:
            return ScheduleResult(), None, Status(Code.UNSCHEDULABLE, str(err), error=err)
        except Exception as err:  # noqa: BLE001 - as scheduling_cycle: every failure becomes a Status
            return self._schedule_pod_failure(fwk, state, pod, err)
        finally:
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - algorithm_start)
        assumed, status = self.assume_and_reserve(fwk, state, pod, result.suggested_host)
        if assumed is None:
            return ScheduleResult(), None, self._rejected_on(pod, result.suggested_host, status)
        return result, assumed, None

    def _submit_pod_group(self, fwk: Framework, results: list, start: float) -> None:
        """The group is feasible: each placed member goes through Permit to its binding cycle;
        a member that found no place fails alone."""
        for pod, state, result, assumed, status in results:
            if assumed is None:
                self.handle_scheduling_failure(fwk, pod, status, CLEAR_NOMINATION, start, group=(len(results), True))
                continue
            host = result.suggested_host
            status = self.run_permit(fwk, state, assumed, host)
            if status is not None:
                self.unreserve_and_forget(fwk, state, assumed, host)
                self.handle_scheduling_failure(fwk, pod, self._rejected_on(pod, host, status), CLEAR_NOMINATION,
                                               start, group=(len(results), True))
                continue
            self._start_binding(fwk, state, pod, assumed, result, start)

    def _reject_pod_group(self, fwk: Framework, pods: list[PodInfo], results: list, group_status: Status,
                          start: float, nominations: dict[str, str], unevaluated: Status, waiting: bool) -> None:
        """The group was not placed (its assumptions already undone); as upstream's
        submitPodGroupAlgorithmResult: a member that found no place fails with its own status
        (an error of the group's overrides a rejection); one never tried with the group's status
        as it stood before PodGroupPostFilter (unevaluated; completePodGroupAlgorithmResult); a
        placed member with the group's: led by `pod group is unschedulable`, or as it is when a
        preemption was made for the group (waiting). All return to the queue as the group's
        attempt, nominated where that preemption placed them, their nominations cleared otherwise."""
        evaluated = {pod.uid: status for pod, _state, _result, _assumed, status in results}
        for pod in pods:
            own = evaluated.get(pod.uid) if pod.uid in evaluated else \
                unevaluated if group_status.code != Code.ERROR else group_status
            nominating = nominations.get(pod.uid, CLEAR_NOMINATION)
            if own is not None and (group_status.code == Code.ERROR) == (not own.is_rejected()):
                if own.is_rejected() and not isinstance(own.error, FitError):
                    own = self._group_fit_error(pod, own.message())
                self.handle_scheduling_failure(fwk, pod, own, nominating, start, group=(len(pods), False))
                continue
            status = group_status
            if group_status.is_rejected():
                status = self._group_fit_error(pod, group_status.message() if waiting else
                                               f"{POD_GROUP_UNSCHEDULABLE}, {group_status.message()}")
            self.handle_scheduling_failure(fwk, pod, status, nominating, start, group=(len(pods), False))

    def _group_fit_error(self, pod: PodInfo, message: str) -> Status:
        """A member rejected for its group's sake: the group's message, GangScheduling as the
        plugin whose events may bring it back."""
        diagnosis = Diagnosis()
        diagnosis.unschedulable_plugins = {"GangScheduling"}
        return Status(Code.UNSCHEDULABLE, message, error=FitError(pod.key, self.snapshot.num_nodes(), diagnosis))

    def _run_pod_group_post_filter(self, fwk: Framework, pod_group: dict, pods: list[PodInfo],
                                   states: list[CycleState]) -> tuple[dict[str, str], Status]:
        """PodGroupPostFilter on a fork of the snapshot (the mutations of upstream's
        MutableSnapshotSharedLister), thrown away afterwards; the simulation it may run places
        the group on the fork as its cycle does, without the cache (no OpportunisticBatching)."""
        self.cache.update_snapshot(self.snapshot)  # without the group's undone assumptions
        real, batch = self.snapshot, fwk.batch
        fork = real.fork()
        self.snapshot, self.snapshot_pinned, fwk.batch = fork, True, None
        fwk.set_snapshot(fork)
        try:
            return fwk.run_pod_group_post_filter_plugins(pod_group, pods, states,
                                                         lambda: self._simulate_pod_group(fwk, pod_group, pods))
        finally:
            self.snapshot, self.snapshot_pinned, fwk.batch = real, False, batch
            fwk.set_snapshot(real)

    def _simulate_pod_group(self, fwk: Framework, pod_group: dict,
                            pods: list[PodInfo]) -> tuple[list[tuple[PodInfo, str, CycleState]], Status | None]:
        """The group's placement on the snapshot as it stands (podGroupSchedulingFunc): each
        member placed, put on its node in the snapshot and reserved in turn, PlacementFeasible
        judging after each; everything undone before it returns. ([(member, node, its cycle
        state)], None when the group is feasible, or why not)."""
        gang = fwk.plugins.get("GangScheduling")
        namespace, name = pods[0].namespace, pods[0].pod_group
        remaining = self.pod_groups.unscheduled_pods_count(namespace, name)
        scheduled = self.pod_groups.scheduled_pods_count(namespace, name)

        def feasible() -> Status | None:
            return gang.placement_feasible(pod_group, remaining, scheduled) if gang is not None else None

        placed: list[tuple[PodInfo, PodInfo, str, CycleState]] = []  # (member, assumed, node, state)
        status = feasible()
        if status is not None and status.code == Code.UNSCHEDULABLE:
            return [], Status(Code.UNSCHEDULABLE, POD_GROUP_UNSCHEDULABLE, *status.reasons, plugin=status.plugin)
        try:
            for pod in pods:
                state = CycleState()
                host = ""
                try:
                    host = self.schedule_pod(fwk, state, pod).suggested_host
                except FitError:
                    pass
                except Exception as err:  # noqa: BLE001 - as the cycle: the group fails with an error
                    return [], Status(Code.ERROR, f"failed to schedule other pod from a pod group: {err}",
                                      error=err)
                if host:
                    assumed = pod.placed_on(host)
                    self.snapshot.add_pod(assumed, host)
                    self.nominator.delete_nominated_pod_if_exists(pod)
                    reserve = fwk.run_reserve_plugins_reserve(state, assumed, host)
                    if reserve is not None:
                        fwk.run_reserve_plugins_unreserve(state, assumed, host)
                        self.snapshot.remove_pod(assumed, host)
                        if not reserve.is_rejected():
                            return [], Status(Code.ERROR, "failed to schedule other pod from a pod group: "
                                                          f"{reserve.message()}")
                        host = ""
                    else:
                        placed.append((pod, assumed, host, state))
                remaining -= 1
                scheduled += bool(host)
                status = feasible()
                if status is not None and status.code == Code.UNSCHEDULABLE:
                    break
            if status is not None and status.code == Code.WAIT:
                status = Status(Code.UNSCHEDULABLE, POD_GROUP_UNSCHEDULABLE, *status.reasons, plugin=status.plugin)
            elif status is None and not placed:
                status = Status(Code.UNSCHEDULABLE, POD_GROUP_UNSCHEDULABLE)
            return [(pod, host, state) for pod, _assumed, host, state in placed], status
        finally:
            for _pod, assumed, host, state in reversed(placed):
                fwk.run_reserve_plugins_unreserve(state, assumed, host)
                self.snapshot.remove_pod(assumed, host)

    def _validate_pod_group(self, pods: list[PodInfo], pod_group: dict | None) -> str:
        """Upstream's validatePodGroup: the queued pods, then the group's bound and assumed ones,
        share the first queued pod's schedulerName and preemption policy and have the group's
        priority; the error text of the first pod that does not, else "". (kubesched does not
        honour PodGroupPreemptionPolicy, so the policy is compared as with that gate off.)"""
        scheduler_name = pods[0].scheduler_name
        group_priority = ((pod_group or {}).get("spec") or {}).get("priority") or 0
        group_policy = ""
        scheduled = self.pod_groups.scheduled_pods(pods[0].namespace, pods[0].pod_group) if self.pod_groups else []
        checked = [(pod.scheduler_name, pod.priority, pod.preemption_policy) for pod in pods]
        checked += [(spec.get("schedulerName") or "default-scheduler", spec.get("priority") or 0,
                     spec.get("preemptionPolicy") or "PreemptLowerPriority")
                    for spec in (raw.get("spec") or {} for raw in scheduled)]
        for pod_scheduler, priority, policy in checked:
            if pod_scheduler != scheduler_name:
                return (f"all pods in a single pod group should have the same .spec.schedulerName set, got: "
                        f'"{pod_scheduler}" and "{scheduler_name}"')
            if priority != group_priority:
                return (f"all pods in a single pod group should have the same priority as the pod group's "
                        f"priority, got {priority} and {group_priority}")
            if not group_policy:
                group_policy = policy
            elif policy != group_policy:
                return f"all pods in a single pod group should have the same preemption policy, got {policy} and {group_policy}"
        return ""

    def _update_pod_group_condition(self, pod_group: dict | None, group_status: Status | None) -> None:
        """PodGroupInitiallyScheduled on the PodGroup (updatePodGroupCondition): never turned
        back to False once True; written only when it changes."""
        if pod_group is None or self.client is None:
            return
        if group_status is None:
            condition = {"type": POD_GROUP_SCHEDULED, "status": "True", "reason": "Scheduled", "message": ""}
        else:
            condition = {"type": POD_GROUP_SCHEDULED, "status": "False",
                         "reason": "Unschedulable" if group_status.is_rejected() else "SchedulerError",
                         "message": group_status.message()}
        meta = pod_group.get("metadata") or {}
        conditions = list((pod_group.get("status") or {}).get("conditions") or ())
        existing = next((c for c in conditions if c.get("type") == POD_GROUP_SCHEDULED), None)
        if existing is not None and (existing.get("status") == "True" and condition["status"] != "True"
                                     or all(existing.get(k) == v for k, v in condition.items())):
            return
        condition["observedGeneration"] = meta.get("generation", 0)
        condition["lastTransitionTime"] = existing.get("lastTransitionTime") \
            if existing is not None and existing.get("status") == condition["status"] \
            else datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [c for c in conditions if c.get("type") != POD_GROUP_SCHEDULED] + [condition]
        path = (f"/apis/scheduling.k8s.io/v1beta1/namespaces/{meta.get('namespace')}/podgroups/"
                f"{meta.get('name')}/status")
        client = self.client

        def send(body: dict) -> None:
            try:
                client.request("PATCH", path, body, content_type="application/merge-patch+json")
            except Exception as err:  # noqa: BLE001
                klog.error("Failed to update PodGroup status", podGroup=f"{meta.get('namespace')}/{meta.get('name')}",
                           err=str(err))

        self.api_dispatcher.add(("podgroups", path), {"status": {"conditions": conditions}}, send)

    # =========================================================================================
    # The scheduling cycle
    # =========================================================================================

    def scheduling_cycle(self, fwk: Framework, state: CycleState,
                         pod: PodInfo) -> tuple[ScheduleResult, PodInfo | None, Status | None]:
        """Select a node, assume the pod on it, Reserve and Permit. Returns the result, the
        assumed pod and None; or, on failure, a result that carries the nomination and the Status."""
        start = time.perf_counter()
        try:
            result = self.schedule_pod(fwk, state, pod)
        except Exception as err:  # noqa: BLE001 - every failure becomes a Status for the failure handler
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
            return self._schedule_pod_failure(fwk, state, pod, err)
        metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
        host = result.suggested_host
        assumed, status = self.assume_and_reserve(fwk, state, pod, host)
        if assumed is None:
            return ScheduleResult(), None, self._rejected_on(pod, host, status)
        status = self.run_permit(fwk, state, assumed, host)
        if status is None:
            return result, assumed, None
        self.unreserve_and_forget(fwk, state, assumed, host)
        return ScheduleResult(), None, self._rejected_on(pod, host, status)

    def assume_and_reserve(self, fwk: Framework, state: CycleState, pod: PodInfo,
                           host: str) -> tuple[PodInfo | None, Status | None]:
        """Assume the pod onto host in the cache and run Reserve: (the assumed pod, None), or
        (None, the Status) with nothing left assumed."""
        try:
            assumed = self.cache.assume_pod(pod, host)
        except Exception as err:  # noqa: BLE001
            return None, Status(Code.ERROR, str(err), error=err)
        self.nominator.delete_nominated_pod_if_exists(pod)
        status = fwk.run_reserve_plugins_reserve(state, assumed, host)
        if status is not None:
            self.unreserve_and_forget(fwk, state, assumed, host)
            return None, status
        return assumed, None

    def unreserve_and_forget(self, fwk: Framework, state: CycleState, assumed: PodInfo, host: str) -> None:
        fwk.run_reserve_plugins_unreserve(state, assumed, host)
        self.cache.forget_pod(assumed)

    @staticmethod
    def run_permit(fwk: Framework, state: CycleState, assumed: PodInfo, host: str) -> Status | None:
        """Permit; a pod asked to wait becomes a waiting pod, whose signal its binding cycle awaits."""
        status, wait_times = fwk.run_permit_plugins(state, assumed, host)
        if status is not None and status.code == Code.WAIT:
            fwk.add_waiting_pod(assumed, wait_times)
            return None
        return status

    @staticmethod
    def _rejected_on(pod: PodInfo, host: str, status: Status) -> Status:
        """A rejection on the chosen node, worded as a FitError over that one node."""
        if not status.is_rejected():
            return status
        diagnosis = Diagnosis()
        diagnosis.node_to_status[host] = status
        diagnosis.add_plugin_status(status)
        fit = FitError(pod.key, 1, diagnosis)
        return Status(status.code, str(fit), plugin=status.plugin, error=fit)

    def _schedule_pod_failure(self, fwk: Framework, state: CycleState, pod: PodInfo,
                              err: Exception) -> tuple[ScheduleResult, None, Status]:
        if isinstance(err, FitError):
            nominating: str | None = CLEAR_NOMINATION  # no PostFilter: upstream clears it too
            if fwk.has_post_filter_plugins():
                nominating, status = fwk.run_post_filter_plugins(state, pod, err.diagnosis.node_to_status)
                err.diagnosis.post_filter_msg = status.message()
                if status.code == Code.ERROR:
                    klog.error("Status after running PostFilter plugins for pod", pod=pod.key,
                               status=status.message())
            return ScheduleResult(nominating=nominating), None, Status(Code.UNSCHEDULABLE, str(err), error=err)
        if isinstance(err, NoNodesAvailable):
            return ScheduleResult(), None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_NODES_AVAILABLE)
        klog.error("Error selecting node for pod", pod=pod.key, err=str(err))
        return ScheduleResult(), None, Status(Code.ERROR, str(err), error=err)

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo) -> ScheduleResult:
        """Filter, score and select a node for pod (upstream schedulePod). Raises FitError."""
        if not self.snapshot_pinned:
            self.cache.update_snapshot(self.snapshot)
        if self.snapshot.num_nodes() == 0:
            raise NoNodesAvailable()
        feasible, diagnosis, hint, signature = self.find_nodes_that_fit_pod(fwk, state, pod)
        if not feasible:
            raise FitError(pod.key, self.snapshot.num_nodes(), diagnosis)
        batch = fwk.batch
        if len(feasible) == 1:
            if batch is not None:
                batch.store_schedule_results(signature, hint, feasible[0].name, None, self.queue.scheduling_cycle)
            return ScheduleResult(feasible[0].name, 1 + len(diagnosis.node_to_status), 1)
        if batch is not None and signature is not None:
            # A batchable pod leaves its whole ranking, raw scores kept, for the next identical pod.
            raw: dict[str, list[int]] = {}
            totals = self.prioritize_nodes(fwk, state, pod, feasible, raw_scores=raw)
            ranking = ranked_nodes([node.name for node in feasible], raw, totals)
            host = ranking.pop().name
            batch.store_schedule_results(signature, hint, host, ranking, self.queue.scheduling_cycle)
        else:
            totals = self.prioritize_nodes(fwk, state, pod, feasible)
            host = feasible[select_host_index(totals)].name
            if batch is not None:
                batch.store_schedule_results(signature, hint, host, UnrankedNodes(len(feasible) - 1),
                                             self.queue.scheduling_cycle)
        return ScheduleResult(host, len(feasible) + len(diagnosis.node_to_status), len(feasible))

    def pre_filter(self, fwk: Framework, state: CycleState, pod: PodInfo,
                   diagnosis: Diagnosis) -> list[NodeInfo] | None:
        """Run PreFilter: the nodes its result leaves to filter, or None when it rejected the
        pod (recorded in diagnosis)."""
        all_nodes = self.snapshot.node_info_list
        pre_result, status, plugins = fwk.run_pre_filter_plugins(state, pod, all_nodes)
        diagnosis.unschedulable_plugins = set(plugins)
        if status is not None and not status.is_success():
            if not status.is_rejected():
                raise RuntimeError(status.message())
            diagnosis.node_to_status.absent_nodes_status = status
            diagnosis.pre_filter_msg = status.message()
            diagnosis.add_plugin_status(status)
            return None
        if pre_result is None or pre_result.all_nodes():
            return all_nodes
        node_map = self.snapshot.node_info_map
        diagnosis.node_to_status.absent_nodes_status = Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]")
        return sorted((node_map[n] for n in pre_result.node_names or () if n in node_map), key=lambda n: n.index)

    def find_nodes_that_fit_pod(self, fwk: Framework, state: CycleState,
                                pod: PodInfo) -> tuple[list[NodeInfo], Diagnosis, str, str | None]:
        """The feasible nodes, the diagnosis, and for OpportunisticBatching the node hint and
        the pod's signature ("" and None when the feature gate is off)."""
        diagnosis = Diagnosis()
        nodes = self.pre_filter(fwk, state, pod, diagnosis)
        if nodes is None:
            return [], diagnosis, "", None
        hint, signature = "", None
        if fwk.batch is not None:
            signature = fwk.sign_pod(pod)
            hint = fwk.batch.get_node_hint(pod, signature, state, self.queue.scheduling_cycle)
        # A nominated node, or else the hint, is tried alone first.
        if pod.nominated_node_name or hint:
            node = self.snapshot.get(pod.nominated_node_name or hint)
            if node is not None:
                feasible = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, [node])
                if feasible and self.extenders:
                    feasible = find_nodes_that_pass_extenders(self.extenders, pod, feasible, diagnosis.node_to_status)
                if feasible:
                    return feasible, diagnosis, hint, signature
        feasible = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, nodes)
        processed = len(feasible) + len(diagnosis.node_to_status)
        self.next_start_node_index = (self.next_start_node_index + processed) % len(self.snapshot.node_info_list)
        if self.extenders and feasible:
            passed = find_nodes_that_pass_extenders(self.extenders, pod, feasible, diagnosis.node_to_status)
            if len(passed) != len(feasible):
                # Extenders register no events: any cluster event may requeue the pod.
                diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
            feasible = passed
        return feasible, diagnosis, hint, signature

    def find_nodes_that_pass_filters(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                     diagnosis: Diagnosis, nodes: list[NodeInfo]) -> list[NodeInfo]:
        # Hot path: the per-node loop of the scheduler.
        num_all = len(nodes)
        if not num_all:
            return []
        percentage = fwk.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.cfg.percentage_of_nodes_to_score
        scoring = fwk.has_score_plugins() or any(e.is_filter() or e.is_prioritizer() for e in self.extenders)
        to_find = num_feasible_nodes_to_find(percentage, num_all) if scoring else 1
        start_index = self.next_start_node_index
        if not fwk.has_filter_plugins():
            return [nodes[(start_index + i) % num_all] for i in range(min(to_find, num_all))]
        started = time.perf_counter()
        plugins = fwk.active_filter_plugins(state)
        feasible: list[NodeInfo] = []
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
                feasible += self.filter_nodes(fwk, state, pod, chunk, plugins, diagnosis)
            return feasible
        except Exception:
            code = "Error"
            raise
        finally:
            fwk.observe_duration("Filter", code, started)

    def filter_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                     plugins: list[Any], diagnosis: Diagnosis) -> list[NodeInfo]:
        """The nodes that pass every filter, in order; each rejection recorded in diagnosis."""
        if not self.nominator.has_nominated_pods():
            feasible, rejected = fwk.run_filter_plugins_on_nodes(state, pod, nodes, plugins)
        else:
            # Nodes with nominated pods need the two-pass check; the rest go in one batch.
            plain = [n for n in nodes if not self.nominator.nominated_pods_for_node(n.name)]
            passed_plain, rejected = fwk.run_filter_plugins_on_nodes(state, pod, plain, plugins)
            fits = {n.name for n in passed_plain}
            for node in nodes:
                if self.nominator.nominated_pods_for_node(node.name):
                    status = fwk.run_filter_plugins_with_nominated_pods(state, pod, node, plugins)
                    if status is None or status.code == Code.SUCCESS:
                        fits.add(node.name)
                    elif status.code == Code.ERROR:
                        raise RuntimeError(status.message())
                    else:
                        rejected.append((node, status))
            feasible = [n for n in nodes if n.name in fits]
        if rejected:
            diagnosis.node_to_status.update((node.name, status) for node, status in rejected)
            # Rejections share a few Status instances; each counts once in the diagnosis.
            for status in {id(status): status for _unused, status in rejected}.values():
                diagnosis.add_plugin_status(status)
        return feasible

    def prioritize_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                         breakdown: dict[str, Mapping[str, int]] | None = None,
                         raw_scores: dict[str, list[int]] | None = None) -> list[int]:
        if not fwk.has_score_plugins() and not self.extenders:
            return [1] * len(nodes)
        status = fwk.run_pre_score_plugins(state, pod, nodes)
        if status is not None and not status.is_success():
            raise RuntimeError(status.message())
        totals = fwk.run_score_plugins(state, pod, nodes, breakdown, raw_scores)
        if self.extenders:
            by_node = extender_scores(self.extenders, pod, nodes)
            if by_node:
                totals = [total + by_node.get(node.name, 0) for total, node in zip(totals, nodes)]
                if breakdown is not None:
                    breakdown[EXTENDER_NAME] = {node.name: by_node.get(node.name, 0) for node in nodes}
        return totals

    # =========================================================================================
    # The binding cycle, on a worker thread while the next pod is scheduled
    # =========================================================================================

    def binding_cycle(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
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
            self._bind_finished()
            return
        status: Status | None
        bind_start = time.perf_counter()
        try:
            status = fwk.run_pre_bind_plugins(state, assumed, host)
            if status is None or status.is_success():
                # Extenders bind first (upstream extendersBinding), then the Bind plugins.
                bound, status = extenders_binding(self.extenders, assumed, host) if self.extenders else (False, None)
                if not bound:
                    status = fwk.run_bind_plugins(state, assumed, host)
        except Exception as err:  # noqa: BLE001 - a failed bind is retried, never fatal
            status = Status(Code.ERROR, str(err), error=err)
        finally:
            self.cache.finish_binding(assumed)
            metrics.binding_duration.observe(time.perf_counter() - bind_start)
            self._bind_finished()
        if status is not None and not status.is_success():
            if not self._bound_all_the_same(status, assumed, host):
                self.handle_binding_cycle_error(fwk, state, pod, assumed, host, status, start)
                return
            klog.info("The binding's answer was lost, but the pod is bound", pod=pod.key, node=host,
                      err=status.message())
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

    def _bound_all_the_same(self, status: Status, pod: PodInfo, host: str) -> bool:
        """A bind that failed for want of an answer (a connection reset or timed out after the
        request may have left) can have been made all the same. Forgetting the assumed pod then
        gives its room to the next pod before the watch shows the binding; the soak overcommitted
        a node so. Ask the API server for the pod first, until it answers: while it is away
        (restarting, as in the soak's overcommit) the pod keeps its room, which is the safe
        side. Scheduling stops (leadership lost): it is forgotten, the next leader decides.
        Upstream forgets at once (handleBindingCycleError), and its soak run overcommitted."""
        # (The API writer process reports a lost connection as ChildLost, a ConnectionError.)
        if not isinstance(status.error, NO_ANSWER) or self.client is None:
            return False
        current = read_back(self.client, f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
                            self.stop.wait)
        return (current is not None and (current.get("metadata") or {}).get("uid") == pod.uid
                and (current.get("spec") or {}).get("nodeName") == host)

    def _bind_finished(self) -> None:
        with self.binds_lock:
            self.binds_in_flight -= 1
            self._binding_goroutines.set(self.binds_in_flight)

    def _wait_on_permit(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                        result: ScheduleResult, start: float, waiting: Any) -> None:
        """WaitOnPermit without holding a bind thread: the binding cycle resumes on a bind
        thread once the waiting pod is allowed or rejected."""
        host = result.suggested_host
        # NominatedNodeNameForExpectation (on by default in v1.37): tell other components where
        # the waiting pod is about to go.
        if (assumed.raw.get("status") or {}).get("nominatedNodeName") != host:
            self._submit_patch(pod, {"status": {"nominatedNodeName": host}})
        if klog.V(4):
            klog.info("Pod waiting on permit", pod=pod.key)

        def resume(_signal: Status) -> None:
            with self.binds_lock:
                self.binds_in_flight += 1
                self._binding_goroutines.set(self.binds_in_flight)
            self.bind_pool.submit(self._after_permit, fwk, state, pod, assumed, result, start, waiting)

        self._bind_finished()  # a waiting pod is no bind in flight: shutdown need not wait for it
        waiting.on_done(resume)

    def _after_permit(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                      result: ScheduleResult, start: float, waiting: Any) -> None:
        status = fwk.finish_waiting(waiting)
        if status is None:
            self.binding_cycle(fwk, state, pod, assumed, result, start, permit_waited=True)
            return
        try:
            if status.is_rejected():
                klog.info("Pod rejected while waiting on permit", pod=pod.key, status=status.message())
                diagnosis = Diagnosis()
                diagnosis.node_to_status[result.suggested_host] = status
                diagnosis.unschedulable_plugins = {status.plugin} if status.plugin else set()
                fit = FitError(pod.key, 1, diagnosis)
                status = Status(status.code, str(fit), plugin=status.plugin, error=fit)
            else:
                klog.error("Failed waiting on permit for pod", pod=pod.key, err=status.message())
            self.handle_binding_cycle_error(fwk, state, pod, assumed, result.suggested_host, status, start)
        finally:
            self._bind_finished()

    def handle_binding_cycle_error(self, fwk: Framework, state: CycleState, pod: PodInfo, assumed: PodInfo,
                                   host: str, status: Status, start: float) -> None:
        if klog.V(1):
            klog.info("Failed to bind pod", pod=pod.key, node=host, err=status.message())
        fwk.run_reserve_plugins_unreserve(state, assumed, host)
        self.cache.forget_pod(assumed)
        # The forgotten pod freed room, like a deleted pod would; a rejected pod itself waits
        # for an event, as upstream (an error sends it to backoff anyway).
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
            pre_check=(lambda other: other.uid != pod.uid) if status.is_rejected() else None)
        self.handle_scheduling_failure(fwk, pod, status, CLEAR_NOMINATION, start)

    # =========================================================================================
    # The one failure handler: attempt metrics, requeue, nomination, event, condition
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

    def handle_scheduling_failure(self, fwk: Framework, pod: PodInfo, status: Status, nominating: str | None,
                                  start: float, group: tuple[int, bool] | None = None) -> None:
        """Every failed attempt ends here (upstream handleSchedulingFailure). A FitError in
        status.error names the plugins whose events may make the pod schedulable; nominating
        is what happens to its nominatedNodeName (see CLEAR_NOMINATION). group is (its size,
        whether it was placed) for a member of a PodGroup's attempt, which returns as one."""
        rejected = status.is_rejected()
        reason = "Unschedulable" if rejected else "SchedulerError"
        attempts, duration = self._attempt_series(metrics.UNSCHEDULABLE if rejected else metrics.ERROR,
                                                  fwk.profile_name)
        attempts.inc()
        duration.observe(time.perf_counter() - start)
        message = status.message()
        fit = status.error if isinstance(status.error, FitError) else None
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
        current = self.current_pod(pod)
        if current is None or assigned(current):
            if current is None:
                klog.info("Pod doesn't exist in informer cache", pod=pod.key)
            else:
                klog.info("Pod has been assigned to node. Abort adding it back to queue.", pod=pod.key,
                          node=(current.get("spec") or {}).get("nodeName"))
            self.queue.done(pod.uid)
        else:
            fresh = PodInfo(current) if current is not pod.raw else pod
            if fresh is not pod:
                fresh.unschedulable_plugins = pod.unschedulable_plugins
                fresh.pending_plugins = pod.pending_plugins
            if group is None:
                self.queue.add_unschedulable_if_not_present(fresh)
            else:
                self.queue.add_attempted_pod_group_member(fresh, rejected, group[0], without_backoff=group[1])
        # Upstream AddNominatedPod: an override sets or clears the in-memory nomination; a
        # no-op keeps what the pod's latest status names.
        node = nominating if nominating is not None else \
            ((current or {}).get("status") or {}).get("nominatedNodeName") or ""
        if node:
            self.nominator.add_nominated_pod(pod, node)
        else:
            self.nominator.delete_nominated_pod_if_exists(pod)
        fwk.event_recorder.eventf(pod.raw, "Warning", "FailedScheduling", "Scheduling", truncate_message(message))
        self._submit_status_patch(pod, reason, message, nominating)

    def _submit_status_patch(self, pod: PodInfo, reason: str, message: str, nominating: str | None) -> None:
        patch = status_patch(pod.raw, reason, message, nominating,
                             force=self.api_dispatcher.has_waiting(("pods", pod.uid)))
        if patch is not None:
            self._submit_patch(pod, patch)

    def _submit_patch(self, pod: PodInfo, patch: dict) -> None:
        if self.client is None:
            return
        client = self.client

        def send(body: dict) -> None:
            try:
                client.patch_pod_status(pod.namespace, pod.name, body)
            except Exception as err:  # noqa: BLE001
                klog.error("Error updating pod", pod=pod.key, err=str(err))

        self.api_dispatcher.add(("pods", pod.uid), patch, send)
