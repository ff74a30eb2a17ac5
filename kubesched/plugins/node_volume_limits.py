"""NodeVolumeLimits: CSI volumes must not exceed the node's attach limit (CSINode).

Upstream counts claim-backed CSI volumes and inline CSI volumes against CSINode limits; a
pod with neither skips the plugin. kubesched keeps no CSINode, CSIDriver or
PersistentVolume caches, so a pod with either is rejected with a reason saying so.
"""

from __future__ import annotations

from kubesched.framework.interface import Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.volumes import (
    UNSUPPORTED_CLAIMS_ADVICE,
    pod_volume_claims,
    unsupported_volume_claims_reason,
)
from kubesched.plugins.volume_binding import ClaimsUnsupported


class NodeVolumeLimits(ClaimsUnsupported):
    name = "NodeVolumeLimits"

    def pre_filter(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        claims = pod_volume_claims(pod)
        if claims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, unsupported_volume_claims_reason(claims),
                                plugin=self.name)
        inline = [v.get("name", "") for v in (pod.raw.get("spec") or {}).get("volumes") or () if v.get("csi")]
        if inline:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                "kubesched does not enforce CSI volume attach limits "
                                f"(inline CSI volumes: {', '.join(inline)}); {UNSUPPORTED_CLAIMS_ADVICE}",
                                plugin=self.name)
        return None, Status(Code.SKIP)
