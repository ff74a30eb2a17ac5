"""Extension points, statuses and cycle state, as kube-scheduler's framework defines them.

A plugin is a class with a ``name`` and any of the extension-point methods below. The
runtime calls only the methods a plugin defines, so a plugin implements just its points.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class PluginArgsError(ValueError):
    """A plugin's pluginConfig args are invalid; field is the path inside args."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    # The pod cannot fit on this node and preemption on this node would not help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


# Upstream's Code.String() names, used as metric label values.
CODE_NAMES = {Code.SUCCESS: "Success", Code.ERROR: "Error", Code.UNSCHEDULABLE: "Unschedulable",
              Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable", Code.WAIT: "Wait",
              Code.SKIP: "Skip", Code.PENDING: "Pending"}


class Status:
    """The outcome of one plugin call: a code, reasons (as upstream words them), a plugin."""

    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, plugin: str = "",
                 error: BaseException | None = None):
        self.code = code
        self.reasons = list(reasons)
        self.plugin = plugin
        self.error = error

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> "Status":
        self.plugin = plugin
        return self

    def __repr__(self) -> str:
        return f"Status({self.code.name}, {self.reasons!r}, plugin={self.plugin!r})"

    @classmethod
    def as_error(cls, err: BaseException, plugin: str = "") -> "Status":
        return cls(Code.ERROR, str(err), plugin=plugin, error=err)


# Shared instance for the hot path: success carries no reasons, so it is never mutated.
SUCCESS = Status()


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


class StateNotFound(KeyError):
    """CycleState.read of a key nobody wrote; worded as upstream's CycleState.Read error."""

    def __str__(self) -> str:
        return f'failed to read "{self.args[0]}" from cycleState: not found'


class CycleState:
    """Per-pod scratch space shared by the plugins of one scheduling cycle."""

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "record_plugin_metrics")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.record_plugin_metrics = False

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """Return the value for key; StateNotFound (a KeyError) when a PreFilter/PreScore did
        not write it, e.g. because that extension point is disabled in the profile."""
        try:
            return self._data[key]
        except KeyError:
            raise StateNotFound(key) from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> "CycleState":
        c = CycleState()
        c._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        return c


@dataclass
class PreFilterResult:
    """Restricts the nodes to evaluate; None means all nodes."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None


# Cluster events, for requeueing unschedulable pods (upstream's framework.ClusterEvent).
class ActionType(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_NODE_DECLARED_FEATURE = 2048
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT
              | UPDATE_NODE_CONDITION | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL
              | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATIONS
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_NODE_DECLARED_FEATURE)
    ALL = ADD | DELETE | UPDATE


class EventResource(str, enum.Enum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnschedulablePod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"
    POD_GROUP = "scheduling.k8s.io/PodGroup"
    WILDCARD = "*"


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of cluster change. A plugin registers the events that may make a pod it rejected
    schedulable, each with an optional hint (upstream QueueingHintFn): hint(pod, old, new),
    with the raw objects before and after (None for an add's old or a delete's new), returns
    whether this particular change may help the pod; no hint means it may."""

    resource: EventResource
    action: ActionType
    label: str = ""
    # A registered event's QueueingHint: hint(pod, old, new) with the pod's PodInfo is False
    # when this event cannot make that pod schedulable (old None: added; new None: deleted).
    # None: always requeue.
    hint: Callable[[Any, dict | None, dict | None], bool] | None = field(default=None, compare=False)

    def matches(self, other: "ClusterEvent") -> bool:
        if self.resource != EventResource.WILDCARD and other.resource != EventResource.WILDCARD:
            if self.resource != other.resource:
                # An assigned pod event is also a pod event.
                if not (self.resource == EventResource.POD
                        and other.resource == EventResource.ASSIGNED_POD):
                    return False
        return bool(self.action & other.action)


@dataclass
class NodeScore:
    name: str
    score: int = 0
