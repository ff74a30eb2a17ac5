"""What arrives in a soak run: the objects set up before the schedulers start, and the driver
that carries out the plan's arrivals and departures on time.

Setup (``Workload.setup``): the nodes of every pool (lab/fake_nodes.py kwok nodes), the
PriorityClasses, the local StorageClass and its PersistentVolumes on the storage nodes, the
fake DRA driver's GPUs on the GPU nodes (lab/fake_dra_driver.py) with a ResourceClaimTemplate,
the Deployments and StatefulSets the plan scales, and the low-priority fillers that keep the
batch pool full. Pods, Jobs and scalings then come from ``Plan.actions``.

Every pod carries the label soak.kubesched.io/class, so the checks know what each one is.
Released local volumes are made Available again by clearing their claim, as a local static
provisioner does once it has cleaned the disk.
"""

from __future__ import annotations

import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from lab.cluster import ApiError, Cluster
from lab.fake_dra_driver import DRIVER, custom_objects_from_kubeconfig, device_class, publish
from lab.fake_dra_driver import apply as apply_dra_object
from lab.fake_nodes import create_nodes
from tests.reliability.pods import PAUSE_IMAGE
from tests.reliability.soak.ledger import CLASS_LABEL
from tests.reliability.soak.plan import DEPLOYMENTS, STATEFULSETS, Action, Plan

NAMESPACE = "soak"
POOL_LABEL = "soak.kubesched.io/pool"
NEVER_LABEL = "soak.kubesched.io/never"
EXTENDER_RESOURCE = "example.com/soak-ext"
STORAGE_CLASS = "soak-local"
VOLUMES_PER_NODE = 3
HIGH, LOW = "soak-high", "soak-low"
JOB_TTL_S = 15
HOLD_ABOVE, RESUME_BELOW = 1000, 250  # kwok's backlog (pods) that pauses the plan, and resumes it
HOLD_POLL_S = 1.0
GRACE_S = 1
# General nodes: room to spare when kwok, starved on a busy machine, is slow to finish Job pods
# and to remove deleted ones (their room stays taken until it does).
NODE_CPU, NODE_MEMORY = "8", "32Gi"
BATCH_TAINT = {"key": POOL_LABEL, "value": "batch", "effect": "NoSchedule"}
BATCH_TOLERATION = {"key": POOL_LABEL, "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
APPS = "/apis/apps/v1/namespaces/" + NAMESPACE
BATCH = "/apis/batch/v1/namespaces/" + NAMESPACE
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


def _size(name: str) -> tuple[str, str]:
    """A pod's CPU and memory request, from its name: 50-200m and 64-256Mi, the same in every run."""
    h = zlib.crc32(name.encode())
    return f"{50 + h % 4 * 50}m", f"{64 * (1 + h // 4 % 4)}Mi"


def pod_spec(cls: str, scheduler_name: str, name: str = "", cpu: str = "", memory: str = "") -> dict:
    """The pod template of a class; name picks the size of a bare pod."""
    if not cpu:
        cpu, memory = _size(name or cls)
    container = {"name": "c", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    spec: dict = {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": GRACE_S, "containers": [container]}
    if cls == "extender":
        container["resources"]["requests"][EXTENDER_RESOURCE] = "1"
        container["resources"]["limits"] = {EXTENDER_RESOURCE: "1"}
    elif cls == "never":
        spec["nodeSelector"] = {NEVER_LABEL: "true"}
    elif cls == "dra":
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    elif cls == "spread":
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]
    elif cls == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "anti"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    elif cls in ("preemptor", "filler"):
        spec["priorityClassName"] = HIGH if cls == "preemptor" else LOW
        spec["nodeSelector"] = {POOL_LABEL: "batch"}
        spec["tolerations"] = [BATCH_TOLERATION]
    if cls in ("job", "preemptor"):
        spec["restartPolicy"] = "Never"
    return spec


def template(cls: str, scheduler_name: str, app: str, **size) -> dict:
    return {"metadata": {"labels": {CLASS_LABEL: cls, "app": app}},
            "spec": pod_spec(cls, scheduler_name, app, **size)}


def deployment(name: str, cls: str, replicas: int, scheduler_name: str, **size) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     # Scale-downs and replacements at once: no surge, nothing held back.
                     "strategy": {"type": "Recreate"}, "template": template(cls, scheduler_name, name, **size)}}


