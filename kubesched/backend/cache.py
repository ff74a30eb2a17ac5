"""The scheduler cache (upstream pkg/scheduler/backend/cache): nodes, the pods on them, and
pods assumed onto nodes while their binding is in flight.

Watch handlers and the scheduling loop both touch it, under one lock. NodeInfo aggregates
are updated incrementally per pod event; ``update_snapshot`` copies only the nodes changed
since the last cycle into the cycle's Snapshot (hot path: O(changed nodes), not O(nodes)).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from kubesched import metrics
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"

# How long an assumed pod whose binding finished may wait for its Add/Update before it is
# dropped; 0 means never, as kube-scheduler (durationToExpireAssumedPod was 0, and v1.37.1's
# cache has no expiry at all): the informer confirms or removes it, and expiring a bound pod
# early would let the next pods overcommit its node.
ASSUMED_POD_TTL = 0.0

# scheduler_cache_size's series, resolved once: every pod add, assume and forget sets
# all three, and labels() takes a lock and a lookup each time (6 calls per scheduled pod).
_CACHED_NODES = metrics.cache_size.labels("nodes")
_CACHED_PODS = metrics.cache_size.labels("pods")
_ASSUMED_PODS = metrics.cache_size.labels("assumed_pods")


class CacheError(RuntimeError):
    pass


def zone_key(labels: dict[str, str]) -> str:
    """utilnode.GetZoneKey: region and zone joined, so equal zone names in two regions differ."""
    region = labels.get(REGION_LABEL) or labels.get(LEGACY_REGION_LABEL) or ""
    zone = labels.get(ZONE_LABEL) or labels.get(LEGACY_ZONE_LABEL) or ""
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class _AssumedState:
    __slots__ = ("pod", "binding_finished", "deadline")

    def __init__(self, pod: PodInfo):
        self.pod = pod
        self.binding_finished = False
        self.deadline = 0.0


class NodeTree:
    """Node names per zone; ``list`` interleaves zones (upstream nodeTree) so the scheduler's
    round-robin start index walks across zones evenly."""

    def __init__(self) -> None:
        self.zones: dict[str, list[str]] = {}
        self.zone_of: dict[str, str] = {}

    def add(self, name: str, labels: dict[str, str]) -> bool:
        zone = zone_key(labels)
        if self.zone_of.get(name) == zone:
            return False
        self.remove(name)
        self.zones.setdefault(zone, []).append(name)
        self.zone_of[name] = zone
        return True

    def remove(self, name: str) -> bool:
        zone = self.zone_of.pop(name, None)
        if zone is None:
            return False
        names = self.zones[zone]
        names.remove(name)
        if not names:
            del self.zones[zone]
        return True

    def list(self) -> list[str]:
        out: list[str] = []
        columns = list(self.zones.values())
        depth = max((len(c) for c in columns), default=0)
        for i in range(depth):
            for column in columns:
                if i < len(column):
                    out.append(column[i])
        return out

    def __len__(self) -> int:
        return len(self.zone_of)


class SchedulerCache:
    def __init__(self, assumed_ttl: float = ASSUMED_POD_TTL, clock: Callable[[], float] = time.monotonic):
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeInfo] = {}  # includes placeholders for pods on unknown nodes
        self.pods: dict[str, PodInfo] = {}  # uid -> pod on a node (bound or assumed)
        self.assumed: dict[str, _AssumedState] = {}
        self.tree = NodeTree()
        self.dirty: set[str] = set()
        self.node_set_changed = True
        self.images_changed = True
        self.assumed_ttl = assumed_ttl
        self.clock = clock

    # -- nodes ----------------------------------------------------------------------------

    def add_node(self, raw: dict) -> NodeInfo:
        with self.lock:
            name = (raw.get("metadata") or {}).get("name", "")
            info = self.nodes.get(name)
            if info is None:
                info = NodeInfo(raw)
                self.nodes[name] = info
                self.images_changed |= bool(info.image_states)
            else:
                # Kubelets resend the same image list with every status update; recounting
                # images on all nodes is only needed when a list really changes.
                old_images = (info.raw.get("status") or {}).get("images")
                info.set_node(raw)
                self.images_changed |= old_images != (raw.get("status") or {}).get("images")
            if self.tree.add(name, info.labels):
                self.node_set_changed = True
            self.dirty.add(name)
            self._publish()
            return info

    update_node = add_node

    def remove_node(self, name: str) -> None:
        with self.lock:
            info = self.nodes.get(name)
            if info is None:
                return
            if info.image_states:
                self.images_changed = True
            if info.pods:
                # Pods still point at it; keep a node-less placeholder until they go.
                info.raw = {}
                info.image_states = {}
            else:
                del self.nodes[name]
            self.tree.remove(name)
            self.node_set_changed = True
            self.dirty.discard(name)
            self._publish()

    def node_count(self) -> int:
        return len(self.tree)

    # -- pods -----------------------------------------------------------------------------

    def _node_for(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo()
            info.name = name
            self.nodes[name] = info
        return info

    def _add(self, pod: PodInfo) -> None:
        self._node_for(pod.node_name).add_pod(pod)
        self.pods[pod.uid] = pod
        self.dirty.add(pod.node_name)

    def _remove(self, pod: PodInfo) -> None:
        known = self.pods.pop(pod.uid, None)
        if known is None:
            return
        info = self.nodes.get(known.node_name)
        if info is not None:
            info.remove_pod(known)
            self.dirty.add(known.node_name)
            if not info.raw and not info.pods:
                del self.nodes[known.node_name]
                self.dirty.discard(known.node_name)

    def add_pod(self, pod: PodInfo) -> None:
        """A bound pod appeared (informer Add); confirms an assumed pod."""
        with self.lock:
            state = self.assumed.pop(pod.uid, None)
            if state is not None or pod.uid in self.pods:
                self._remove(state.pod if state is not None else self.pods[pod.uid])
            self._add(pod)
            self._publish()

    def update_pod(self, pod: PodInfo) -> None:
        self.add_pod(pod)

    def remove_pod(self, pod: PodInfo) -> None:
        with self.lock:
            self.assumed.pop(pod.uid, None)
            self._remove(pod)
            self._publish()

    def has_pod(self, uid: str) -> bool:
        return uid in self.pods

    # -- assumed pods ---------------------------------------------------------------------

    def assume_pod(self, pod: PodInfo, node_name: str) -> PodInfo:
        """Count pod on node_name before the binding is confirmed; returns the assumed copy."""
        with self.lock:
            if pod.uid in self.pods:
                raise CacheError(f"pod {pod.key} (uid {pod.uid}) is in the cache, so can't be assumed")
            assumed = pod.placed_on(node_name)
            self._add(assumed)
            self.assumed[pod.uid] = _AssumedState(assumed)
            self._publish()
            return assumed

    def finish_binding(self, pod: PodInfo) -> None:
        with self.lock:
            state = self.assumed.get(pod.uid)
            if state is not None:
                state.binding_finished = True
                state.deadline = self.clock() + self.assumed_ttl

    def forget_pod(self, pod: PodInfo) -> None:
        with self.lock:
            if self.assumed.pop(pod.uid, None) is not None:
                self._remove(pod)
                self._publish()

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    def cleanup_expired_assumed_pods(self) -> list[PodInfo]:
        with self.lock:
            now = self.clock()
            if not self.assumed_ttl:
                return []
            expired = [s.pod for s in self.assumed.values() if s.binding_finished and s.deadline < now]
            for pod in expired:
                del self.assumed[pod.uid]
                self._remove(pod)
            if expired:
                self._publish()
            return expired

    # -- snapshot -------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring snapshot up to date, cloning only the nodes that changed since last time."""
        with self.lock:
            if self.node_set_changed:
                infos = [self.nodes[name].clone() for name in self.tree.list()]
                snapshot.set_nodes(infos)
                self.node_set_changed = False
                self.images_changed = False
                self.dirty.clear()
                return
            affinity_changed = False
            node_map = snapshot.node_info_map
            node_list = snapshot.node_info_list
            for name in self.dirty:
                old = node_map.get(name)
                live = self.nodes.get(name)
                if old is None or live is None or not live.raw:
                    continue
                clone = live.clone()
                clone.index = old.index
                node_list[old.index] = clone
                node_map[name] = clone
                if (old.pods_with_affinity or clone.pods_with_affinity
                        or old.pods_with_required_anti_affinity or clone.pods_with_required_anti_affinity):
                    affinity_changed = True
            self.dirty.clear()
            if affinity_changed:
                snapshot.refresh_affinity_lists()
            if self.images_changed:
                snapshot.refresh_image_counts()
                self.images_changed = False

    def _publish(self) -> None:
        _CACHED_NODES.set(len(self.tree))
        _CACHED_PODS.set(len(self.pods))
        _ASSUMED_PODS.set(len(self.assumed))

    def dump(self) -> dict[str, NodeInfo]:
        with self.lock:
            return {name: info.clone() for name, info in self.nodes.items() if info.raw}
