"""Watches that expire (410 Gone) are relisted and lost connections retried, never a restart."""

import time
import uuid

from kubesched_lab import node_of, pod_manifest, wait_for


def config_via(proxy, name):
    return {"clientConnection": {"kubeconfig": str(proxy.kubeconfig)}, "profiles": [{"schedulerName": name}]}


def test_expired_watch_is_relisted_and_pods_created_meanwhile_are_scheduled(run_kubesched, api_proxy, nodes,
                                                                            core_v1, namespace):
    nodes(2)
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    sched = run_kubesched(config_via(api_proxy, name))
    api_proxy.expire_watches = True

    def pod_watch_expired():
        api_proxy.cut_watches()  # again, in case a watch was being re-opened at the first cut
        return any("/api/v1/pods" in p for p in api_proxy.expired)

    wait_for(pod_watch_expired, 10, interval=0.5, what="a pod watch to expire")
    core_v1.create_namespaced_pod(namespace, pod_manifest("during", schedulerName=name), _preload_content=False)
    time.sleep(0.5)
    api_proxy.expire_watches = False
    wait_for(lambda: node_of(core_v1, namespace, "during"), 20, what="'during' to be bound after the relist")
    log = sched.log()
    assert '"Watch expired, relisting" resource="pods"' in log
    assert sched.proc.poll() is None


def test_lost_api_server_connection_is_retried_with_backoff(run_kubesched, api_proxy, nodes, core_v1, namespace):
    nodes(2)
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    sched = run_kubesched(config_via(api_proxy, name))
    core_v1.create_namespaced_pod(namespace, pod_manifest("before", schedulerName=name), _preload_content=False)
    wait_for(lambda: node_of(core_v1, namespace, "before"), 15, what="'before' to be bound")
    api_proxy.pause(2.0)  # refuses connections for 2s: kubesched's watches fail and back off
    core_v1.create_namespaced_pod(namespace, pod_manifest("after", schedulerName=name), _preload_content=False)
    wait_for(lambda: node_of(core_v1, namespace, "after"), 30, what="'after' to be bound once the API is back")
    assert '"Watch failed, retrying" resource="pods"' in sched.log()
    assert sched.proc.poll() is None
