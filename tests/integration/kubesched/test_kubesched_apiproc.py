"""kubesched's API children (kubesched/apiproc.py) against the lab: a bind the API server
refuses is forgotten and retried, killed children are started again, and they never outlive
kubesched."""

import os
import signal
import time
import uuid

import pytest
from kubesched_lab import events_for, node_of, pod_manifest, wait_for


def children_of(pid: int) -> list[int]:
    """Child processes of every thread (a restarted child is started by a reader thread)."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children.extend(int(child) for child in handle.read().split())
        except FileNotFoundError:
            continue  # the thread ended after the listing (a finished bind worker): it has no children now
    return children


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_refused_bind_is_forgotten_and_the_pod_bound_on_retry(run_kubesched, api_proxy, nodes, core_v1, api_client, namespace):
    names = nodes(2)
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    sched = run_kubesched({"clientConnection": {"kubeconfig": str(api_proxy.kubeconfig)},
                           "profiles": [{"schedulerName": name}]})
    api_proxy.fail_binds = 1
    core_v1.create_namespaced_pod(namespace, pod_manifest("refused", schedulerName=name), _preload_content=False)
    node = wait_for(lambda: node_of(core_v1, namespace, "refused"), 30, what="'refused' to be bound on the retry")
    assert node in names and api_proxy.fail_binds == 0
    failed = wait_for(lambda: [e for e in events_for(api_client, namespace, "refused")
                               if e["reason"] == "FailedScheduling"], 10, what="the FailedScheduling event")
    assert "binding refused by the test proxy" in failed[0]["note"]
    log = sched.log()
    assert '"Failed to bind pod" pod="' + f'{namespace}/refused"' in log
    assert f'"Successfully bound pod to node" pod="{namespace}/refused" node="{node}"' in log


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_api_children_end_with_kubesched(run_kubesched, signum):
    sched = run_kubesched({"profiles": [{"schedulerName": f"kubesched-it-{uuid.uuid4().hex[:6]}"}]})
    children = children_of(sched.pid)
    assert len(children) == 2, f"expected the watch and writer processes, found {children}"
    sched.send(signum)
    assert sched.wait_exit(15) is not None
    deadline = time.monotonic() + 5
    while any(running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in children if running(pid)] == []


def test_killed_children_are_started_again_and_scheduling_goes_on(run_kubesched, nodes, core_v1, namespace):
    nodes(2)
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    sched = run_kubesched({"profiles": [{"schedulerName": name}]})
    children = children_of(sched.pid)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(set(children_of(sched.pid)) - set(children)) == 2, 20, what="both children started again")
    core_v1.create_namespaced_pod(namespace, pod_manifest("after-restart", schedulerName=name), _preload_content=False)
    wait_for(lambda: node_of(core_v1, namespace, "after-restart"), 30, what="a pod created after the restart to be bound")
    assert sched.log().count('"API child process exited; starting it again"') == 2
    assert sched.proc.poll() is None
