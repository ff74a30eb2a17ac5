"""PermitGate: a test plugin that makes pods labelled permit-gate=on wait in Permit until
their annotation test.kubesched.io/permit says "allow" or "reject" (or the wait times out).

It reaches the waiting pods the way a coscheduling plugin does: through the framework handle
(iterate_over_waiting_pods, then allow/reject from its own thread).
"""

import threading

from kubesched.framework.interface import Code, Status

ANNOTATION = "test.kubesched.io/permit"


class PermitGate:
    name = "PermitGate"

    def __init__(self, args, handle):
        self.handle = handle
        self.timeout = float((args or {}).get("timeoutSeconds", 30))
        threading.Thread(target=self._watch, name="permit-gate", daemon=True).start()

    def permit(self, state, pod, node_name):
        if pod.labels.get("permit-gate") != "on":
            return None
        return Status(Code.WAIT), self.timeout

    def _watch(self):
        stop = threading.Event()
        while not stop.wait(0.2):
            self.handle.iterate_over_waiting_pods(self._decide)

    def _decide(self, waiting):
        pod = waiting.get_pod()
        try:
            live = self.handle.client.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        except Exception:  # noqa: BLE001 - gone or unreachable: the timeout decides
            return
        decision = ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
        if decision == "allow":
            waiting.allow(self.name)
        elif decision == "reject":
            waiting.reject(self.name, "rejected by PermitGate")