def statefulset(name: str, replicas: int, scheduler_name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": name}},
                     "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Delete"},
                     "template": template("stateful", scheduler_name, name),
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


def job(name: str, cls: str, pods: int, scheduler_name: str) -> dict:
    # A Job pod lives as long as kwok takes to finish it: small, so a slow kwok fills no node.
    size = {"cpu": "1", "memory": "256Mi"} if cls == "preemptor" else {"cpu": "20m", "memory": "32Mi"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE,
                                                                  "labels": {CLASS_LABEL: cls}},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "ttlSecondsAfterFinished": JOB_TTL_S, "template": template(cls, scheduler_name, name, **size)}}


def local_volume(node: str, index: int) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{node}-{index}"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                     "local": {"path": f"/mnt/disk{index}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}


class Workload:
    def __init__(self, cluster: Cluster, plan: Plan, scheduler_name: str, kubeconfig: str):
        self.cluster = cluster
        self.plan = plan
        self.scheduler_name = scheduler_name
        self.kubeconfig = kubeconfig
        self.created: dict[str, int] = {}
        self.failed: list[dict] = []
        self.lag_s = 0.0
        self.held_s = 0.0                # the plan paused while kwok was behind (hold)
        self.holds: list[dict] = []
        self._origin = 0.0
        self.recycled_volumes = 0
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=24, thread_name_prefix="arrivals")
        self._thread: threading.Thread | None = None

    # -- setup ----------------------------------------------------------------------------

    def setup(self, progress=print) -> None:
        pools, cluster = self.plan.pools, self.cluster
        began = time.monotonic()
        create_nodes(cluster.core, len(pools.general), prefix="soak-node-", cpu=NODE_CPU, memory=NODE_MEMORY,
                     workers=24, ready_timeout=180)
        create_nodes(cluster.core, len(pools.batch), prefix="soak-batch-", cpu="4", memory="16Gi",
                     labels={POOL_LABEL: "batch"}, taints=[BATCH_TAINT], workers=8, ready_timeout=120)
        progress(f"{len(pools.general) + len(pools.batch)} kwok nodes Ready in {time.monotonic() - began:.0f} s")
        cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, ok=(201, 409))
        from lab.namespaces import wait_for_default_service_account
        wait_for_default_service_account(cluster.core, NAMESPACE)
        for name, value in ((HIGH, 1000), (LOW, 10)):
            cluster.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                            {"metadata": {"name": name}, "value": value, "description": "kubesched soak"},
                            ok=(201, 409))
        cluster.request("POST", "/apis/storage.k8s.io/v1/storageclasses",
                        {"metadata": {"name": STORAGE_CLASS}, "provisioner": "kubernetes.io/no-provisioner",
                         "volumeBindingMode": "WaitForFirstConsumer"}, ok=(201, 409))
        cluster.create_all("/api/v1/persistentvolumes",
                           [local_volume(node, i) for node in pools.storage for i in range(VOLUMES_PER_NODE)])
        custom = custom_objects_from_kubeconfig(self.kubeconfig)
        apply_dra_object(custom, device_class())
        publish(custom, list(pools.gpu), gpus=8)
        cluster.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates", {
            "metadata": {"name": "gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}},
            ok=(201, 409))
        initial = self.plan.initial
        bodies = [deployment(f"web-{i}", "deployment", initial[f"web-{i}"], self.scheduler_name)
                  for i in range(DEPLOYMENTS)]
        bodies += [deployment(name, name, initial[name], self.scheduler_name) for name in ("spread", "anti")]
        bodies.append(deployment("filler", "filler", 4 * len(pools.batch), self.scheduler_name, cpu="1",
                                 memory="256Mi"))
        cluster.create_all(f"{APPS}/deployments", bodies)
        cluster.create_all(f"{APPS}/statefulsets", [statefulset(f"db-{i}", initial[f"db-{i}"], self.scheduler_name)
                                                    for i in range(STATEFULSETS)])
        progress(f"workload objects created in {time.monotonic() - began:.0f} s")

    # -- the plan's actions ---------------------------------------------------------------

    def _call(self, action: Action, request) -> None:
        """One API call of an action, retried while the API server is away (a fault, not the
        scheduler's doing); given up after a minute and recorded."""
        deadline = time.monotonic() + 60
        while True:
            try:
                request()
                return
            except Exception as err:  # noqa: BLE001 - every failure is retried or recorded
                status = getattr(err, "status", None)
                if status in (400, 403, 422) or time.monotonic() > deadline or self._stop.is_set():
                    self.failed.append({"at": action.at, "kind": action.kind, "cls": action.args.get("cls"),
                                        "error": str(err)[:200]})
                    return
                time.sleep(1.0)

    def apply(self, action: Action) -> None:
        args, cluster = action.args, self.cluster
        cls = args.get("cls", "")
        if action.kind == "pods":
            for name in args["names"]:
                body = {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "labels": {CLASS_LABEL: cls, "app": cls}},
                        "spec": pod_spec(cls, self.scheduler_name, name)}
                self._call(action, lambda body=body: cluster.request("POST", PODS, body, ok=(201, 409)))
        elif action.kind == "delete":
            self._call(action, lambda: cluster.request("DELETE", f"{PODS}/{args['name']}", ok=(200, 202, 404)))
        elif action.kind == "job":
            body = job(args["name"], cls, args["pods"], self.scheduler_name)
            self._call(action, lambda: cluster.request("POST", f"{BATCH}/jobs", body, ok=(201, 409)))
        elif action.kind == "scale":
            kind = "statefulsets" if cls == "stateful" else "deployments"
            self._call(action, lambda: cluster.request("PATCH", f"{APPS}/{kind}/{args['name']}/scale",
                                                       {"spec": {"replicas": args["replicas"]}}))
        if args.get("arrivals"):
            self.created[cls] = self.created.get(cls, 0) + args["arrivals"]

    def start(self, origin: float, kwok_backlog: Callable[[], int] | None = None) -> None:
        """Carry out the plan from origin on; with kwok_backlog (the pods kwok has yet to play),
        pause it while kwok is behind (hold)."""
        self._origin = origin
        self._thread = threading.Thread(target=self._run, args=(origin, kwok_backlog), name="arrivals", daemon=True)
        self._thread.start()

    def _run(self, origin: float, kwok_backlog: Callable[[], int] | None) -> None:
        last_recycle = last_look = 0.0
        for action in self.plan.actions:
            wait = origin + self.held_s + action.at - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                break
            if self._stop.is_set():
                break
            if kwok_backlog is not None and time.monotonic() - last_look >= 1.0:
                last_look = time.monotonic()
                self.hold(kwok_backlog)
            self.lag_s = max(self.lag_s, -wait)
            self._pool.submit(self.apply, action)
            if time.monotonic() - last_recycle > 5.0:
                last_recycle = time.monotonic()
                self._pool.submit(self.recycle_volumes)

    def hold(self, kwok_backlog: Callable[[], int]) -> None:
        """kwok plays every node's kubelet in one process. When it is HOLD_ABOVE pods behind (a
        starved machine), the plan pauses, deletions too, until kwok is down to RESUME_BELOW:
        a cluster whose kubelets fall behind grows without end (deleted pods never removed),
        and no scheduler's memory can be judged on it. The pause moves the rest of the plan
        later; what the run's end cuts off is not made (arrivals_made against planned)."""
        backlog = kwok_backlog()
        if backlog <= HOLD_ABOVE:
            return
        began = time.monotonic()
        while backlog > RESUME_BELOW and not self._stop.wait(HOLD_POLL_S):
            backlog = kwok_backlog()
        self.holds.append({"at": round(began - self._origin, 1), "s": round(time.monotonic() - began, 1)})
        self.held_s += time.monotonic() - began

    def recycle_volumes(self) -> None:
        """Released local volumes back to Available, as a local static provisioner would."""
        try:
            volumes, _rv = self.cluster.list_all("/api/v1/persistentvolumes")
            for pv in volumes:
                if (pv.get("status") or {}).get("phase") == "Released":
                    self.cluster.request("PATCH", f"/api/v1/persistentvolumes/{pv['metadata']['name']}",
                                         {"spec": {"claimRef": None}})
                    self.recycled_volumes += 1
        except (ApiError, OSError, Exception):  # noqa: BLE001 - the API server may be away; next time
            pass

    def wait_done(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)
