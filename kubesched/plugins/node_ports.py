"""NodePorts: a pod's hostPorts must be free on the node.

A port bound on 0.0.0.0 conflicts with the same protocol and port on any address; a port
bound on a specific address conflicts with that address and with 0.0.0.0.
"""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.signers import HOST_PORTS_KEY, Fragments, host_ports_signer
from kubesched.framework.types import NodeInfo, PodInfo, host_ports_of

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
PRE_FILTER_STATE_KEY = "PreFilterNodePorts"
BIND_ALL_HOST_IP = "0.0.0.0"


def port_conflicts(used_ports: dict[tuple[str, str, int], int], ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict."""
    if port <= 0:
        return False
    ip = ip or BIND_ALL_HOST_IP
    protocol = protocol or "TCP"
    if ip == BIND_ALL_HOST_IP:
        for _used_ip, used_protocol, used_port in used_ports:
            if used_port == port and used_protocol == protocol:
                return True
        return False
    return (BIND_ALL_HOST_IP, protocol, port) in used_ports or (ip, protocol, port) in used_ports


def fits_ports(want: list[tuple[str, str, int]], used_ports: dict) -> bool:
    if not used_ports:
        return True
    for ip, protocol, port in want:
        if port_conflicts(used_ports, ip, protocol, port):
            return False
    return True


class NodePorts:
    name = "NodePorts"

    def __init__(self, args: dict | None, handle: Handle):
        self._rejected = Status(Code.UNSCHEDULABLE, ERR_REASON, plugin=self.name)

    def sign_pod(self, pod: PodInfo) -> Fragments:
        return [(HOST_PORTS_KEY, host_ports_signer(pod))]

    def events_to_register(self) -> list[ClusterEvent]:
        # A pod's ports are immutable, so pod updates cannot free any.
        return [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, hint=self.is_schedulable_after_pod_deleted),
                ClusterEvent(EventResource.NODE, ActionType.ADD)]

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
        """Queue only when the deleted pod held (or was nominated to hold) a host port that
        conflicts with one the pod wants."""
        if old is None:
            return True
        spec, status = old.get("spec") or {}, old.get("status") or {}
        if not spec.get("nodeName") and not status.get("nominatedNodeName"):
            return False
        freed = {port: 1 for port in host_ports_of(spec)}
        return bool(freed) and not fits_ports(pod.host_ports, freed)

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        if not pod.host_ports:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, pod.host_ports)
        return None, None

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        want = state.get(PRE_FILTER_STATE_KEY, pod.host_ports)
        return None if fits_ports(want, node_info.used_ports) else self._rejected

    def filter_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        want, rejected = state.get(PRE_FILTER_STATE_KEY, pod.host_ports), self._rejected
        return [None if fits_ports(want, n.used_ports) else rejected for n in nodes]
