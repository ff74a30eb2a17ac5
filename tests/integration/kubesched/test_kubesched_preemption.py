"""Preemption through kubesched: a high-priority pod preempts only as many low-priority pods as needed."""

import json
import uuid

from kubernetes import client
from kubesched_lab import node_of, pod_manifest, wait_for


def test_high_priority_pod_preempts_the_lowest_priority_victim(run_kubesched, nodes, core_v1, api_client,
                                                               namespace):
    [node] = nodes(1, cpu="2")
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    scheduling = client.SchedulingV1Api(api_client)
    classes = {f"{name}-{level}": value for level, value in (("low", 10), ("mid", 100), ("high", 1000000))}
    for class_name, value in classes.items():
        scheduling.create_priority_class({"metadata": {"name": class_name}, "value": value}, _preload_content=False)
    try:
        sched = run_kubesched({"profiles": [{"schedulerName": name}]})

        # Victims go at once: this test is about which pod is chosen; victims that take their
        # grace period are test_kubesched_controllers' subject.
        def create(pod_name, level):
            core_v1.create_namespaced_pod(namespace, pod_manifest(
                pod_name, schedulerName=name, priorityClassName=f"{name}-{level}", terminationGracePeriodSeconds=0,
                containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10",
                             "resources": {"requests": {"cpu": "900m"}}}]), _preload_content=False)

        create("low", "low")
        create("mid", "mid")
        for pod_name in ("low", "mid"):
            wait_for(lambda n=pod_name: node_of(core_v1, namespace, n), 15, what=f"{pod_name} bound")
        create("high", "high")
        assert wait_for(lambda: node_of(core_v1, namespace, "high"), 30, what="high bound after preemption") == node
        names = {p["metadata"]["name"] for p in
                 json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]}
        assert names == {"mid", "high"}  # one victim, the lowest priority
        assert sched.metric("scheduler_preemption_attempts_total") >= 1
    finally:
        for class_name in classes:
            scheduling.delete_priority_class(class_name, _preload_content=False)
