"""DefaultBinder: binds the pod to the chosen node through the pods/binding subresource."""

from __future__ import annotations

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Status
from kubesched.framework.types import PodInfo


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle

    def bind(self, state, pod: PodInfo, node_name: str) -> Status | None:
        try:
            self.handle.client.bind(pod.namespace, pod.name, pod.uid, node_name)
        except Exception as err:  # any API failure fails the bind; the runtime forgets and requeues
            return Status.as_error(err, plugin=self.name)
        return None
