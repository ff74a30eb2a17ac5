"""VolumeBinding: kubesched's honest stand-in for upstream's PVC binding.

A pod without PersistentVolumeClaims (and without generic ephemeral volumes, which create
claims) needs nothing from this plugin and skips it, exactly as upstream's PreFilter does.
kubesched keeps no PersistentVolume or StorageClass caches, so a pod with claims is
rejected in PreFilter with a reason that says so; kube-scheduler should place it.
"""

from __future__ import annotations

from typing import Any

from kubesched.framework.interface import ClusterEvent, Code, PluginArgsError, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields, int_arg
from kubesched.plugins.helper.volumes import pod_volume_claims, unsupported_volume_claims_reason
from kubesched.plugins.resource_allocation import MAX_CUSTOM_PRIORITY_SCORE, validate_shape

DEFAULT_SHAPE = [(0, MAX_CUSTOM_PRIORITY_SCORE), (100, 0)]


class ClaimsUnsupported:
    """PreFilter that skips pods without claims and rejects pods with them, for volume plugins."""

    name = ""

    def __init__(self, args: dict | None = None, handle: Any = None):
        self.handle = handle

    def events_to_register(self) -> list[ClusterEvent]:
        # A pod's volumes are immutable: no cluster event makes a rejected pod schedulable
        # here, so it waits for the queue's periodic flush instead of retrying on every event.
        return []

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        claims = pod_volume_claims(pod)
        if not claims:
            return None, Status(Code.SKIP)
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, unsupported_volume_claims_reason(claims),
                            plugin=self.name)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        # Reached only if PreFilter passed, i.e. the pod uses no claims.
        return None


class VolumeBinding(ClaimsUnsupported):
    name = "VolumeBinding"

    def __init__(self, args: dict | None = None, handle: Any = None):
        super().__init__(args, handle)
        args = args_dict(args, self.name)
        check_known_fields(args, ("bindTimeoutSeconds", "shape"))
        self.bind_timeout_seconds = int_arg(args, "bindTimeoutSeconds", 600)
        if self.bind_timeout_seconds < 0:
            raise PluginArgsError("bindTimeoutSeconds", f"Invalid value: {self.bind_timeout_seconds}: "
                                  "invalid BindTimeoutSeconds, should not be a negative value")
        # StorageCapacityScoring is on by default in 1.37: shape defaults and is validated as
        # RequestedToCapacityRatio's (kubesched never scores volumes, see above).
        self.shape = validate_shape(args["shape"], "shape") if args.get("shape") is not None else DEFAULT_SHAPE
