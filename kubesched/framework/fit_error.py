"""Why a pod fits no node: upstream's Diagnosis and FitError (pkg/scheduler/framework/types.go).

The FailedScheduling event and the PodScheduled condition carry FitError's message, so its
wording, sorting and punctuation follow upstream byte for byte.
"""

from __future__ import annotations

from collections import Counter

from kubesched.framework.interface import Code, Status

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
# validation.NoteLengthLimit: longer event notes are cut with " ..." as upstream does.
NOTE_LENGTH_LIMIT = 1024


class NodeToStatus(dict):
    """Node name -> rejecting Status for nodes evaluated explicitly; every other node reads as
    ``absent_nodes_status`` (upstream NodeToStatus), e.g. the PreFilter rejection for all."""

    def __init__(self, absent_nodes_status: Status | None = None):
        super().__init__()
        self.absent_nodes_status = absent_nodes_status or Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def __missing__(self, name: str) -> Status:
        return self.absent_nodes_status

    def get(self, name: str, default: Status | None = None) -> Status | None:  # type: ignore[override]
        return super().get(name, self.absent_nodes_status)


class Diagnosis:
    __slots__ = ("node_to_status", "unschedulable_plugins", "pending_plugins", "pre_filter_msg",
                 "post_filter_msg")

    def __init__(self) -> None:
        self.node_to_status = NodeToStatus()
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)


class FitError(Exception):
    """No node fits the pod; str() is upstream's "0/N nodes are available: ..." message."""

    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis):
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__()

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            reasons: Counter[str] = Counter()
            for status in d.node_to_status.values():
                for reason in status.reasons:
                    reasons[reason] += 1
            explicit = len(d.node_to_status)
            if explicit < self.num_all_nodes:
                for reason in d.node_to_status.absent_nodes_status.reasons:
                    reasons[reason] += self.num_all_nodes - explicit
            histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if d.post_filter_msg:
            msg += f" {d.post_filter_msg}"
        return msg


def truncate_message(message: str) -> str:
    if len(message) <= NOTE_LENGTH_LIMIT:
        return message
    suffix = " ..."
    return message[:NOTE_LENGTH_LIMIT - len(suffix)] + suffix
