"""VolumeZone: claim-backed volumes must be in the node's zone; see VolumeBinding.

Upstream checks only PersistentVolumes; a pod without claims skips the plugin. kubesched
keeps no PersistentVolume cache, so a pod with claims is rejected with that reason.
"""

from __future__ import annotations

from kubesched.plugins.volume_binding import ClaimsUnsupported


class VolumeZone(ClaimsUnsupported):
    name = "VolumeZone"
