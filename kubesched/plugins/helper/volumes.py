"""What kubesched does not implement: volumes bound through claims, DRA claims."""

from __future__ import annotations

from typing import Any

UNSUPPORTED_CLAIMS_ADVICE = "schedule this pod with kube-scheduler"


def pod_volume_claims(pod: Any) -> list[str]:
    """The PersistentVolumeClaims a pod uses, including those its generic ephemeral volumes create."""
    spec = pod.raw.get("spec") or {}
    claims = []
    for volume in spec.get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            claims.append(volume["persistentVolumeClaim"].get("claimName", ""))
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod.name}-{volume.get('name', '')}")
    return claims


def unsupported_volume_claims_reason(claims: list[str]) -> str:
    """The reason every volume plugin gives for a pod with PersistentVolumeClaims.

    kubesched keeps no PersistentVolume, StorageClass or CSINode caches, so it cannot bind,
    zone-check or count claim-backed volumes; it says so instead of guessing a node.
    """
    return ("kubesched does not schedule pods with PersistentVolumeClaims "
            f"(claims: {', '.join(claims)}); {UNSUPPORTED_CLAIMS_ADVICE}")
