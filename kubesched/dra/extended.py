"""Extended resources backed by DRA (DRAExtendedResource, GA in v1.37).

A pod that asks for ``example.com/gpu: 1`` in its container resources, on a node that does
not advertise example.com/gpu in its allocatable, gets a device of the DeviceClass whose
spec.extendedResourceName is example.com/gpu (or of class X for
``deviceclass.resource.kubernetes.io/X``). The scheduler makes the claim: one request per
container and resource, named ``container-<i>-request-<j>`` as upstream names them, created in
PreBind with the pod as its owner, and the pod's status.extendedResourceClaimStatus maps
each container's resource to its request.
"""

from __future__ import annotations

import uuid
from typing import Any

from kubesched.api.names import is_extended_resource_name
from kubesched.dra.manager import DEVICE_CLASS_PREFIX, DRAManager
from kubesched.framework.quantity import QuantityError, parse_quantity

SPECIAL_CLAIM_NAME = "<extended-resources>"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def is_dra_extended_resource_name(name: str) -> bool:
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


def dra_backed_requests(scalar: dict[str, int], manager: DRAManager) -> dict[str, int]:
    """The pod's requested resources that a DeviceClass backs (upstream's
    hasDeviceClassMappedExtendedResource), name -> quantity."""
    return {name: quantity for name, quantity in scalar.items()
            if quantity and is_dra_extended_resource_name(name) and manager.class_for_extended_resource(name)}


def find_extended_claim(pod: dict, claims: list[dict]) -> dict | None:
    meta = pod.get("metadata") or {}
    for claim in claims:
        cmeta = claim.get("metadata") or {}
        if (cmeta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
            continue
        for owner in cmeta.get("ownerReferences") or ():
            if owner.get("name") == meta.get("name") and owner.get("uid") == meta.get("uid") and owner.get("controller"):
                return claim
    return None


def special_claim(pod: dict) -> dict:
    """The claim that does not exist yet: created in PreBind once a node is chosen."""
    meta = pod.get("metadata") or {}
    return {"metadata": {"namespace": meta.get("namespace", "default"), "name": SPECIAL_CLAIM_NAME,
                         "uid": str(uuid.uuid4()), "generateName": f"{meta.get('name')}-extended-resources-",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                                              "uid": meta.get("uid"), "controller": True}],
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}},
            "spec": {}}


def _count(value: Any) -> int | None:
    try:
        q = parse_quantity(str(value))
    except QuantityError:
        return None
    return int(q) if q.denominator == 1 else None


def _container_request(index: int, container: dict, resource: str, class_name: str,
                       reusable: list[dict | None]) -> tuple[dict | None, list[dict]]:
    requests = (container.get("resources") or {}).get("requests") or {}
    if resource not in requests:
        return None, []
    wanted = _count(requests[resource])
    if not wanted:
        return None, []
    mappings: list[dict] = []
    covered = 0
    for r in reusable:
        if r is not None:
            covered += r["exactly"]["count"]
            mappings.append({"containerName": container.get("name"), "resourceName": resource,
                             "requestName": r["name"]})
            if covered >= wanted:
                return None, mappings
    position = sorted(requests).index(resource)
    name = f"container-{index}-request-{position}"
    mappings.append({"containerName": container.get("name"), "resourceName": resource, "requestName": name})
    return {"name": name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                      "count": wanted - covered}}, mappings


def requests_and_mappings(pod: dict, resources: list[str], manager: DRAManager) -> tuple[list[dict], list[dict]]:
    """createRequestsAndMappings: the claim's requests and the pod's request mappings."""
    spec = pod.get("spec") or {}
    init = list(spec.get("initContainers") or ())
    containers = init + list(spec.get("containers") or ())
    long_lived = [i for i, c in enumerate(containers) if i >= len(init) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(init)) if i not in long_lived]
    requests: list[dict] = []
    mappings: list[dict] = []
    for resource in sorted(resources):
        cls = manager.class_for_extended_resource(resource)
        if cls is None:
            continue
        class_name = (cls.get("metadata") or {}).get("name", "")
        long_requests: list[dict | None] = [None] * len(containers)
        long_mappings: list[dict] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, class_name, [])
            long_requests[i] = request
            long_mappings.extend(found)
        biggest: dict | None = None
        short_names: set[str] = set()
        short_mappings: list[dict] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, class_name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if biggest is None or biggest["exactly"]["count"] < request["exactly"]["count"]:
                    biggest = request
            short_mappings.extend(found)
        if biggest is not None and len(short_names) > 1:
            # Init containers run one after another: they all share the biggest request.
            short_names.discard(biggest["name"])
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = biggest["name"]
        if biggest is not None:
            requests.append(biggest)
        requests.extend(r for r in long_requests if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: r["name"])
    return requests, mappings
