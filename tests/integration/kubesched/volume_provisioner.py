"""A small dynamic provisioner for the lab (the lab has no storage driver).

It watches PersistentVolumeClaims of its StorageClass that carry the scheduler's
``volume.kubernetes.io/selected-node`` annotation and have no volume yet, and creates for
each a hostPath PersistentVolume of the requested size whose node affinity pins it to the
selected node and whose claimRef names the claim; kube-controller-manager's PV controller
then binds the two, which is what a scheduler's PreBind waits for.

    with LabProvisioner(core_v1, "kubesched.io/lab-provisioner", "lab-dynamic") as provisioner:
        ...  # claims of class lab-dynamic get volumes; provisioner.created lists them
"""

from __future__ import annotations

import json
import threading

SELECTED_NODE = "volume.kubernetes.io/selected-node"
POLL_SECONDS = 0.2


def provisioned_volume(claim: dict, provisioner: str, node: str) -> dict:
    meta, spec = claim["metadata"], claim["spec"]
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "storageClassName": spec.get("storageClassName"),
            "persistentVolumeReclaimPolicy": "Delete",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": f"/var/lib/lab-provisioner/{meta['uid']}", "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                         "name": meta["name"], "uid": meta["uid"]},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
        },
    }


class LabProvisioner:
    """Provision claims of storage_class on their selected node until stopped."""

    def __init__(self, core_v1, provisioner: str, storage_class: str):
        self.core_v1 = core_v1
        self.provisioner = provisioner
        self.storage_class = storage_class
        self.created: dict[str, str] = {}  # "namespace/claim" -> node
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-provisioner", daemon=True)

    def __enter__(self) -> "LabProvisioner":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from kubernetes.client.rest import ApiException

        while not self._stop.wait(POLL_SECONDS):
            try:
                claims = json.loads(self.core_v1.list_persistent_volume_claim_for_all_namespaces(
                    _preload_content=False).data)["items"]
            except (ApiException, OSError) as err:
                self.errors.append(f"listing claims: {err}")
                continue
            for claim in claims:
                meta, spec = claim["metadata"], claim["spec"]
                node = (meta.get("annotations") or {}).get(SELECTED_NODE)
                key = f"{meta['namespace']}/{meta['name']}"
                if (spec.get("storageClassName") != self.storage_class or not node or spec.get("volumeName")
                        or key in self.created):
                    continue
                try:
                    self.core_v1.create_persistent_volume(provisioned_volume(claim, self.provisioner, node),
                                                          _preload_content=False)
                except ApiException as err:
                    if err.status != 409:  # 409: created on an earlier pass
                        self.errors.append(f"creating the volume of {key}: {err.reason}")
                        continue
                self.created[key] = node
