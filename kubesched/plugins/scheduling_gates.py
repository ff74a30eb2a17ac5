"""SchedulingGates: a pod with spec.schedulingGates waits outside the active queue."""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.types import PodInfo


def go_string_list(items: list[str]) -> str:
    """fmt's %v of a []string: [a b c]."""
    return "[" + " ".join(items) + "]"


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, args: dict | None, handle: Handle):
        pass  # no args, nothing of the handle

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.scheduling_gates:
            return None
        gates = [g.get("name", "") for g in pod.scheduling_gates]
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"waiting for scheduling gates: {go_string_list(gates)}", plugin=self.name)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]
