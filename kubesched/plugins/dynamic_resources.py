"""DynamicResources: kubesched's honest stand-in for DRA ResourceClaim allocation.

A pod without spec.resourceClaims skips the plugin, as upstream's PreFilter does.
kubesched does not allocate devices, so a pod with claims is rejected in PreFilter with a
reason saying so; kube-scheduler should place it.
"""

from __future__ import annotations

from typing import Any

from kubesched.config.types import parse_duration
from kubesched.framework.interface import ClusterEvent, Code, PluginArgsError, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.args import args_dict, check_known_fields
from kubesched.plugins.helper.volumes import UNSUPPORTED_CLAIMS_ADVICE


def _duration(args: dict, key: str, default: float) -> float:
    value = args.get(key)
    if value is None:
        return default
    try:
        return parse_duration(str(value))
    except ValueError as err:
        raise PluginArgsError(key, str(err)) from None


class DynamicResources:
    name = "DynamicResources"

    def __init__(self, args: dict | None = None, handle: Any = None):
        self.handle = handle
        args = args_dict(args, self.name)
        check_known_fields(args, ("filterTimeout", "bindingTimeout"))
        # Validated as 1.37 validates them (both gates on), though kubesched allocates nothing.
        self.filter_timeout = _duration(args, "filterTimeout", 10.0)
        if self.filter_timeout < 0:
            raise PluginArgsError("filterTimeout", f"Invalid value: {args['filterTimeout']!r}: must be zero or positive")
        self.binding_timeout = _duration(args, "bindingTimeout", 600.0)
        if self.binding_timeout < 1:
            raise PluginArgsError("bindingTimeout", f"Invalid value: {args['bindingTimeout']!r}: must be at least 1 second")

    def events_to_register(self) -> list[ClusterEvent]:
        # spec.resourceClaims is immutable: no cluster event makes a rejected pod schedulable.
        return []

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        claims = (pod.raw.get("spec") or {}).get("resourceClaims") or ()
        if not claims:
            return None, Status(Code.SKIP)
        names = ", ".join(c.get("name", "") for c in claims)
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                            f"kubesched does not allocate DRA ResourceClaims (pod claims: {names}); "
                            f"{UNSUPPORTED_CLAIMS_ADVICE}", plugin=self.name)

    def filter(self, state, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return None

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        return Status(Code.SKIP)

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        return 0
