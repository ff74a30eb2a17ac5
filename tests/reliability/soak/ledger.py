"""The invariants checked all through a soak run, from the API's own objects.

The ledger follows pods, nodes, ResourceClaims, PersistentVolumeClaims and the schedulers'
Lease through lab.list_watch.ListWatch, each in the order the API server sent its events,
and checks on every change:

- a pod is bound once: its nodeName never changes after it was set (a double bind);
- a pod fitted the node it was bound to, at the moment the binding appears: the CPU, memory
  and pod count of the node's other pods that have not finished (terminating ones count, as
  the scheduler counts them) plus its own stay within the node's allocatable; its node
  selector matches the node's labels; it tolerates the node's taints other than the ones the
  node lifecycle controller puts on and takes off (not-ready, unreachable: a scheduler decides
  on a snapshot, so a taint that arrives between decision and binding is a race, counted
  apart); no other pod of its required anti-affinity group is on the node;
- no device is allocated to two ResourceClaims at once;
- no PersistentVolume is the volume of two claims;
- leader hand-overs: the Lease's acquireTime of each new holder against the last renewTime
  of the one before (the holders' own clocks, on this one machine); a hand-over the watch
  did not see whole (it relisted between the two records) is marked, its gap an upper bound.

A relist (after a 410 or a lost connection) hands over the whole collection: bindings seen
for the first time then are checked against the state after the removals the list shows.
Requests are summed from the containers' requests, the only form the soak's pods use.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

CONDITION_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
CLASS_LABEL = "soak.kubesched.io/class"
ANTI_CLASS = "anti"
TERMINAL = ("Succeeded", "Failed")
JOB_CLASSES = ("job", "preemptor")
KWOK_START_S, KWOK_FINISH_S, KWOK_REMOVE_S = 10.0, 15.0, 5.0
_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}


def quantity(text: str | int | float, milli: bool = False) -> int:
    """The soak's quantities: plain numbers, m (milli) and the binary suffixes."""
    text = str(text)
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            value = float(text[:-2]) * factor
            return int(value * 1000) if milli else int(value)
    if text.endswith("m"):
        value = float(text[:-1]) / 1000
    else:
        value = float(text)
    return int(round(value * 1000)) if milli else int(value)


@dataclass
class PodState:
    uid: str
    key: str
    cls: str
    node: str = ""
    cpu: int = 0               # milli
    memory: int = 0            # bytes
    terminal: bool = False
    deleting: bool = False
    nominated: str = ""
    selector: dict = field(default_factory=dict)
    tolerations: list = field(default_factory=list)
    scheduler: str = ""
    first_seen: float = 0.0
    bound_at: float | None = None
    phase: str = ""
    deletion_due: float | None = None  # metadata.deletionTimestamp (epoch seconds): when kwok should remove it

    @classmethod
    def from_object(cls, pod: dict, now: float) -> "PodState":
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        cpu = memory = 0
        for container in spec.get("containers") or ():
            requests = (container.get("resources") or {}).get("requests") or {}
            cpu += quantity(requests.get("cpu", 0), milli=True)
            memory += quantity(requests.get("memory", 0))
        return cls(meta.get("uid", ""), f"{meta.get('namespace')}/{meta.get('name')}",
                   (meta.get("labels") or {}).get(CLASS_LABEL, ""), spec.get("nodeName") or "", cpu, memory,
                   status.get("phase") in TERMINAL, bool(meta.get("deletionTimestamp")),
                   status.get("nominatedNodeName") or "", spec.get("nodeSelector") or {},
                   spec.get("tolerations") or [], spec.get("schedulerName") or "", now,
                   phase=status.get("phase") or "", deletion_due=parse_time(meta.get("deletionTimestamp")))

    @property
    def counts(self) -> bool:
        """Takes room on its node: bound and not finished (terminating pods still count)."""
        return bool(self.node) and not self.terminal


@dataclass
class NodeState:
    name: str
    cpu: int
    memory: int
    pods: int
    labels: dict
    taints: list

    @classmethod
    def from_object(cls, node: dict) -> "NodeState":
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return cls(node["metadata"]["name"], quantity(allocatable.get("cpu", 0), milli=True),
                   quantity(allocatable.get("memory", 0)), quantity(allocatable.get("pods", 0)),
                   node["metadata"].get("labels") or {}, (node.get("spec") or {}).get("taints") or [])


def tolerates(tolerations: list, taint: dict) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _allocated(claim: dict) -> set[tuple]:
    """The (driver, pool, device) a ResourceClaim's allocation names."""
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    return {(r.get("driver"), r.get("pool"), r.get("device")) for r in results}


