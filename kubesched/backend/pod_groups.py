"""The pods of each PodGroup the scheduler knows (upstream backend/cache/podgroupstate.go),
kept only with the GenericWorkload feature gate on.

A pod joins the group that spec.schedulingGroup.podGroupName names in its namespace (the
field is immutable, so a pod never changes group) and stays until it is deleted, bound or not;
the PodGroup object itself comes from the podgroups informer and may arrive later than its
pods. "Scheduled" means bound or assumed (reserved, maybe waiting on Permit), as upstream's
ScheduledPodsCount; the assumed state is the scheduler cache's, asked through is_assumed.
"""

from __future__ import annotations

import threading
from typing import Callable


def pod_group_name(raw: dict) -> str:
    """The PodGroup a pod belongs to ('' for none)."""
    group = (raw.get("spec") or {}).get("schedulingGroup")
    return (group.get("podGroupName") or "") if group else ""


def group_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def gang_min_count(pod_group: dict) -> int | None:
    """The gang policy's minCount; None for a basic (or missing) policy."""
    gang = ((pod_group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    return int(gang.get("minCount") or 0) if gang is not None else None


class PodGroups:
    """Group membership by pod UID, and the PodGroup objects through the informer registry."""

    def __init__(self, pod_group_store: Callable[[str], dict | None], is_assumed: Callable[[str], bool]):
        self._pod_group = pod_group_store
        self._is_assumed = is_assumed
        self._lock = threading.Lock()
        # group key -> uid -> the pod as last seen
        self._members: dict[str, dict[str, dict]] = {}

    # -- the informers' side -----------------------------------------------------------------

    def add_pod(self, raw: dict) -> None:
        name = pod_group_name(raw)
        if not name:
            return
        meta = raw.get("metadata") or {}
        with self._lock:
            self._members.setdefault(group_key(meta.get("namespace", "default"), name), {})[meta.get("uid", "")] = raw

    def update_pod(self, raw: dict) -> None:
        self.add_pod(raw)

    def remove_pod(self, raw: dict) -> None:
        name = pod_group_name(raw)
        if not name:
            return
        meta = raw.get("metadata") or {}
        key = group_key(meta.get("namespace", "default"), name)
        with self._lock:
            members = self._members.get(key)
            if members is not None:
                members.pop(meta.get("uid", ""), None)
                if not members:
                    del self._members[key]

    # -- what plugins and the pod group cycle read ---------------------------------------------

    def pod_group(self, namespace: str, name: str) -> dict | None:
        return self._pod_group(group_key(namespace, name))

    def _pods(self, namespace: str, name: str) -> list[tuple[str, dict]]:
        with self._lock:
            return list((self._members.get(group_key(namespace, name)) or {}).items())

    def member_uids(self, namespace: str, name: str) -> list[str]:
        with self._lock:
            return list(self._members.get(group_key(namespace, name)) or ())

    def all_pods_count(self, namespace: str, name: str) -> int:
        """Every pod of the group the scheduler knows, in any state (AllPodsCount)."""
        with self._lock:
            return len(self._members.get(group_key(namespace, name)) or ())

    def scheduled_pods_count(self, namespace: str, name: str) -> int:
        """Pods of the group that are bound or assumed (ScheduledPodsCount)."""
        return len(self.scheduled_pods(namespace, name))

    def scheduled_pods(self, namespace: str, name: str) -> list[dict]:
        """The group's pods that are bound or assumed, as last seen (ScheduledPods)."""
        return [raw for uid, raw in self._pods(namespace, name)
                if (raw.get("spec") or {}).get("nodeName") or self._is_assumed(uid)]

    def assumed_pods(self, namespace: str, name: str) -> list[str]:
        """UIDs of the group's assumed pods (AssumedPods)."""
        return [uid for uid, raw in self._pods(namespace, name)
                if not (raw.get("spec") or {}).get("nodeName") and self._is_assumed(uid)]

    def unscheduled_pods_count(self, namespace: str, name: str) -> int:
        """Pods of the group neither bound nor assumed."""
        return sum(1 for uid, raw in self._pods(namespace, name)
                   if not (raw.get("spec") or {}).get("nodeName") and not self._is_assumed(uid))
