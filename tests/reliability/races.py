"""Suite 3: a pod is deleted, or bound by someone else, between the decision and the bind.

The window is made wide on purpose: kubesched's client is throttled (clientConnection.qps),
so every decision is taken at once (the pod is assumed in the cache) while the binds
trickle out a few per second. While they wait, this suite deletes some of the pending
pods and binds others itself, to a tainted node that kubesched would never choose and
whose pod capacity the foreign binds fill exactly. Then:

- kubesched is still running and no pod is left Pending;
- its cache holds no assumed pod and as many pods as the cluster has bound;
- the cache counted the foreign binds on their real node: a probe pod that may only go
  there is rejected as "Too many pods", and is scheduled once one of them is deleted.
"""

from __future__ import annotations

import json
import uuid

from lab.cluster import Cluster
from lab.pod_watch import node_of
from tests.reliability.instances import scheduler_config, start_instance, wait_until
from tests.reliability.pods import RELIABILITY_LABELS, create_pods
from tests.reliability.result import SuiteResult

RACE_TAINT = {"key": "kubesched.io/reliability-race", "value": "foreign", "effect": "NoSchedule"}


def _bound_pods_in_cluster(cluster: Cluster) -> int:
    items = json.loads(cluster.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
    return sum(1 for p in items if node_of(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _ensure_full_node(cluster: Cluster, name: str, capacity: int) -> None:
    from kubernetes.client.rest import ApiException

    from lab.fake_nodes import create_nodes

    try:
        cluster.core.delete_node(name, _preload_content=False)
    except ApiException as err:
        if err.status != 404:
            raise
    create_nodes(cluster.core, 1, prefix=name, pods=capacity, zones=0)
    cluster.core.patch_node(name + "0", {"spec": {"taints": [RACE_TAINT]}}, _preload_content=False)


def run(cluster: Cluster, workdir: str, *, pods: int = 40, each: int = 10) -> SuiteResult:
    result = SuiteResult("races", "Races between decision and bind")
    scheduler_name = f"rel-races-{uuid.uuid4().hex[:6]}"
    namespace = cluster.create_namespace("races", RELIABILITY_LABELS)
    full_prefix = f"rel-race-full-{uuid.uuid4().hex[:4]}-"
    full_node = full_prefix + "0"
    _ensure_full_node(cluster, full_prefix, each)
    instance = start_instance(scheduler_config(cluster.kubeconfig, scheduler_name, qps=3, burst=1),
                              workdir, "races")
    try:
        instance.wait_ready()
        names = create_pods(cluster, namespace, pods, scheduler_name)
        decided = wait_until(lambda: (instance.metric("scheduler_cache_size",
                                                      {"type": "assumed_pods"}) or 0) >= 2 * each + 5, 30)
        result.check("decisions were taken while binds waited", bool(decided),
                     f"assumed pods seen: {instance.metric('scheduler_cache_size', {'type': 'assumed_pods'})}")
        pending = [n for n in reversed(names) if not node_of(cluster.pod(namespace, n))]
        deleted, foreign = pending[:each], pending[each:2 * each]
        for name in deleted:
            cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False)
        foreign_status = [cluster.bind(namespace, name, full_node) for name in foreign]
        result.check("the foreign binds were accepted (kubesched had not bound those pods yet)",
                     all(code == 201 for code in foreign_status), f"HTTP status of each foreign bind: {foreign_status}")
        survivors = [n for n in names if n not in deleted]
        all_bound = wait_until(lambda: all(node_of(cluster.pod(namespace, n)) for n in survivors), 120, 0.5)
        result.check("no pod left Pending", bool(all_bound),
                     f"unbound: {[n for n in survivors if not node_of(cluster.pod(namespace, n))][:10]}")
        result.check("the foreign binds stood", all(node_of(cluster.pod(namespace, n)) == full_node for n in foreign))
        settled = wait_until(lambda: instance.metric("scheduler_cache_size", {"type": "assumed_pods"}) == 0,
                             30, 0.2)
        result.check("no assumed pod left in the cache", settled is not None)
        # The watch clears a raced pod from the assumed ones (deleted, or bound elsewhere) while
        # kubesched's own bind for it may still wait on the throttled client: count the refusals
        # once every bind it started has ended, and its log has the last of them.
        drained = wait_until(lambda: instance.metric("scheduler_goroutines", {"operation": "binding"}) == 0,
                             60, 0.2)
        result.check("every bind kubesched started has ended", drained is not None,
                     f"binds in flight: {instance.metric('scheduler_goroutines', {'operation': 'binding'})}")
        wait_until(lambda: len(instance.bind_failures()) >= 2 * each, 5, 0.2)
        failures = instance.bind_failures()
        lost_races = sorted(set(failures) & {f"{namespace}/{n}" for n in deleted + foreign})
        result.figures["races_lost_by_kubesched"] = len(lost_races)
        result.check("kubesched met the races (its binds for those pods were refused)", len(lost_races) > 0,
                     f"{len(lost_races)} of {2 * each} raced pods had a refused bind in kubesched's log")
        cached = wait_until(lambda: instance.metric("scheduler_cache_size", {"type": "pods"}) ==
                            _bound_pods_in_cluster(cluster), 30, 0.5)
        result.check("the cache holds as many pods as the cluster has bound", cached is not None,
                     f"cache {instance.metric('scheduler_cache_size', {'type': 'pods'})}, "
                     f"cluster {_bound_pods_in_cluster(cluster)}")
        probe = "probe-full"
        cluster.core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": probe},
            "spec": {"schedulerName": scheduler_name, "nodeSelector": {"kubernetes.io/hostname": full_node},
                     "tolerations": [{"key": RACE_TAINT["key"], "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}},
            _preload_content=False)
        too_many = wait_until(lambda: "Too many pods" in _condition_message(cluster, namespace, probe), 30, 0.3)
        result.check("the cache counted the foreign binds on their node (probe: Too many pods)", bool(too_many),
                     _condition_message(cluster, namespace, probe))
        cluster.core.delete_namespaced_pod(foreign[0], namespace, grace_period_seconds=0, _preload_content=False)
        placed = wait_until(lambda: node_of(cluster.pod(namespace, probe)) == full_node, 60, 0.3)
        result.check("a deleted pod frees its place (the probe is scheduled there)", bool(placed))
        result.check("kubesched is still running", instance.alive(), f"exit code {instance.proc.returncode}")
        result.cases.append({"pods": pods, "deleted": len(deleted), "bound_by_someone_else": len(foreign),
                             "refused_binds": len(failures), "races_lost_by_kubesched": len(lost_races)})
    except Exception as err:  # noqa: BLE001
        result.check("run completes", False, str(err)[:1000])
    finally:
        instance.stop()
        cluster.delete_namespace(namespace)
        try:
            cluster.core.delete_node(full_node, _preload_content=False)
        except Exception:  # noqa: BLE001 - best effort clean-up
            pass
    return result.finish()


def _condition_message(cluster: Cluster, namespace: str, name: str) -> str:
    pod = cluster.pod(namespace, name) or {}
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return cond.get("message") or ""
    return ""
