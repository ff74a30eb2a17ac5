"""GangScheduling: all or nothing for the pods of a PodGroup with a gang policy (upstream
framework/plugins/gangscheduling, v1.37.1, without CompositePodGroups).

PreEnqueue keeps a group's pods out of the active queue until minCount of them exist;
PlacementFeasible, run by the pod group cycle (schedule_one.py) before and after each member,
ends the cycle early when minCount can no longer be reached; Permit holds a member until
minCount of the group are bound or assumed, then lets the waiting ones go together. The
texts, the 5-minute Permit timeout and the QueueingHints are upstream's. The group state
comes from the Handle's pod_groups (backend/pod_groups.py), None with the gate off.
"""

from __future__ import annotations

from kubesched.backend.pod_groups import gang_min_count, pod_group_name
from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.types import PodInfo

# permitTimeoutDuration: how long a member waits at Permit for the rest of its gang.
PERMIT_TIMEOUT_SECONDS = 5 * 60.0
WAITING_FOR_MIN_COUNT = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_AT_PERMIT = "waiting for minCount pods from a gang to be scheduled"


def waiting_for_pod_group(name: str) -> str:
    # "pods's" is v1.37.1's own wording (preEnqueueHierarchiesDisabled).
    return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


def min_count_of(pod_group: dict) -> int:
    """getMinCount: a group without a gang policy needs one pod."""
    count = gang_min_count(pod_group)
    return 1 if count is None else count


class GangScheduling:
    name = "GangScheduling"
    INFORMERS = ("podgroups",)

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle
        self.pod_groups = handle.pod_groups

    def _pod_group(self, pod: PodInfo) -> dict | None:
        return self.pod_groups.pod_group(pod.namespace, pod.pod_group) if self.pod_groups is not None else None

    # -- PreEnqueue ------------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.pod_group:
            return None
        pod_group = self._pod_group(pod)
        if pod_group is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, waiting_for_pod_group(pod.pod_group), plugin=self.name)
        min_count = gang_min_count(pod_group)
        if min_count is None:
            return None
        if self.pod_groups.all_pods_count(pod.namespace, pod.pod_group) < min_count:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WAITING_FOR_MIN_COUNT, plugin=self.name)
        return None

    # -- PlacementFeasible (the pod group cycle) ---------------------------------------------------

    def placement_feasible(self, pod_group: dict, remaining: int, scheduled: int) -> Status | None:
        min_count = min_count_of(pod_group)
        if remaining + scheduled < min_count:
            return Status(Code.UNSCHEDULABLE, f"minCount ({min_count}) cannot be satisfied: "
                                              f"{scheduled} scheduled, {remaining} remaining", plugin=self.name)
        if scheduled < min_count:
            return Status(Code.WAIT, f"minCount ({min_count}) is not yet satisfied: "
                                     f"{scheduled} scheduled, {remaining} remaining", plugin=self.name)
        return None

    # -- Permit ----------------------------------------------------------------------------------

    def permit(self, state, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        if not pod.pod_group:
            return None, 0.0
        pod_group = self._pod_group(pod)
        if pod_group is None:
            return Status(Code.ERROR, f"failed to get podGroup {pod.namespace}/{pod.pod_group}: "
                                      f'podgroup.scheduling.k8s.io "{pod.pod_group}" not found'), 0.0
        min_count = gang_min_count(pod_group)
        if min_count is None:
            return None, 0.0
        if self.pod_groups.scheduled_pods_count(pod.namespace, pod.pod_group) < min_count:
            return Status(Code.WAIT, WAITING_AT_PERMIT), PERMIT_TIMEOUT_SECONDS
        for uid in self.pod_groups.assumed_pods(pod.namespace, pod.pod_group):
            waiting = self.handle.get_waiting_pod(uid)
            if waiting is not None:
                waiting.allow(self.name)
        return None, 0.0

    # -- QueueingHints ---------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            # The group field is immutable: a pod's add is the only pod event that changes a group.
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD, hint=self._after_pod_added),
            ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, hint=self._after_pod_added),
            ClusterEvent(EventResource.POD_GROUP, ActionType.ADD, hint=self._after_pod_group_added),
            ClusterEvent(EventResource.POD_GROUP, ActionType.UPDATE, hint=self._after_pod_group_updated),
        ]

    @staticmethod
    def _after_pod_added(pod: PodInfo, _old: dict | None, new: dict | None) -> bool:
        if not pod.pod_group or new is None:
            return False
        meta = new.get("metadata") or {}
        return pod_group_name(new) == pod.pod_group and meta.get("namespace", "default") == pod.namespace

    @staticmethod
    def _same_group(pod: PodInfo, pod_group: dict) -> bool:
        meta = pod_group.get("metadata") or {}
        return bool(pod.pod_group) and meta.get("name") == pod.pod_group and meta.get("namespace") == pod.namespace

    def _after_pod_group_added(self, pod: PodInfo, _old: dict | None, new: dict | None) -> bool:
        return new is not None and self._same_group(pod, new)

    def _after_pod_group_updated(self, pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        if old is None or new is None or not self._same_group(pod, new):
            return False
        old_count, new_count = gang_min_count(old), gang_min_count(new)
        return old_count is not None and new_count is not None and new_count < old_count
