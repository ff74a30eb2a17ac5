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

Victims are evicted before PostFilter returns (upstream's behaviour without
SchedulerAsyncPreemption), so the pod is never retried against a node whose victims
are still being chosen.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable

from kubesched import metrics
from kubesched.api.selectors import SelectorError, label_selector
from kubesched.framework.fit_error import Diagnosis, FitError, NodeToStatus
from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, PluginArgsError, Status, is_success
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, int_arg

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
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


def more_important_key(now: float) -> Callable[[PodInfo], tuple]:
    """Sort key for MoreImportantVictim: higher priority first, then the earlier started."""
    return lambda p: (-p.priority, _start_ts(p, now))


def terminating_by_preemption(pod: PodInfo) -> bool:
    if not pod.deleting:
        return False
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


def filter_victims_with_pdb_violation(victims: list[PodInfo], pdbs: list[dict]) -> tuple[list[PodInfo], list[PodInfo]]:
    """FilterVictimsWithPDBViolation: (violating, non-violating), each in the given order."""
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

    violating_victims, non_violating = [], []
    for v in victims:
        (violating_victims if violating(v) else non_violating).append(v)
    return violating_victims, non_violating


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

    # --- PostFilter ------------------------------------------------------------------

    def pod_group_post_filter(self, pod_group: dict, members: list[PodInfo], evaluated: int) -> Status | None:
        """The part of upstream's PodGroupPostFilter (PodGroupEvaluator.Preempt, GenericWorkload)
        that kubesched has: a group that may not preempt, and a cluster with no pod of lower
        priority than the group, get upstream's status. None when victims exist: kubesched does
        not preempt for a whole group yet, and the group waits as it is."""
        if any(pod.preemption_policy == "Never" for pod in members):  # without PodGroupPreemptionPolicy
            return Status(Code.UNSCHEDULABLE, "pod group preemption: not eligible due to preemptionPolicy=Never.")
        priority = (pod_group.get("spec") or {}).get("priority") or 0
        for node in self.handle.snapshot().node_info_list:
            for pod in node.pods.values():
                if self._victim_priority(pod) < priority:
                    return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      "pod group preemption: No preemption victims found for incoming preemptor")

    def _victim_priority(self, pod: PodInfo) -> int:
        """GetPodPriority: a pod of a PodGroup the scheduler knows has its group's priority."""
        pod_groups = self.handle.pod_groups
        if not pod.pod_group or pod_groups is None:
            return pod.priority
        group = pod_groups.pod_group(pod.namespace, pod.pod_group)
        return pod.priority if group is None else (group.get("spec") or {}).get("priority") or 0

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
                state.clone(), pod, node.clone(), list(node.pods.values()), pdbs)
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

    def select_victims_on_node(self, state, pod: PodInfo, node_info: NodeInfo, possible_victims: list[PodInfo],
                               pdbs: list[dict]) -> tuple[list[PodInfo], int, Status | None]:
        """SelectVictimsOnNode, on a copy of the node: (victims, PDB violations, status)."""
        handle = self.handle

        def remove(victim: PodInfo) -> Status | None:
            node_info.remove_pod(victim)
            return handle.run_pre_filter_extension_remove_pod(state, pod, victim, node_info)

        def add(victim: PodInfo) -> Status | None:
            node_info.add_pod(victim)
            return handle.run_pre_filter_extension_add_pod(state, pod, victim, node_info)

        potential = [v for v in possible_victims if v.priority < pod.priority]
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
        for v in potential:
            status = remove(v)
            if not is_success(status):
                return [], 0, status
        status = handle.run_filter_plugins_with_nominated_pods(state, pod, node_info)
        if not is_success(status):
            return [], 0, status
        key = more_important_key(self.clock())
        potential.sort(key=key)
        violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(v: PodInfo) -> tuple[bool, Status | None]:
            status = add(v)
            if not is_success(status):
                return False, status
            if is_success(handle.run_filter_plugins_with_nominated_pods(state, pod, node_info)):
                return True, None
            status = remove(v)
            if not is_success(status):
                return False, status
            victims.append(v)
            return False, None

        num_violating = 0
        for v in violating:
            fits, err = reprieve(v)
            if err is not None:
                return [], 0, err
            if not fits:
                num_violating += 1
        for v in non_violating:
            _unused, err = reprieve(v)
            if err is not None:
                return [], 0, err
        if violating and non_violating:
            victims.sort(key=key)
        return victims, num_violating, None

    # --- eviction ----------------------------------------------------------------------

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> None:
        """Evict the victims and clear lower-priority nominations to the node.

        The pod itself is nominated by the framework from PostFilter's result, which sets
        status.nominatedNodeName and the nominator entry (upstream's handleSchedulingFailure).
        """
        victims = [v for v in candidate.victims if not v.deleting]
        workers = max(1, min(len(victims), self.handle.parallelism))
        if victims:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for future in [pool.submit(self.preempt_pod, candidate.name, pod, v) for v in victims]:
                    future.result()
        client, nominator = self.handle.client, self.handle.nominator
        for other in nominator.nominated_pods_for_node(candidate.name):
            if other.priority < pod.priority and other.uid != pod.uid:
                client.patch_pod_status(other.namespace, other.name, {"status": {"nominatedNodeName": None}})
                nominator.delete_nominated_pod_if_exists(other)

    def preempt_pod(self, node_name: str, preemptor: PodInfo, victim: PodInfo) -> None:
        """Executor.PreemptPod for a victim not held in scheduler memory: condition, delete, event."""
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
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
                            f"Preempted by pod {preemptor.uid} on node {node_name} (in kube-scheduler memory).")
            return
        try:
            if not self._has_condition(victim, condition):
                client.patch_pod_status(victim.namespace, victim.name, {"status": {"conditions": [condition]}})
            client.delete_pod(victim.namespace, victim.name, uid=victim.uid)
        except Exception as err:  # a victim already gone is fine; anything else fails the preemption
            if _is_not_found(err):
                return
            raise
        recorder.eventf(victim.raw, "Normal", "Preempted", "Preempting",
                        f"Preempted by pod {preemptor.uid} on node {node_name}")

    @staticmethod
    def _has_condition(pod: PodInfo, condition: dict) -> bool:
        for c in (pod.raw.get("status") or {}).get("conditions") or ():
            if c.get("type") == condition["type"]:
                return all(c.get(k) == condition[k] for k in ("status", "reason", "message"))
        return False
