"""The demo's stateful workload (S10): a StatefulSet of 3 replicas whose volumeClaimTemplate asks
a WaitForFirstConsumer StorageClass, with one local PersistentVolume on each of demo-node-0..2
and none on demo-node-notready-0. Each replica must land on a node that holds a PV, and its
claim must end Bound to that very PV (the PV controller in kube-controller-manager binds it
once the scheduler has chosen the node).

lab/demo.py calls these through its `stateful`, `stateful-table` and `delete-stateful` commands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

NAMESPACE = "demo-s10"
TITLE = "S10 stateful workloads"
STORAGE_CLASS = "demo-local"
STATEFULSET = "db"
CLAIM_TEMPLATE = "data"
REPLICAS = 3
PV_NODES = ("demo-node-0", "demo-node-1", "demo-node-2")
HOSTNAME = "kubernetes.io/hostname"
PAUSE = "registry.k8s.io/pause:3.10"
PENDING = "(Pending)"
NONE = "-"


def pv_name(node: str) -> str:
    return f"demo-local-{node}"


def storage_class() -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}


def local_volume(node: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name(node)}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
        "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{pv_name(node)}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}}


def statefulset() -> dict:
    labels = {"app": STATEFULSET}
    # demo-node-0 is tainted app=blue (S3): tolerated, so all three PV nodes are usable.
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STATEFULSET},
            "spec": {"replicas": REPLICAS, "serviceName": STATEFULSET, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "tolerations": [{"key": "app", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}],
                         "containers": [{"name": "db", "image": PAUSE,
                                         "volumeMounts": [{"name": CLAIM_TEMPLATE, "mountPath": "/data"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": CLAIM_TEMPLATE}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


@dataclass(frozen=True)
class Replica:
    """One replica as the API tells it: its node, its claim's phase and PV, and the PV's node."""

    pod: str
    node: str
    phase: str
    claim: str
    claim_phase: str
    pv: str
    pv_node: str

    @property
    def as_expected(self) -> bool:
        return (self.phase == "Running" and self.claim_phase == "Bound" and self.node in PV_NODES
                and self.node == self.pv_node)


def _apis(core_v1):
    from kubernetes import client

    return client.AppsV1Api(core_v1.api_client), client.StorageV1Api(core_v1.api_client)


def create(core_v1) -> None:
    """The StorageClass, fresh PVs (an earlier run's are Released to claims now gone and would
    bind nothing), then the StatefulSet in its namespace, which the caller has made afresh."""
    apps_v1, storage_v1 = _apis(core_v1)
    delete_cluster_objects(core_v1, wait_seconds=60)
    storage_v1.create_storage_class(storage_class())
    for node in PV_NODES:
        core_v1.create_persistent_volume(local_volume(node))
    apps_v1.create_namespaced_stateful_set(NAMESPACE, statefulset())


def pv_node_of(pv: dict | None) -> str:
    if not pv:
        return NONE
    for term in ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required", {}).get("nodeSelectorTerms") or ():
        for expr in term.get("matchExpressions") or ():
            if expr.get("key") == HOSTNAME and expr.get("values"):
                return expr["values"][0]
    return NONE


def replicas(core_v1) -> list[Replica]:
    """One row per replica db-0..db-2, in order, whether or not its pod exists yet."""
    pods = {p.metadata.name: p for p in core_v1.list_namespaced_pod(NAMESPACE).items}
    claims = {c.metadata.name: c for c in core_v1.list_namespaced_persistent_volume_claim(NAMESPACE).items}
    volumes = {v.metadata.name: v for v in core_v1.list_persistent_volume().items
               if v.spec.storage_class_name == STORAGE_CLASS}
    found = []
    for i in range(REPLICAS):
        name, claim_name = f"{STATEFULSET}-{i}", f"{CLAIM_TEMPLATE}-{STATEFULSET}-{i}"
        pod, claim = pods.get(name), claims.get(claim_name)
        pv_name_bound = (claim.spec.volume_name if claim else "") or ""
        volume = volumes.get(pv_name_bound)
        pv_node = pv_node_of(core_v1.api_client.sanitize_for_serialization(volume)) if volume else NONE
        found.append(Replica(
            pod=name, node=(pod.spec.node_name if pod else "") or PENDING,
            phase=((pod.status.phase if pod and pod.status else "") or NONE),
            claim=claim_name if claim else NONE, claim_phase=((claim.status.phase if claim and claim.status else "")
                                                              or NONE),
            pv=pv_name_bound or NONE, pv_node=pv_node))
    return found


def problems(found: list[Replica]) -> list[str]:
    out = [f"{NAMESPACE}/{r.pod} is on {r.node} ({r.phase}), claim {r.claim} {r.claim_phase} to {r.pv} on "
           f"{r.pv_node}; expected Running on the node of its Bound PV, one of {', '.join(PV_NODES)}"
           for r in found if not r.as_expected]
    nodes = [r.node for r in found if r.as_expected]
    if len(set(nodes)) != len(nodes):
        out.append(f"StatefulSet {NAMESPACE}/{STATEFULSET} has two replicas on one node: {', '.join(nodes)}")
    return out


def wait(core_v1, timeout: float) -> list[Replica]:
    """Until every replica runs beside its Bound PV, or the timeout passes (the table then tells)."""
    deadline = time.monotonic() + timeout
    while True:
        found = replicas(core_v1)
        if not problems(found) or time.monotonic() >= deadline:
            return found
        time.sleep(1)


def render(found: list[Replica]) -> str:
    header = ("REPLICA", "NODE", "PHASE", "CLAIM", "CLAIM PHASE", "PV", "PV NODE")
    rows = [(r.pod, r.node, r.phase, r.claim, r.claim_phase, r.pv, r.pv_node) for r in found]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"{TITLE} (namespace {NAMESPACE}): StatefulSet {STATEFULSET}, a local PV on each of "
             f"{', '.join(PV_NODES)}, WaitForFirstConsumer",
             "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(header)).rstrip()]
    for replica, row in zip(found, rows):
        mark = " " if replica.as_expected else "!"
        lines.append(f"{mark} " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)


def delete_cluster_objects(core_v1, wait_seconds: float = 0) -> None:
    """The PVs and the StorageClass; with wait_seconds, until they are gone (a PV keeps its
    protection finalizer while a claim in use is bound to it)."""
    from kubernetes.client.rest import ApiException

    _apps_v1, storage_v1 = _apis(core_v1)
    for call, name in [*((core_v1.delete_persistent_volume, pv_name(n)) for n in PV_NODES),
                       (storage_v1.delete_storage_class, STORAGE_CLASS)]:
        try:
            call(name)
        except ApiException as err:
            if err.status != 404:
                raise
    deadline = time.monotonic() + wait_seconds
    while wait_seconds:
        left = {v.metadata.name for v in core_v1.list_persistent_volume().items} & {pv_name(n) for n in PV_NODES}
        if not left:
            return
        if time.monotonic() >= deadline:
            raise SystemExit(f"demo: PersistentVolumes {', '.join(sorted(left))} still exist after {wait_seconds:.0f} s; "
                             f"a pod still uses their claims? Delete namespace {NAMESPACE} and retry")
        time.sleep(0.5)
