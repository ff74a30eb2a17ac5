"""DefaultPreemption: when no node fits, evict the fewest, least important pods to make room.

As upstream's defaultpreemption and framework/preemption packages, for pods outside pod
groups:
1. A pod with preemptionPolicy Never, or whose nominated node still has a pod terminating
   because of an earlier preemption, does not preempt.
2. Only nodes rejected with Unschedulable (not UnschedulableAndUnresolvable) are tried,
   starting at a random offset, until enough candidates are found
   (minCandidateNodesPercentage / minCandidateNodesAbsolute).
3. On each node (SelectVictimsOnNode) every lower-priority pod is removed; if the pod then
   fits, the victims are reprieved one by one, most important first and those whose
   eviction would violate a PodDisruptionBudget before the others, as long as the pod
   still fits.
4. The node is picked by: fewest PDB violations, lowest highest-victim priority, lowest
   sum of priorities, fewest victims, latest start of the most important victims.
5. The victims get the DisruptionTarget condition and are deleted; lower-priority pods
   nominated to that node lose their nomination; PostFilter returns the node, which the
   framework writes to the pod's status.nominatedNodeName.

For a PodGroup (PodGroupPostFilter, GenericWorkload; upstream's PodGroupEvaluator in
framework/preemption/podgrouppreemption.go) the domain is the whole cluster: a victim is a pod,
or every placed pod of a group whose disruptionMode is All; all victims of lower priority are
taken off a fork of the snapshot, the group is placed there as its cycle places it, and the
victims are given back, most important first, while every placed member still passes its
filters. What is left is evicted; the members are nominated where the group was placed.

With SchedulerAsyncPreemption (beta, on by default in 1.37), step 5 runs in the background
(upstream Executor.prepareCandidateAsync): PostFilter returns at once and the scheduling loop
goes on while the lower nominations are cleared and the victims evicted, all but the last side
by side, then the last. Meanwhile the preemptor waits at PreEnqueue: until its last victim is
deleted or terminating, so the deletion events that requeue it find it ready. A failed
eviction, or a last victim preempted in memory (no deletion event to come), activates the
preemptor. So does the end of a preemption whose preemptor PreEnqueue held back while the last
victim's deletion came and went before that victim was known: a victim an earlier attempt had
already set terminating is deleted by kwok or the kubelet at any moment, and no later event
would let the preemptor go (upstream waits for its five-minute flush). A preemptor whose earlier
preemption is still finishing when the next one starts (the earlier one's last victim is
terminating, which ends the wait) keeps the newer one's state: each preemption ends only its
own. A PodGroup's victims are still evicted before PodGroupPostFilter returns. With the
gate off, every eviction happens before PostFilter returns.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, NamedTuple

from kubesched import klog, metrics
from kubesched.api.selectors import SelectorError, label_selector
from kubesched.framework.fit_error import Diagnosis, FitError, NodeToStatus
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    CODE_NAMES,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PluginArgsError,
    Status,
    is_success,
)
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, int_arg

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
MAX_INT32 = 2**31 - 1


def fit_error_message(pod: PodInfo, num_all_nodes: int, node_statuses: dict[str, Status]) -> str:
    """FitError's message for the nodes preemption tried; the others were not helpful."""
    diagnosis = Diagnosis()
    diagnosis.node_to_status = NodeToStatus(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL))
    diagnosis.node_to_status.update(node_statuses)
    return str(FitError(pod.key, num_all_nodes, diagnosis))


def _start_ts(pod: PodInfo, now: float) -> float:
    """util.GetPodStartTime: a pod that has not started counts as starting now."""
    return pod.start_ts or now


def terminating_by_preemption(pod: PodInfo) -> bool:
    if not pod.deleting:
        return False
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


