"""PersistentVolumes, claims, StorageClasses and CSI objects for the volume plugin tests,
as upstream's volumebinding test helpers build them (plugin_builders.FakeHandle.add puts them
in the informers)."""

from __future__ import annotations

import itertools
from typing import Any

_rv = itertools.count(100)
WFFC = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"


def node_affinity(key: str, *values: str) -> dict:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": list(values)}]}]}}


def make_pv(name: str, *, size: str = "1Gi", storage_class: str = "wait", node: str | None = None,
            claim: dict | None = None, phase: str = "Available", labels: dict | None = None,
            affinity: dict | None = None, access_modes: tuple = ("ReadWriteOnce",), csi: dict | None = None,
            volume_mode: str | None = None) -> dict:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "storageClassName": storage_class,
                            "accessModes": list(access_modes)}
    if node is not None:
        spec["nodeAffinity"] = node_affinity("kubernetes.io/hostname", node)
    if affinity is not None:
        spec["nodeAffinity"] = affinity
    if claim is not None:
        meta = claim["metadata"]
        spec["claimRef"] = {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]}
    if csi is not None:
        spec["csi"] = csi
    if volume_mode:
        spec["volumeMode"] = volume_mode
    return {"metadata": {"name": name, "uid": f"pv-{name}", "resourceVersion": str(next(_rv)),
                         "labels": dict(labels or {})},
            "spec": spec, "status": {"phase": phase}}


def make_pvc(name: str, *, namespace: str = "default", size: str | None = "1Gi", storage_class: str | None = "wait",
             volume_name: str = "", bound: bool = False, selected_node: str | None = None,
             access_modes: tuple = ("ReadWriteOnce",), owner_uid: str | None = None, phase: str = "Pending",
             deleting: bool = False, selector: dict | None = None) -> dict:
    annotations: dict[str, str] = {}
    if bound:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    if selected_node is not None:
        annotations["volume.kubernetes.io/selected-node"] = selected_node
    spec: dict[str, Any] = {"accessModes": list(access_modes)}
    if size is not None:
        spec["resources"] = {"requests": {"storage": size}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    if selector is not None:
        spec["selector"] = selector
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"pvc-{namespace}-{name}",
                            "resourceVersion": str(next(_rv)), "annotations": annotations}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if bound else phase}}


def make_class(name: str, mode: str | None = WFFC, provisioner: str = "kubernetes.io/no-provisioner",
               allowed_topologies: list | None = None) -> dict:
    sc: dict[str, Any] = {"metadata": {"name": name, "resourceVersion": str(next(_rv))}, "provisioner": provisioner}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    if allowed_topologies is not None:
        sc["allowedTopologies"] = allowed_topologies
    return sc


def claim_volume(claim: str, name: str = "data") -> dict:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}
