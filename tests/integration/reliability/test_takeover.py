"""A new leader whose watch trails the API server must not schedule from what it lacks.

The soak's one kubesched overcommit: a standby that had just synced took the Lease while its
pod watch was still delivering the last seconds of bindings, and bound a pod to a node that
was already full. Here the trailing watch is made on purpose: the standby's watch process is
stopped (SIGSTOP) while a node fills, the Lease is handed over, and the watch resumes a
second later. A leader that scheduled at once would bind the waiting pods to the node its
cache still shows empty.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

from kubesched.events import micro_time
from lab.fake_nodes import create_nodes
from lab.pod_watch import node_of
from tests.reliability.instances import scheduler_config, start_instance, wait_until
from tests.reliability.pods import RELIABILITY_LABELS, create_pods

CAPACITY = 3
WAITING = 2
LEASE_NAMESPACE = "kube-system"


class HeldLease:
    """A Lease the test holds (renewed every 0.5 s) until it hands it over by emptying the holder."""

    def __init__(self, cluster, name: str):
        self.cluster, self.path = cluster, f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
        self.name = name
        self.released = threading.Event()
        cluster.request("POST", self.path, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "the-test", "leaseDurationSeconds": 6, "acquireTime": micro_time(),
                     "renewTime": micro_time()}})
        self.thread = threading.Thread(target=self._renew, daemon=True)
        self.thread.start()

    def _renew(self) -> None:
        while not self.released.wait(0.5):
            self._patch({"renewTime": micro_time()})

    def _patch(self, spec: dict) -> None:
        self.cluster.request("PATCH", f"{self.path}/{self.name}", {"spec": spec})  # a merge patch

    def hand_over(self) -> None:
        self.released.set()
        self.thread.join()
        self._patch({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time()})

    def delete(self) -> None:
        self.released.set()
        self.cluster.request("DELETE", f"{self.path}/{self.name}", ok=(200, 404))


def _watch_process(pid: int) -> int:
    """The scheduler's watch process: the first of its two API children (kubesched/apiproc.py)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 2, f"kubesched {pid} has children {children}, expected its watch and writer processes"
    return min(children, key=lambda child: int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[19]))


def test_a_new_leader_whose_watch_trails_waits_for_it_and_overcommits_no_node(cluster, workdir):
    namespace = cluster.create_namespace("takeover", RELIABILITY_LABELS)
    tag = uuid.uuid4().hex[:6]
    scheduler_name = lease_name = f"rel-takeover-{tag}"
    node = create_nodes(cluster.core, 1, prefix=f"rel-takeover-{tag}-", pods=CAPACITY, zones=0)[0]
    only_there = {"nodeSelector": {"kubernetes.io/hostname": node}}
    lease = HeldLease(cluster, lease_name)
    instance = start_instance(scheduler_config(cluster.kubeconfig, scheduler_name, lease_name=lease_name),
                              workdir, "takeover")
    watch_pid = None
    try:
        instance.wait_ready()
        waiting = create_pods(cluster, namespace, WAITING, scheduler_name, prefix="waiting", **only_there)
        assert wait_until(lambda: instance.metric("scheduler_pending_pods", {"queue": "active"}) == WAITING, 30), \
            "the standby's queue never held the waiting pods"
        watch_pid = int(_watch_process(instance.pid))
        os.kill(watch_pid, signal.SIGSTOP)
        # The node fills while the standby's watch is stopped: its cache still shows it empty.
        create_pods(cluster, namespace, CAPACITY, "someone-else", prefix="full", nodeName=node)
        lease.hand_over()
        assert wait_until(instance.is_leader, 15, 0.05), f"the standby never took the Lease:\n{instance.log()[-2000:]}"
        time.sleep(1.0)  # a leader that scheduled at once has bound the waiting pods by now
        os.kill(watch_pid, signal.SIGCONT)
        watch_pid = None
        decided = wait_until(lambda: all("Too many pods" in _scheduled_message(cluster, namespace, name)
                                         or node_of(cluster.pod(namespace, name)) for name in waiting), 30, 0.2)
        on_node = sorted(p["metadata"]["name"] for p in cluster.pods(namespace) if node_of(p) == node)
        assert on_node == [f"full-{i:05d}" for i in range(CAPACITY)], f"{node} overcommitted: it holds {on_node}"
        assert decided, [_scheduled_message(cluster, namespace, name) for name in waiting]
        assert "Caches caught up with the API server" in instance.log(), instance.log()[-3000:]
        assert instance.alive()
    finally:
        if watch_pid is not None:
            os.kill(watch_pid, signal.SIGCONT)
        instance.stop()
        lease.delete()
        cluster.delete_namespace(namespace)
        cluster.request("DELETE", f"/api/v1/nodes/{node}", ok=(200, 404))


def _scheduled_message(cluster, namespace: str, name: str) -> str:
    for cond in ((cluster.pod(namespace, name) or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return cond.get("message") or ""
    return ""