def pdb_violation_check(pdbs: list[dict]) -> Callable[[PodInfo], bool]:
    """Whether evicting a pod violates a PodDisruptionBudget, asked pod by pod: each matching
    budget is drawn down as pods are asked about (FilterVictimsWithPDBViolation's podIsViolating)."""
    allowed = [((pdb.get("status") or {}).get("disruptionsAllowed") or 0) for pdb in pdbs]
    selectors = []
    for pdb in pdbs:
        try:
            selectors.append(label_selector((pdb.get("spec") or {}).get("selector")))
        except SelectorError:
            selectors.append(None)

    def violating(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            meta, status = pdb.get("metadata") or {}, pdb.get("status") or {}
            if meta.get("namespace") != pod.namespace:
                continue
            selector = selectors[i]
            if selector is None or selector.empty() or not selector.matches(pod.labels):
                continue
            if pod.name in (status.get("disruptedPods") or {}):
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    return violating


class Candidate:
    __slots__ = ("name", "victims", "num_pdb_violations")

    def __init__(self, name: str, victims: list[PodInfo], num_pdb_violations: int):
        self.name = name
        self.victims = victims
        self.num_pdb_violations = num_pdb_violations

    def __repr__(self) -> str:
        return f"Candidate({self.name}, victims={[v.key for v in self.victims]}, pdb={self.num_pdb_violations})"


def pick_one_node_for_preemption(candidates: list[Candidate], now: float) -> Candidate | None:
    if not candidates:
        return None

    def highest_priority_start(c: Candidate) -> float:
        top = max(v.priority for v in c.victims)
        return min(_start_ts(v, now) for v in c.victims if v.priority == top)

    score_funcs: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + MAX_INT32 + 1 for v in c.victims),
        lambda c: -len(c.victims),
        highest_priority_start,
    ]
    remaining = candidates
    for f in score_funcs:
        scores = [f(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores) if s == best]
        if len(remaining) == 1:
            return remaining[0]
    return remaining[0]


def _is_not_found(err: BaseException) -> bool:
    return getattr(err, "status", None) == 404 or getattr(err, "code", None) == 404 or \
        "NotFound" in type(err).__name__


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


POD = "pod"
POD_GROUP = "podgroup"
# The candidate of a pod group's preemption is the whole cluster, named so in events and logs.
CLUSTER_CANDIDATE = "cluster"


class Preemptor(NamedTuple):
    """Who preempts, as the executor names it: a pod, or a PodGroup (by the group's UID)."""
    kind: str
    uid: str
    scheduler_name: str

    @classmethod
    def of_pod(cls, pod: PodInfo) -> "Preemptor":
        return cls(POD, pod.uid, pod.scheduler_name)

    @classmethod
    def of_pod_group(cls, pod_group: dict, members: list[PodInfo]) -> "Preemptor":
        return cls(POD_GROUP, (pod_group.get("metadata") or {}).get("uid", ""),
                   members[0].scheduler_name if members else "")


class Victim:
    """A preemption unit (upstream's Victim): one pod, or every placed pod of a PodGroup whose
    disruptionMode is All, evicted together. kind is "podgroup" for any pod of a group, as
    upstream counts a group's disruptions."""

    __slots__ = ("pods", "priority", "kind", "earliest_start")

    def __init__(self, pods: list[PodInfo], priority: int, kind: str, now: float):
        self.pods = pods
        self.priority = priority
        self.kind = kind
        self.earliest_start = min(_start_ts(pod, now) for pod in pods)

    def importance(self) -> tuple:
        """Sort key, most important first (MoreImportantVictim): higher priority; a group
        before a pod; the larger group; the earlier start."""
        return -self.priority, -(2 if self.kind == POD_GROUP else 1), -len(self.pods), self.earliest_start

    def __repr__(self) -> str:
        return f"Victim({self.kind}, {[p.key for p in self.pods]}, priority={self.priority})"


def filter_victims_with_pdb_violation(victims: list[Victim], pdbs: list[dict]
                                      ) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """FilterVictimsWithPDBViolation: (violating [(victim, its violating pods)], the others),
    each in the given order. One pod whose eviction violates a budget makes its whole victim
    violating (a group is never split)."""
    violating = pdb_violation_check(pdbs)
    violating_victims, non_violating = [], []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violating(pod))
        if count:
            violating_victims.append((victim, count))
        else:
            non_violating.append(victim)
    return violating_victims, non_violating


class PreemptionError(Exception):
    """A plugin failed while victims were taken away or given back."""


def check(status: Status | None) -> None:
    if not is_success(status):
        raise PreemptionError(status.message())


# What the pod group cycle runs on the snapshot as it stands: the group placed as in its cycle,
# every assumption undone afterwards: ([(member, node, its cycle state)], None or why not).
PodGroupSimulation = Callable[[], "tuple[list[tuple[PodInfo, str, Any]], Status | None]"]


