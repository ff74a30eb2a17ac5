"""NodeDeclaredFeatures: a pod that needs a node feature fits only nodes that declare it.

The features a pod needs are inferred from its spec as k8s.io/component-helpers'
nodedeclaredfeatures framework does in 1.37; a node declares its features in
status.declaredFeatures.
"""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import FEATURES_KEY, Fragments
from kubesched.framework.types import NodeInfo, PodInfo

ERR_REASON_UNSATISFIED = "node(s) didn't match Pod's required features"
PRE_FILTER_STATE_KEY = "PreFilterNodeDeclaredFeatures"


def _containers(spec: dict) -> list[dict]:
    return list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())


def _needs_restart_all_containers(spec: dict) -> bool:
    return any(rule.get("action") == "RestartAllContainers"
               for c in _containers(spec) for rule in c.get("restartPolicyRules") or ())


def _needs_user_namespaces_host_network(spec: dict) -> bool:
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _needs_bind_mount_options(spec: dict) -> bool:
    containers = _containers(spec) + list(spec.get("ephemeralContainers") or ())
    return any(m.get("bindMountOptions") for c in containers for m in c.get("volumeMounts") or ())


# Only the registered features whose InferForScheduling can be true in 1.37.
_FEATURES = (
    ("RestartAllContainersOnContainerExits", _needs_restart_all_containers),
    ("UserNamespacesHostNetworkSupport", _needs_user_namespaces_host_network),
    ("VolumeBindMountOptions", _needs_bind_mount_options),
)


def required_features(pod: PodInfo) -> frozenset[str]:
    spec = pod.raw.get("spec") or {}
    return frozenset(name for name, needs in _FEATURES if needs(spec))


class NodeDeclaredFeatures:
    name = "NodeDeclaredFeatures"

    def __init__(self, args: dict | None, handle: Handle):
        self._rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(FEATURES_KEY, sorted(required_features(pod)))]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE),
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE)]

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        required = required_features(pod)
        if not required:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, required)
        return None, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        required = state.get(PRE_FILTER_STATE_KEY)
        if required is None:
            required = required_features(pod)
        return None if required <= node_info.declared_features else self._rejected