def device_accounting(slices: list[dict], claims: list[dict], pods: list[dict]) -> dict:
    """Where the published devices are, from the API's objects on a quiet cluster: how many
    exist, how many claims hold, and which allocated claims are reserved for no pod that is
    still there and not finished. A device held so is lost to every pod: a DRA pod left pending
    then could have fit, whatever a fresh instance of the same scheduler says."""
    devices = {(s["spec"].get("driver"), (s["spec"].get("pool") or {}).get("name"), d.get("name"))
               for s in slices for d in s["spec"].get("devices") or ()}
    live = {p["metadata"]["uid"] for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL}
    allocated: set[tuple] = set()
    held_for_no_pod = []
    for claim in claims:
        held = _allocated(claim)
        if not held:
            continue
        allocated |= held
        reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or ()}
        if not reserved & live:
            held_for_no_pod.append(f"{claim['metadata'].get('namespace')}/{claim['metadata'].get('name')}")
    return {"devices": len(devices), "allocated": len(allocated & devices), "free": len(devices - allocated),
            "held_for_no_pod": sorted(held_for_no_pod)}


class Ledger:
    def __init__(self, scheduler_name: str, lease_name: str, clock=time.monotonic):
        self.scheduler_name = scheduler_name
        self.lease_name = lease_name
        self.clock = clock
        self.lock = threading.Lock()
        self.pods: dict[str, PodState] = {}
        self.nodes: dict[str, NodeState] = {}
        self.on_node: dict[str, set[str]] = {}
        self.devices: dict[tuple, str] = {}            # (driver, pool, device) -> claim uid
        self.claim_devices: dict[str, set[tuple]] = {}
        self.volume_claim: dict[str, str] = {}         # PersistentVolume name -> claim uid
        self.claim_volume: dict[str, str] = {}
        self.violations: list[dict] = []
        self.races: dict[str, int] = {"bound_on_condition_tainted_node": 0, "bound_to_missing_node": 0}
        # Bindings to a node this ledger has not seen (yet): the node and pod watches are two
        # streams with no order between them, so the check waits for the node to arrive.
        self.deferred: dict[str, list[str]] = {}
        self.binds = 0
        self.bind_latencies: dict[str, list[float]] = {}
        # The Lease has its own lock: a pod relist must not hold its events back (a watch that
        # stalls falls out of the API server's window, relists, and loses the renewals between).
        self.lease_lock = threading.Lock()
        self.lease_records: list[dict] = []
        self.deleted_pods = 0

    # -- violations -----------------------------------------------------------------------

    def _violate(self, kind: str, **detail) -> None:
        self.violations.append({"kind": kind, "at": round(self.clock(), 2), **detail})

    def violation_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for v in self.violations:
            counts[v["kind"]] = counts.get(v["kind"], 0) + 1
        return counts

    # -- pods -----------------------------------------------------------------------------

    def pod_event(self, kind: str, pod: dict) -> None:
        with self.lock:
            if kind == "DELETED":
                self._forget_pod(pod["metadata"].get("uid", ""))
            else:
                self._see_pod(pod)

    def pod_list(self, items: list[dict], _resource_version: str = "") -> None:
        with self.lock:
            listed = {(p.get("metadata") or {}).get("uid", "") for p in items}
            for uid in [u for u in self.pods if u not in listed]:
                self._forget_pod(uid)
            # Finished pods and the ones already bound first: their room is settled before a
            # binding seen for the first time is checked. (The set is built once: built per item
            # it made a relist of 20,000 pods hold the lock, and stall every watch, for minutes.)
            bound = {uid for uid, state in self.pods.items() if state.node}
            items = sorted(items, key=lambda p: bool((p.get("spec") or {}).get("nodeName"))
                           and (p.get("metadata") or {}).get("uid") not in bound)
            for pod in items:
                self._see_pod(pod)

    def _forget_pod(self, uid: str) -> None:
        state = self.pods.pop(uid, None)
        if state is not None:
            self.deleted_pods += 1
            if state.node:
                self.on_node.get(state.node, set()).discard(uid)

    def _see_pod(self, pod: dict) -> None:
        now = self.clock()
        new = PodState.from_object(pod, now)
        old = self.pods.get(new.uid)
        if old is not None:
            new.first_seen, new.bound_at = old.first_seen, old.bound_at
            if old.node and new.node != old.node:
                self._violate("double_bind", pod=new.key, first=old.node, then=new.node or "(unset)")
        if new.node and (old is None or not old.node):
            if not new.terminal:
                self._check_fit(new)
            new.bound_at = now
            self.binds += 1
            if old is not None:
                self.bind_latencies.setdefault(new.cls, []).append(round(now - old.first_seen, 3))
        self.pods[new.uid] = new
        if new.counts:
            self.on_node.setdefault(new.node, set()).add(new.uid)
        elif new.node:
            self.on_node.get(new.node, set()).discard(new.uid)

    def _check_fit(self, pod: PodState, later: frozenset[str] = frozenset()) -> None:
        """later: pods bound after this one whose check was deferred with it (not its neighbours then)."""
        node = self.nodes.get(pod.node)
        if node is None:
            self.deferred.setdefault(pod.node, []).append(pod.uid)
            return
        others = [self.pods[u] for u in self.on_node.get(pod.node, ())
                  if u != pod.uid and u in self.pods and u not in later]
        cpu, memory = sum(p.cpu for p in others) + pod.cpu, sum(p.memory for p in others) + pod.memory
        if cpu > node.cpu or memory > node.memory or len(others) + 1 > node.pods:
            self._violate("overcommitted", pod=pod.key, node=node.name, cpu_m=f"{cpu}/{node.cpu}",
                          memory=f"{memory}/{node.memory}", pods=f"{len(others) + 1}/{node.pods}",
                          others=[f"{p.key} {p.cpu}m{' terminating' if p.deleting else ''} bound at "
                                  f"{p.bound_at if p.bound_at is None else round(p.bound_at, 2)}"
                                  for p in others][:12])
        wrong = {k: v for k, v in pod.selector.items() if node.labels.get(k) != v}
        if wrong:
            self._violate("node_selector", pod=pod.key, node=node.name, wanted=wrong)
        for taint in node.taints:
            if taint.get("effect") not in ("NoSchedule", "NoExecute") or tolerates(pod.tolerations, taint):
                continue
            if taint.get("key") in CONDITION_TAINTS:
                self.races["bound_on_condition_tainted_node"] += 1
            else:
                self._violate("untolerated_taint", pod=pod.key, node=node.name, taint=taint.get("key"))
        if pod.cls == ANTI_CLASS and any(p.cls == ANTI_CLASS for p in others):
            self._violate("anti_affinity", pod=pod.key, node=node.name)

    def pending(self, exclude_classes: tuple[str, ...] = ()) -> list[PodState]:
        """Our scheduler's pods that are neither bound nor finished."""
        with self.lock:
            return [p for p in self.pods.values() if not p.node and not p.terminal and not p.deleting
                    and p.scheduler == self.scheduler_name and p.cls not in exclude_classes]

    def population(self) -> dict[str, int]:
        """The pods the API holds, by where they are in their life: waiting for a node, on one,
        being deleted (kwok has yet to remove them), finished (a Job's, until its TTL)."""
        counts = {"unbound": 0, "bound": 0, "deleting": 0, "finished": 0}
        with self.lock:
            for p in self.pods.values():
                state = "deleting" if p.deleting else "finished" if p.terminal else "bound" if p.node else "unbound"
                counts[state] += 1
        return counts

    def kwok_backlog(self) -> int:
        """Pods kwok (the nodes' kubelets) has yet to play: bound and not started after
        KWOK_START_S, Job pods not finished KWOK_FINISH_S after their binding (kwok finishes
        them at once), deleted pods KWOK_REMOVE_S past their grace period."""
        now, wall = self.clock(), time.time()
        backlog = 0
        with self.lock:
            for p in self.pods.values():
                if p.deletion_due is not None:
                    backlog += p.deletion_due < wall - KWOK_REMOVE_S
                elif p.node and not p.terminal and p.bound_at is not None:
                    late = KWOK_FINISH_S if p.cls in JOB_CLASSES else KWOK_START_S
                    backlog += p.bound_at < now - late and (p.phase == "Pending" or p.cls in JOB_CLASSES)
        return backlog

    # -- nodes ----------------------------------------------------------------------------

    def node_event(self, kind: str, node: dict) -> None:
        with self.lock:
            name = node["metadata"]["name"]
            if kind == "DELETED":
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = NodeState.from_object(node)
                self._check_deferred(name)

    def node_list(self, items: list[dict], _resource_version: str = "") -> None:
        with self.lock:
            self.nodes = {n["metadata"]["name"]: NodeState.from_object(n) for n in items}
            for name in list(self.deferred):
                if name in self.nodes:
                    self._check_deferred(name)

    def _check_deferred(self, name: str) -> None:
        waiting = self.deferred.pop(name, [])
        for i, uid in enumerate(waiting):
            pod = self.pods.get(uid)
            if pod is not None and pod.counts and pod.node == name:
                self._check_fit(pod, later=frozenset(waiting[i + 1:]))

    def close_deferred(self) -> None:
        """Bindings whose node never appeared: bound to a node the API no longer had (a scheduler
        that decided before it saw the node go)."""
        with self.lock:
            self.races["bound_to_missing_node"] += sum(len(uids) for uids in self.deferred.values())
            self.deferred.clear()

    # -- claims and volumes ---------------------------------------------------------------

    def claim_event(self, kind: str, claim: dict) -> None:
        with self.lock:
            self._see_claim(claim, deleted=kind == "DELETED")

    def claim_list(self, items: list[dict], _resource_version: str = "") -> None:
        with self.lock:
            # Everything the list shows freed is freed first: a device can have moved from a claim
            # listed after the one that holds it now.
            listed = {c["metadata"]["uid"]: _allocated(c) for c in items}
            for uid in list(self.claim_devices):
                self._release_devices(uid, listed.get(uid, set()))
            for claim in items:
                self._see_claim(claim)

    def _see_claim(self, claim: dict, deleted: bool = False) -> None:
        uid = claim["metadata"]["uid"]
        devices = set() if deleted else _allocated(claim)
        self._release_devices(uid, devices)
        for device in devices - self.claim_devices.get(uid, set()):
            holder = self.devices.get(device)
            if holder is not None and holder != uid:
                self._violate("device_in_two_claims", device="/".join(device), claims=[holder, uid],
                              claim=f"{claim['metadata'].get('namespace')}/{claim['metadata'].get('name')}")
            self.devices[device] = uid
        if devices:
            self.claim_devices[uid] = devices

    def _release_devices(self, uid: str, keep: set) -> None:
        for device in self.claim_devices.get(uid, set()) - keep:
            if self.devices.get(device) == uid:
                del self.devices[device]
        if not keep:
            self.claim_devices.pop(uid, None)

    def pvc_event(self, kind: str, pvc: dict) -> None:
        with self.lock:
            self._see_pvc(pvc, deleted=kind == "DELETED")

    def pvc_list(self, items: list[dict], _resource_version: str = "") -> None:
        with self.lock:
            # As for claims: volumes the list shows released are released before any is taken.
            listed = {c["metadata"]["uid"]: (c.get("spec") or {}).get("volumeName") or "" for c in items}
            for uid in [u for u, volume in self.claim_volume.items() if listed.get(u) != volume]:
                self._release_volume(uid)
            for pvc in items:
                self._see_pvc(pvc)

    def _see_pvc(self, pvc: dict, deleted: bool = False) -> None:
        uid = pvc["metadata"]["uid"]
        volume = "" if deleted else (pvc.get("spec") or {}).get("volumeName") or ""
        if self.claim_volume.get(uid) and self.claim_volume[uid] != volume:
            self._release_volume(uid)
        if not volume or self.claim_volume.get(uid) == volume:
            return  # nothing taken, or nothing new (a conflict is counted when it appears)
        holder = self.volume_claim.get(volume)
        if holder is not None and holder != uid:
            self._violate("volume_in_two_claims", volume=volume, claims=[holder, uid],
                          claim=f"{pvc['metadata'].get('namespace')}/{pvc['metadata'].get('name')}")
        self.volume_claim[volume] = uid
        self.claim_volume[uid] = volume

    def _release_volume(self, uid: str) -> None:
        volume = self.claim_volume.pop(uid, None)
        if volume is not None and self.volume_claim.get(volume) == uid:
            del self.volume_claim[volume]

    # -- the Lease ------------------------------------------------------------------------

    def lease_event(self, kind: str, lease: dict, listed: bool = False) -> None:
        if lease["metadata"]["name"] != self.lease_name or kind == "DELETED":
            return
        spec = lease.get("spec") or {}
        record = {"holder": spec.get("holderIdentity") or "", "renew": parse_time(spec.get("renewTime")),
                  "acquire": parse_time(spec.get("acquireTime")), "transitions": spec.get("leaseTransitions") or 0}
        with self.lease_lock:
            last = self.lease_records[-1] if self.lease_records else None
            if last is None or {k: v for k, v in last.items() if k != "after_relist"} != record:
                # A relist that finds the Lease changed: what it went through meanwhile was not seen.
                self.lease_records.append({**record, "after_relist": listed and last is not None})

    def lease_list(self, items: list[dict], _resource_version: str = "") -> None:
        for lease in items:
            self.lease_event("ADDED", lease, listed=True)

    def handovers(self) -> list[dict]:
        """Each change of holder: who had it, who took it, and how long no one held it (the new
        holder's acquireTime against the previous record's renewTime, a release included).
        observed is False when the watch relisted between the two records: renewals may have
        gone unseen, so the gap is only an upper bound."""
        out = []
        with self.lease_lock:
            records = list(self.lease_records)
        for before, after in zip(records, records[1:]):
            if not after["holder"] or after["holder"] == before["holder"]:
                continue
            if after["acquire"] is None or before["renew"] is None:
                continue
            out.append({"from": before["holder"], "to": after["holder"], "released": not before["holder"],
                        "last_renew": before["renew"], "acquired": after["acquire"],
                        "gap_s": round(after["acquire"] - before["renew"], 3), "observed": not after["after_relist"]})
        return out