class AsyncPreemption:
    """One preemptor's evictions, running in the background (SchedulerAsyncPreemption)."""

    __slots__ = ("last_victim", "held_back")

    def __init__(self) -> None:
        # The last victim's "namespace/name", once the others are evicted (upstream's
        # lastVictimsPendingPreemption).
        self.last_victim: str | None = None
        # PreEnqueue's last answer to the preemptor was to wait.
        self.held_back = False

    def waits(self, informers) -> bool:
        """IsPodRunningPreemption for a running one: the last victim is not known yet, or is
        neither gone from the pods informer nor terminating."""
        if self.last_victim is None:
            return True
        victim = informers.get("pods", self.last_victim)
        return victim is not None and not (victim.get("metadata") or {}).get("deletionTimestamp")


class DefaultPreemption:
    name = "DefaultPreemption"
    INFORMERS = ("poddisruptionbudgets",)

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("minCandidateNodesPercentage", "minCandidateNodesAbsolute"))
        self.min_candidate_nodes_percentage = int_arg(args, "minCandidateNodesPercentage", 10)
        self.min_candidate_nodes_absolute = int_arg(args, "minCandidateNodesAbsolute", 100)
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            raise PluginArgsError("minCandidateNodesPercentage",
                                  f"Invalid value: {self.min_candidate_nodes_percentage}: not in valid range [0, 100]")
        if self.min_candidate_nodes_absolute < 0:
            raise PluginArgsError("minCandidateNodesAbsolute",
                                  f"Invalid value: {self.min_candidate_nodes_absolute}: not in valid range [0, inf)")
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise PluginArgsError("minCandidateNodesPercentage",
                                  "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
        # The first node tried; random as upstream so that preemptors spread over nodes.
        self.random_offset: Callable[[int], int] = random.randrange
        self.clock: Callable[[], float] = time.time
        # SchedulerAsyncPreemption: the preemptors whose evictions run in the background.
        self.async_preemption = handle.async_preemption
        self._preempting: dict[str, AsyncPreemption] = {}
        self._preempting_lock = threading.Lock()

    # --- PreEnqueue and events (SchedulerAsyncPreemption) --------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """A pod whose preemption still runs in the background waits (upstream PreEnqueue)."""
        if pod.uid not in self._preempting:  # hot path
            return None
        with self._preempting_lock:
            running = self._preempting.get(pod.uid)
            if running is None:
                return None
            running.held_back = running.waits(self.handle.informers)
            if not running.held_back:
                return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WAITING_FOR_PREEMPTION, plugin=self.name)

    def events_to_register(self) -> list[ClusterEvent]:
        """An assigned pod's deletion, whose hint always skips: the plugins that rejected the
        preemptor decide when it is worth another attempt, PreEnqueue only whether it may."""
        if not self.async_preemption:
            return []
        return [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, hint=lambda pod, old, new: False)]

    def is_pod_running_preemption(self, uid: str) -> bool:
        """IsPodRunningPreemption: its evictions run, and its last victim (once it got there)
        is neither gone from the pods informer nor terminating."""
        with self._preempting_lock:
            running = self._preempting.get(uid)
            return running is not None and running.waits(self.handle.informers)

    # --- PodGroupPostFilter (GenericWorkload; upstream's PodGroupEvaluator) ---------------

    def pod_group_post_filter(self, pod_group: dict, members: list[PodInfo], states: list,
                              simulate: PodGroupSimulation) -> tuple[dict[str, str], Status]:
        """Preemption for a whole PodGroup, over the whole cluster: ({member uid: nominated
        node}, status). The snapshot handle.snapshot() gives is a fork the caller throws away
        afterwards (MutableSnapshotSharedLister's StartMutations/EndMutations)."""
        nominations, status = self.preempt_pod_group(pod_group, members, simulate)
        metrics.workload_preemption_attempts.labels(CODE_NAMES[status.code]).inc()
        if status.message():
            status = Status(status.code, "pod group preemption: " + status.message(), error=status.error)
        return nominations, status

    def preempt_pod_group(self, pod_group: dict, members: list[PodInfo],
                          simulate: PodGroupSimulation) -> tuple[dict[str, str], Status]:
        """PodGroupEvaluator.Preempt."""
        priority = (pod_group.get("spec") or {}).get("priority") or 0
        # Without PodGroupPreemptionPolicy (kubesched does not honour that gate) one member
        # with preemptionPolicy Never keeps the whole group from preempting.
        if any(pod.preemption_policy == "Never" for pod in members):
            return {}, Status(Code.UNSCHEDULABLE, NOT_ELIGIBLE_NEVER)
        snapshot = self.handle.snapshot()
        if self.is_ongoing_pod_group_preemption(members, priority, snapshot):
            return {pod.uid: pod.nominated_node_name for pod in members}, \
                Status(Code.SUCCESS, "ongoing preemption on nominated nodes")
        start = time.perf_counter()
        result, status = self.select_pod_group_victims(priority, snapshot, simulate)
        metrics.preemption_evaluation_duration.labels(metrics.POD_GROUP_PREEMPTOR, CODE_NAMES[status.code]).observe(
            time.perf_counter() - start)
        if not status.is_success():
            return {}, status
        nominations, victims, pdb_violations = result
        pods = [pod for victim in victims for pod in victim.pods]
        try:
            self.evict_pod_group_victims(Preemptor.of_pod_group(pod_group, members), victims, pdb_violations)
        except Exception as err:  # any API failure: report it, nominate nothing
            return {}, Status.as_error(err)
        return nominations, Status(Code.SUCCESS, f"found a placement for podgroup, preempting {len(pods)} victims")

    def is_ongoing_pod_group_preemption(self, members: list[PodInfo], priority: int, snapshot) -> bool:
        """isOngoingPreemption: a member's nominated node still has a pod of lower priority
        that is terminating because of a preemption."""
        for node_name in {pod.nominated_node_name for pod in members if pod.nominated_node_name}:
            node = snapshot.get(node_name)
            if node is not None and any(self.victim_priority(p) < priority and terminating_by_preemption(p)
                                        for p in node.pods.values()):
                return True
        return False

    def victim_priority(self, pod: PodInfo) -> int:
        """GetPodPriority: a pod of a PodGroup the scheduler knows has its group's priority."""
        group = self._pod_group_of(pod)
        return pod.priority if group is None else (group.get("spec") or {}).get("priority") or 0

    def _pod_group_of(self, pod: PodInfo) -> dict | None:
        pod_groups = self.handle.pod_groups
        if not pod.pod_group or pod_groups is None:
            return None
        return pod_groups.pod_group(pod.namespace, pod.pod_group)

    def cross_node_victims(self, snapshot, nodes: list[NodeInfo]) -> list[Victim]:
        """getCrossNodesVictims over nodes: every pod on them is a victim of its own, except the
        pods of a PodGroup whose disruptionMode is All, which are one victim together with the
        group's pods wherever they run. A pod of a group has the group's priority."""
        now = self.clock()
        seen: set[str] = set()
        victims: list[Victim] = []
        for node in nodes:
            for pod in node.pods.values():
                group = self._pod_group_of(pod)
                kind = POD_GROUP if pod.pod_group else POD
                if group is None or ((group.get("spec") or {}).get("disruptionMode") or {}).get("all") is None:
                    if pod.uid not in seen:
                        seen.add(pod.uid)
                        victims.append(Victim([pod], self.victim_priority(pod), kind, now))
                    continue
                key = f"{pod.namespace}/{pod.pod_group}"
                if key not in seen:
                    seen.add(key)
                    pods = self._placed_pods_of_group(snapshot, pod)
                    victims.append(Victim(pods or [pod], self.victim_priority(pod), POD_GROUP, now))
        return victims

    def _placed_pods_of_group(self, snapshot, pod: PodInfo) -> list[PodInfo]:
        """The snapshot's PodInfos of the bound and assumed pods of pod's group (ScheduledPods)."""
        pods = []
        for raw in self.handle.pod_groups.scheduled_pods(pod.namespace, pod.pod_group):
            uid = (raw.get("metadata") or {}).get("uid") or ""
            node_name = (raw.get("spec") or {}).get("nodeName") or ""
            nodes = [snapshot.get(node_name)] if node_name else snapshot.node_info_list  # assumed: search
            found = next((n.pods[uid] for n in nodes if n is not None and uid in n.pods), None)
            if found is not None:
                pods.append(found)
        return pods

    def select_pod_group_victims(self, priority: int, snapshot, simulate: PodGroupSimulation
                                 ) -> tuple[tuple | None, Status]:
        """selectVictimsOnDomain over the whole cluster: remove every victim of lower priority,
        place the group on what is left, then give back as many victims as still leave the
        placement feasible, the most important first and those a PodDisruptionBudget protects
        before the others. ((nominations, victims, PDB violations), status)."""
        try:
            return self._select_pod_group_victims(priority, snapshot, simulate)
        except PreemptionError as err:
            return None, Status(Code.ERROR, str(err), error=err)

    def _select_pod_group_victims(self, priority: int, snapshot, simulate: PodGroupSimulation
                                  ) -> tuple[tuple | None, Status]:
        handle = self.handle
        potential = [v for v in self.cross_node_victims(snapshot, snapshot.node_info_list) if v.priority < priority]
        if not potential:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "No preemption victims found for incoming preemptor")
        for victim in potential:
            for pod in victim.pods:
                snapshot.remove_pod(pod, pod.node_name)
        assignments, status = simulate()
        if status is not None:
            return None, status
        potential.sort(key=Victim.importance)
        violating, non_violating = filter_victims_with_pdb_violation(potential, handle.informers.list(
            "poddisruptionbudgets"))

        def reprieve(victim: Victim) -> bool:
            """Give victim back; keep it when every placed member still passes its filters."""
            for pod in victim.pods:
                node = snapshot.add_pod(pod, pod.node_name)
                for member, _node_name, state in assignments:
                    check(handle.run_pre_filter_extension_add_pod(state, member, pod, node))
            reserved: list[tuple[PodInfo, str, Any]] = []
            fits = True
            try:
                for member, node_name, state in assignments:
                    if not is_success(handle.run_filter_plugins_with_nominated_pods(state, member,
                                                                                    snapshot.get(node_name))):
                        fits = False
                        break
                    # As if the member were assumed and reserved there, for the members after it.
                    placed_member = member.placed_on(node_name)
                    snapshot.add_pod(placed_member, node_name)
                    handle.run_reserve_plugins_reserve(state, placed_member, node_name)
                    reserved.append((placed_member, node_name, state))
            finally:
                for placed_member, node_name, state in reversed(reserved):
                    handle.run_reserve_plugins_unreserve(state, placed_member, node_name)
                    snapshot.remove_pod(placed_member, node_name)
            if not fits:
                for pod in victim.pods:
                    node = snapshot.remove_pod(pod, pod.node_name)
                    for member, _node_name, state in assignments:
                        check(handle.run_pre_filter_extension_remove_pod(state, member, pod, node))
            return fits

        to_preempt: list[Victim] = []
        pdb_violations = 0
        for victim, count in violating:
            if not reprieve(victim):
                to_preempt.append(victim)
                pdb_violations += count
        for victim in non_violating:
            if not reprieve(victim):
                to_preempt.append(victim)
        to_preempt.sort(key=Victim.importance)
        nominations = {member.uid: node_name for member, node_name, _state in assignments}
        return (nominations, to_preempt, pdb_violations), Status()

    def evict_pod_group_victims(self, preemptor: Preemptor, victims: list[Victim], pdb_violations: int) -> None:
        """Executor.prepareCandidate for a pod group (the candidate is the cluster, named
        "cluster"): the victims' metrics, then each victim condition-marked and deleted."""
        pods = [pod for victim in victims for pod in victim.pods]
        metrics.workload_preemption_victims.observe(len(pods))
        disruptions = sum(1 for victim in victims if victim.kind == POD_GROUP)
        if disruptions:
            metrics.preemption_workload_disruptions.labels(metrics.POD_GROUP_PREEMPTOR).observe(disruptions)
        if pdb_violations:
            metrics.preemption_pdb_violations.labels(metrics.POD_GROUP_PREEMPTOR).inc(pdb_violations)
        start = time.perf_counter()
        result = "success"
        try:
            self.evict(CLUSTER_CANDIDATE, preemptor, [pod for pod in pods if not pod.deleting])
        except Exception:
            result = "error"
            raise
        finally:
            metrics.preemption_execution_duration.labels(metrics.POD_GROUP_PREEMPTOR, result).observe(
                time.perf_counter() - start)

    # --- PostFilter ------------------------------------------------------------------

    def post_filter(self, state, pod: PodInfo, filtered_node_status_map: dict[str, Status]) -> tuple[str | None, Status]:
        nominated, status = self.preempt(state, pod, filtered_node_status_map)
        if status.message():
            return nominated, Status(status.code, "preemption: " + status.message(), plugin=self.name,
                                     error=status.error)
        return nominated, status

    def preempt(self, state, pod: PodInfo, statuses: dict[str, Status]) -> tuple[str | None, Status]:
        eligible, message = self.pod_eligible_to_preempt_others(pod, statuses)
        if not eligible:
            return None, Status(Code.UNSCHEDULABLE, message)
        all_nodes = self.handle.snapshot().node_info_list
        if not all_nodes:
            return None, Status(Code.ERROR, "no nodes available")
        potential = [n for n in all_nodes
                     if (s := statuses.get(n.name)) is not None and s.code == Code.UNSCHEDULABLE]
        node_statuses: dict[str, Status] = {}
        candidates: list[Candidate] = []
        if potential:
            pdbs = self.handle.informers.list("poddisruptionbudgets")
            offset = self.random_offset(len(potential))
            candidates, node_statuses, errors = self.dry_run_preemption(
                state, pod, potential, pdbs, offset, self.calculate_num_candidates(len(potential)))
            if errors and not candidates:
                return None, Status(Code.ERROR, "; ".join(str(e) for e in errors))
        if not candidates:
            return "", Status(Code.UNSCHEDULABLE, fit_error_message(pod, len(all_nodes), node_statuses))
        extenders = self.handle.extenders
        if extenders:
            candidates, failure = self.call_extenders(extenders, pod, candidates)
            if failure is not None:
                return None, failure
            if not candidates:
                return None, Status(Code.UNSCHEDULABLE, "no candidate node for preemption")
        best = pick_one_node_for_preemption(candidates, self.clock())
        metrics.preemption_victims.observe(len(best.victims))
        if self.async_preemption:
            self.prepare_candidate_async(best, pod)
        else:
            try:
                self.prepare_candidate(best, pod)
            except Exception as err:  # any API failure: report it, nominate nothing
                return None, Status.as_error(err)
        return best.name, Status(Code.SUCCESS, f"found a potential placement for pod on node {best.name}, "
                                               f"preempting {len(best.victims)} victims")

    def call_extenders(self, extenders: list[Any], pod: PodInfo, candidates: list[Candidate]
                       ) -> tuple[list[Candidate], Status | None]:
        """Extenders with a preemptVerb narrow the candidates and their victims (callExtenders)."""
        victims = {c.name: (c.victims, c.num_pdb_violations) for c in candidates}
        for extender in extenders:
            if not extender.supports_preemption() or not extender.is_interested(pod):
                continue
            try:
                narrowed = extender.process_preemption(pod, victims, self.handle.snapshot().get)
            except Exception as err:  # noqa: BLE001 - an extender's failure (ExtenderError) or bad answer
                if extender.is_ignorable():
                    continue
                return [], Status(Code.ERROR, str(err), error=err)
            for node_name, (pods, _unused) in list(narrowed.items()):
                if not pods:
                    if extender.is_ignorable():
                        del narrowed[node_name]
                        continue
                    return [], Status(Code.ERROR, f'expected at least one victim pod on node "{node_name}"')
            victims = narrowed
            if not victims:
                break
        return [Candidate(name, pods, pdb) for name, (pods, pdb) in victims.items()], None

    def pod_eligible_to_preempt_others(self, pod: PodInfo, statuses: dict[str, Status]) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, NOT_ELIGIBLE_NEVER
        nominated = pod.nominated_node_name
        if nominated:
            status = statuses.get(nominated)
            if status is None or status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            node = self.handle.snapshot().get(nominated)
            if node is not None:
                for p in node.pods.values():
                    if p.priority < pod.priority and terminating_by_preemption(p):
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def dry_run_preemption(self, state, pod: PodInfo, potential: list[NodeInfo], pdbs: list[dict], offset: int,
                           num_candidates: int) -> tuple[list[Candidate], dict[str, Status], list[BaseException]]:
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        errors: list[BaseException] = []
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            victims, num_violations, status = self.select_victims_on_node(
                state.clone(), pod, node.clone(), self.node_victims(node), pdbs)
            if is_success(status) and victims:
                (non_violating if num_violations == 0 else violating).append(
                    Candidate(node.name, victims, num_violations))
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if is_success(status):
                status = Status(Code.ERROR, f'expected at least one victim pod on node "{node.name}"')
            if status.code == Code.ERROR:
                errors.append(status.error or RuntimeError(status.message()))
            node_statuses[node.name] = status
        return non_violating + violating, node_statuses, errors

    def node_victims(self, node: NodeInfo) -> list[Victim]:
        """GetVictimsOnNode: each pod on the node with its own priority; with GenericWorkload,
        a pod of a group has its group's priority, and the pods of a group whose disruptionMode
        is All are one victim with the group's pods on other nodes."""
        if self.handle.pod_groups is None:
            now = self.clock()
            return [Victim([pod], pod.priority, POD, now) for pod in node.pods.values()]
        return self.cross_node_victims(self.handle.snapshot(), [node])

    def select_victims_on_node(self, state, pod: PodInfo, node_info: NodeInfo, possible_victims: list[Victim],
                               pdbs: list[dict]) -> tuple[list[PodInfo], int, Status | None]:
        """SelectVictimsOnNode, on a copy of the node: (victim pods, PDB violations, status). A
        group's pods on other nodes leave and return through the PreFilter extensions only,
        with their own nodes as the snapshot has them (upstream mutates only the main node)."""
        handle = self.handle
        main = node_info.name

        def node_of(victim_pod: PodInfo) -> NodeInfo:
            return node_info if victim_pod.node_name == main else handle.snapshot().get(victim_pod.node_name)

        def remove(victim: Victim) -> None:
            for victim_pod in victim.pods:
                if victim_pod.node_name == main:
                    node_info.remove_pod(victim_pod)
                check(handle.run_pre_filter_extension_remove_pod(state, pod, victim_pod, node_of(victim_pod)))

        def add(victim: Victim) -> None:
            for victim_pod in victim.pods:
                if victim_pod.node_name == main:
                    node_info.add_pod(victim_pod)
                check(handle.run_pre_filter_extension_add_pod(state, pod, victim_pod, node_of(victim_pod)))

        potential = [v for v in possible_victims if v.priority < pod.priority]
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
        victims: list[Victim] = []

        def reprieve(v: Victim) -> bool:
            add(v)
            if is_success(handle.run_filter_plugins_with_nominated_pods(state, pod, node_info)):
                return True
            remove(v)
            victims.append(v)
            return False

        try:
            for v in potential:
                remove(v)
            status = handle.run_filter_plugins_with_nominated_pods(state, pod, node_info)
            if not is_success(status):
                return [], 0, status
            potential.sort(key=Victim.importance)
            violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
            num_violating = sum(count for v, count in violating if not reprieve(v))
            for v in non_violating:
                reprieve(v)
        except PreemptionError as err:
            return [], 0, Status(Code.ERROR, str(err), error=err)
        if violating and non_violating:
            victims.sort(key=Victim.importance)
        return [victim_pod for v in victims for victim_pod in v.pods], num_violating, None

    # --- eviction ----------------------------------------------------------------------

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> None:
        """Evict the victims and clear lower-priority nominations to the node.

        The pod itself is nominated by the framework from PostFilter's result, which sets
        status.nominatedNodeName and the nominator entry (upstream's handleSchedulingFailure).
        """
        self.evict(candidate.name, Preemptor.of_pod(pod), [v for v in candidate.victims if not v.deleting])
        self.clear_lower_nominations(candidate.name, pod)

    def clear_lower_nominations(self, node_name: str, pod: PodInfo) -> None:
        """Lower-priority pods nominated to the node may no longer fit there: they lose the
        nomination, which sends them to look elsewhere now."""
        client, nominator = self.handle.client, self.handle.nominator
        for other in nominator.nominated_pods_for_node(node_name):
            if other.priority < pod.priority and other.uid != pod.uid:
                client.patch_pod_status(other.namespace, other.name, {"status": {"nominatedNodeName": None}})
                nominator.delete_nominated_pod_if_exists(other)

    def prepare_candidate_async(self, candidate: Candidate, pod: PodInfo) -> None:
        """prepareCandidateAsync: the evictions and the nominations' clearing start in the
        background; the pod waits at PreEnqueue until they are done."""
        victims = [v for v in candidate.victims if not v.deleting]
        if not victims:
            return
        running = AsyncPreemption()
        with self._preempting_lock:
            self._preempting[pod.uid] = running
        self.handle.parallelizer.go(self._preempt_in_background, candidate.name, pod, victims, running)

    def _preempt_in_background(self, node_name: str, pod: PodInfo, victims: list[PodInfo],
                               running: AsyncPreemption) -> None:
        start = time.perf_counter()
        preemptor = Preemptor.of_pod(pod)
        failed = last_in_memory = False
        try:
            try:
                self.clear_lower_nominations(node_name, pod)
            except Exception as err:  # noqa: BLE001 - not critical: the evictions go on
                klog.error("Cannot clear 'NominatedNodeName' field from lower priority pods on the same target node",
                           node=node_name, err=str(err))
                failed = True
            try:
                self.evict(node_name, preemptor, victims[:-1])
            except Exception as err:  # noqa: BLE001 - the last victim is spared, the preemptor activated
                klog.error("Error occurred during async preemption", preemptor=pod.key, node=node_name, err=str(err))
                failed = True
            else:
                last = victims[-1]
                with self._preempting_lock:
                    running.last_victim = last.key
                try:
                    last_in_memory = self.preempt_pod(node_name, preemptor, last)
                except Exception as err:  # noqa: BLE001 - reported; the preemptor is activated
                    klog.error("Error occurred during async preemption of the last victim", preemptor=pod.key,
                               node=node_name, err=str(err))
                    failed = True
        finally:
            with self._preempting_lock:
                # A newer preemption of the same pod may have started meanwhile: it is its own.
                latest = self._preempting.get(pod.uid) is running
                if latest:
                    del self._preempting[pod.uid]
                # Held back with its last victim's deletion already seen (or not to come):
                # no event will let it go.
                missed = latest and running.held_back and (
                    running.last_victim is None or self.handle.informers.get("pods", running.last_victim) is None)
            result = "error" if failed else "success"
            metrics.preemption_goroutines_duration.labels(result).observe(time.perf_counter() - start)
            metrics.preemption_goroutines_execution.labels(result).inc()
            if failed or last_in_memory or missed:
                # No deletion event may come to requeue it.
                self.handle.activate([pod])

    def evict(self, node_name: str, preemptor: "Preemptor", victims: list[PodInfo]) -> None:
        """Preempt the victims side by side; the first failure is raised."""
        self.handle.parallelizer.until(victims, lambda victim: self.preempt_pod(node_name, preemptor, victim))

    def preempt_pod(self, node_name: str, preemptor: "Preemptor", victim: PodInfo) -> bool:
        """Executor.PreemptPod: a victim waiting on Permit is rejected in memory (True); any
        other gets the DisruptionTarget condition and is deleted, with an event (False)."""
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority {preemptor.kind}",
            "lastTransitionTime": _now_rfc3339(),
        }
        generation = (victim.raw.get("metadata") or {}).get("generation")
        if generation:
            condition["observedGeneration"] = generation
        client, recorder = self.handle.client, self.handle.event_recorder
        waiting = self.handle.get_waiting_pod(victim.uid)
        if waiting is not None and waiting.preempt(self.name, "preempted"):
            # A pod waiting on Permit is only assumed: it goes back to the queue, nothing to delete.
            recorder.eventf(victim.raw, "Normal", "Preempted", "Preempting",
                            f"Preempted by {preemptor.kind} {preemptor.uid} on node {node_name} "
                            f"(in kube-scheduler memory).")
            return True
        try:
            if not self._has_condition(victim, condition):
                client.patch_pod_status(victim.namespace, victim.name, {"status": {"conditions": [condition]}})
            client.delete_pod(victim.namespace, victim.name, uid=victim.uid)
        except Exception as err:  # a victim already gone is fine; anything else fails the preemption
            if _is_not_found(err):
                return False
            raise
        recorder.eventf(victim.raw, "Normal", "Preempted", "Preempting",
                        f"Preempted by {preemptor.kind} {preemptor.uid} on node {node_name}")
        return False

    @staticmethod
    def _has_condition(pod: PodInfo, condition: dict) -> bool:
        for c in (pod.raw.get("status") or {}).get("conditions") or ():
            if c.get("type") == condition["type"]:
                return all(c.get(k) == condition[k] for k in ("status", "reason", "message"))
        return False
