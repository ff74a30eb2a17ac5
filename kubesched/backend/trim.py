"""What the informers keep of each object (client-go's informer transform).

Every pod and node the scheduler sees stays in memory for as long as it exists, so the
informers keep only the fields that the framework, the plugins, the queue's update
checks, the events and the status patches read. At 10,000 pods this is most of the
scheduler's resident memory: a benchmark pod as the API server returns it takes 11.3 KB
as Python objects with its PodInfo, 6.5 KB trimmed (docs/performance.md).

Dropped fields are either never read here or immutable on a live object, so an update
that changes only dropped fields could not change a scheduling decision: the queue's
"did the spec change" checks compare the trimmed objects and reach the same answer.
Nothing here is ever written back to the API server (bindings, events and status patches
are built from names and new values, never by sending a stored object).
"""

from __future__ import annotations

import sys
from typing import Callable, Union

# Container fields a plugin reads: requests (NodeResourcesFit, BalancedAllocation, preemption),
# ports (NodePorts), image (ImageLocality), restartPolicy (sidecar requests and ports),
# restartPolicyRules (NodeDeclaredFeatures), name (identity in events and messages).
# volumeMounts are read only for bindMountOptions (NodeDeclaredFeatures), so only mounts
# that set it are kept.
CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy", "restartPolicyRules")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

# Pod status: phase (terminal pods), conditions (PodScheduled patches, DisruptionTarget in
# preemption, PodResizePending), nominatedNodeName (nominator), startTime (preemption's victim
# order), resources and allocatedResources (in-place resize: what a running pod uses),
# resourceClaimStatuses (DynamicResources finds the claims made from templates).
POD_STATUS_FIELDS = ("phase", "conditions", "nominatedNodeName", "startTime", "resources", "allocatedResources",
                     "resourceClaimStatuses")
# Of each container status, what in-place resize reads.
CONTAINER_STATUS_FIELDS = ("name", "resources", "allocatedResources")
CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")

# Node status: allocatable/capacity (NodeResourcesFit), images (ImageLocality),
# declaredFeatures (NodeDeclaredFeatures), conditions (the NodeConditionChange event).
NODE_STATUS_FIELDS = ("allocatable", "capacity", "images", "declaredFeatures", "conditions")


def trim_metadata(obj: dict) -> dict:
    """Drop managedFields, the largest part of most objects and never read by a scheduler."""
    meta = obj.get("metadata")
    if meta and "managedFields" in meta:
        del meta["managedFields"]
    return obj


def _trim_container(container: dict) -> dict:
    kept = {key: container[key] for key in CONTAINER_FIELDS if key in container}
    mounts = [mount for mount in container.get("volumeMounts") or () if mount.get("bindMountOptions")]
    if mounts:
        kept["volumeMounts"] = mounts
    return kept


def _keep(section: dict | None, fields: tuple[str, ...]) -> dict:
    return {key: section[key] for key in fields if key in section} if section else {}


def trim_pod(pod: dict) -> dict:
    """The pod with only what scheduling reads; every top-level spec field is kept, since
    the mutable ones (activeDeadlineSeconds, tolerations, schedulingGates, ...) must still
    show as an update."""
    trim_metadata(pod)
    spec = pod.get("spec")
    if spec:
        for key in CONTAINER_LISTS:
            if key in spec:
                spec[key] = [_trim_container(container) for container in spec[key] or ()]
    if "status" in pod:
        status = pod["status"]
        kept = _keep(status, POD_STATUS_FIELDS)
        for key in CONTAINER_STATUS_LISTS:
            statuses = [_keep(cs, CONTAINER_STATUS_FIELDS) for cs in (status or {}).get(key) or ()
                        if "resources" in cs or "allocatedResources" in cs]
            if statuses:
                kept[key] = statuses
        pod["status"] = kept
    return pod


def resize_state(pod: dict) -> tuple:
    """What of a pod's status changes its resource usage (in-place resize): the container and
    pod status resources and the PodResizePending reason."""
    status = pod.get("status") or {}
    pending = next((c.get("reason") for c in status.get("conditions") or () if c.get("type") == "PodResizePending"),
                   None)
    return (status.get("containerStatuses"), status.get("initContainerStatuses"), status.get("resources"),
            status.get("allocatedResources"), pending)


def trim_node(node: dict) -> dict:
    """The node without managedFields and without the status the scheduler never reads
    (addresses, nodeInfo, daemonEndpoints, attached volumes, runtime handlers)."""
    trim_metadata(node)
    if "status" in node:
        node["status"] = _keep(node["status"], NODE_STATUS_FIELDS)
    return node


Transform = Callable[[dict], dict]


def sys_intern_frees_strings() -> bool:
    """Whether a string sys.intern returns is freed when its last user goes.

    It is, as documented, except on CPython 3.12.0 to 3.12.5, where every interned string
    was immortal (python/cpython#113993, fixed in 3.12.6; Ubuntu 24.04's 3.12.3 has it): a
    scheduler that interned each pod's name and UID kept them all for as long as it ran.
    An immortal object reports a reference count of 2**32 - 1, or 2**30 - 1 on a 32-bit
    build (PEP 683)."""
    probe = sys.intern("".join(("kubesched-intern-probe-", str(id(object())))))
    return sys.getrefcount(probe) < 1 << 28


SHARED_MAX = 1 << 16
SHARED_LONGEST = 128
_shared: dict[str, str] = {}


def share(value: str) -> str:
    """sys.intern's sharing from a table of at most SHARED_MAX strings, emptied when full,
    for interpreters whose interned strings are never freed: a string the table drops lives
    on only in the objects that hold it. Longer strings than SHARED_LONGEST (annotations) are
    left alone, so the table stays small whatever the objects carry."""
    if len(value) > SHARED_LONGEST:
        return value
    shared = _shared.setdefault(value, value)
    if len(_shared) > SHARED_MAX:
        _shared.clear()
    return shared


_intern = sys.intern if sys_intern_frees_strings() else share


def intern_strings(obj: Union[dict, list]) -> Union[dict, list]:
    """The object with its string values interned, in place (the informers' store calls it).

    Pods made from one template repeat most of their strings (namespace, image, quantities,
    toleration keys, the service account volume...), and a decoder makes a new string for
    each: interned, the pods share them, which is most of what a trimmed pod's strings
    weigh. Interned strings are freed when the last user goes, so unique ones (names,
    UIDs) cost nothing extra; where the interpreter would keep them forever, a bounded
    table shares them instead (``share``). Keys are left alone (the JSON decoder caches
    them already)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str):
                obj[key] = _intern(value)
            elif isinstance(value, (dict, list)):
                intern_strings(value)
    else:
        for index, value in enumerate(obj):
            if isinstance(value, str):
                obj[index] = _intern(value)
            elif isinstance(value, (dict, list)):
                intern_strings(value)
    return obj
