"""The soak's schedule, made from a seed before anything starts: what arrives when, and which
fault strikes when.

Everything random in a soak run comes from here: ``make_plan(settings)`` is a pure function
of the settings (seed, minutes, rate, node count), so the kubesched run and the kube-scheduler
run get the same arrivals and the same faults at the same offsets, and ``digest`` proves it in
the results. What the machine makes of them (how long a restart takes, which pod a scheduler
picks) is measured, not planned.

Arrivals are made per half-second tick. A class with ``rate * share * 0.5`` expected pods per
tick gets the integer part, plus one more with the probability of the fraction, so the rate
is met on average and the ticks stay smooth. Bare pods get a lifetime (exponential, mean per
class) and a planned deletion; the controllers' pods leave as they do on a cluster (Jobs
complete and are collected by their TTL, Deployments and StatefulSets are scaled down by a
random walk whose steps up and down balance).

Faults: each kind has a count per 30 minutes (at least one in any run) and a duration range;
each occurrence gets a uniform start between the warm-up and the quiet tail, independently of
the others, so faults overlap as they fall. ``FAULT_KINDS`` says what each does.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field

TICK_S = 0.5

# Share of the arrival rate per class of pod; docs/reliability.md describes each.
ARRIVAL_MIX = {
    "bare": 0.38,        # bare pods, 50-200m CPU, deleted after their lifetime
    "extender": 0.08,    # bare pods the extender is interested in (they request its managed resource)
    "job": 0.20,         # Jobs of 1-6 pods; kwok completes them, their TTL collects them
    "deployment": 0.12,  # scale-ups of the plain Deployments (scale-downs balance them)
    "spread": 0.04,      # scale-ups of the Deployment spread over zones (maxSkew 1, DoNotSchedule)
    "anti": 0.03,        # scale-ups of the Deployment with required anti-affinity per node
    "dra": 0.07,         # bare pods with a ResourceClaim from a template: one GPU each
    "stateful": 0.02,    # StatefulSet scale-ups: each pod gets a local PersistentVolume
    "preemptor": 0.05,   # high-priority Jobs on the batch pool, which low-priority fillers keep full
    "never": 0.01,       # pods no node can take (a node selector no node has)
}
MEAN_LIFETIME_S = {"bare": 60.0, "extender": 45.0, "dra": 30.0, "never": 120.0}
DEPLOYMENTS = 8
DEPLOYMENT_REPLICAS = (2, 40)
SPREAD_REPLICAS = (3, 60)
STATEFULSETS = 4
STATEFUL_REPLICAS = (0, 5)

# kind -> (occurrences per 30 minutes, (shortest, longest) duration in seconds)
FAULT_KINDS = {
    "leader_sigkill": (3, (5.0, 15.0)),      # SIGKILL the leader; started again after the duration
    "leader_sigterm": (3, (5.0, 15.0)),      # SIGTERM the leader; started again after the duration
    "apiserver_restart": (2, (2.0, 8.0)),    # kube-apiserver killed, started again after the duration
    "watch_expiry": (2, (2.0, 8.0)),         # the same with etcd compacted meanwhile: resumed watches get 410
    "etcd_restart": (2, (2.0, 8.0)),         # etcd stopped, started again after the duration
    "connection_reset": (4, (2.0, 4.0)),     # the relay in front of the API server resets every connection, 3 times
    "node_flap": (5, (20.0, 60.0)),          # 1-3 nodes NotReady, Ready again after the duration
    "node_recreate": (3, (10.0, 40.0)),      # 1-2 nodes deleted, created again after the duration
    "extender_slow": (2, (20.0, 50.0)),      # the extender answers filter and prioritize after 1.5 s
    "extender_errors": (2, (20.0, 50.0)),    # the extender answers 500
    "extender_down": (2, (20.0, 50.0)),      # the extender is stopped (SIGSTOP): connections hang until the timeout
    "ca_rotation": (2, (0.0, 0.0)),          # a new client CA in the bundle, a new serving certificate
    "config_rollout": (1, (0.0, 0.0)),       # a changed configuration rolled out, standbys first, the leader last
}


@dataclass(frozen=True)
class Settings:
    seed: int = 27
    minutes: float = 30.0
    rate: float = 50.0           # pods per second arriving, all classes together
    nodes: int = 300             # general kwok nodes (the batch pool comes on top)
    warmup_s: float = 60.0       # no fault before this
    tail_s: float = 90.0         # no fault starts in the last tail_s

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0


@dataclass(frozen=True)
class Pools:
    """Which nodes play which part; derived from the node count alone."""

    general: tuple[str, ...]
    gpu: tuple[str, ...]         # general nodes whose fake DRA driver publishes 8 GPUs each
    storage: tuple[str, ...]     # general nodes with two local PersistentVolumes each
    batch: tuple[str, ...]       # extra nodes, tainted and labelled for the preemption workload

    @classmethod
    def for_nodes(cls, count: int) -> "Pools":
        general = tuple(f"soak-node-{i}" for i in range(count))
        gpus = max(4, count // 20)
        # Room for every StatefulSet at its largest (STATEFULSETS x 5 claims, three volumes a node)
        # with a third to spare for volumes that wait to be recycled or sit on a node that is down.
        storage = max(10, count // 25)
        return cls(general, general[:gpus], general[gpus:gpus + storage],
                   tuple(f"soak-batch-{i}" for i in range(max(2, count // 40))))


@dataclass(frozen=True)
class Action:
    at: float
    kind: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    at: float
    kind: str
    duration: float
    args: dict = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.at + self.duration


@dataclass
class Plan:
    settings: Settings
    pools: Pools
    actions: list[Action]
    faults: list[Fault]
    initial: dict[str, int]      # replicas each Deployment and StatefulSet of the walks starts with

    @property
    def digest(self) -> str:
        """sha256 of the whole plan: equal digests mean equal arrivals and faults."""
        doc = {"settings": asdict(self.settings), "pools": asdict(self.pools), "initial": self.initial,
               "actions": [asdict(a) for a in self.actions], "faults": [asdict(f) for f in self.faults]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]

    def arrivals_by_class(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for action in self.actions:
            if action.args.get("arrivals"):
                counts[action.args["cls"]] = counts.get(action.args["cls"], 0) + action.args["arrivals"]
        return counts


def _count(rng: random.Random, expected: float) -> int:
    whole = math.floor(expected)
    return whole + (1 if rng.random() < expected - whole else 0)


class _Walk:
    """Replica counts of one set of scalable objects, moved up by arrivals and down by as much."""

    def __init__(self, rng: random.Random, names: list[str], bounds: tuple[int, int]):
        self.rng = rng
        self.bounds = bounds
        self.replicas = {name: (bounds[0] + bounds[1]) // 2 for name in names}

    def step(self, up: int, down: int) -> tuple[dict[str, int], int]:
        """Add up replicas and remove down, one at a time on random objects within bounds: the
        objects whose count changed, with their new count, and how many pods that adds."""
        low, high = self.bounds
        before = dict(self.replicas)
        names = list(self.replicas)
        for delta, times in ((1, up), (-1, down)):
            for _unused in range(times):
                movable = [n for n in names if low <= self.replicas[n] + delta <= high]
                if not movable:
                    break
                self.replicas[self.rng.choice(movable)] += delta
        changed = {n: r for n, r in self.replicas.items() if r != before[n]}
        return changed, sum(max(0, r - before[n]) for n, r in changed.items())


def make_plan(settings: Settings) -> Plan:
    rng = random.Random(settings.seed)
    pools = Pools.for_nodes(settings.nodes)
    actions: list[Action] = []
    serial = {cls: 0 for cls in ARRIVAL_MIX}
    walks = {
        "deployment": _Walk(rng, [f"web-{i}" for i in range(DEPLOYMENTS)], DEPLOYMENT_REPLICAS),
        "spread": _Walk(rng, ["spread"], SPREAD_REPLICAS),
        "anti": _Walk(rng, ["anti"], (2, max(3, len(pools.general) // 10))),
        "stateful": _Walk(rng, [f"db-{i}" for i in range(STATEFULSETS)], STATEFUL_REPLICAS),
    }
    initial = {name: replicas for walk in walks.values() for name, replicas in walk.replicas.items()}
    ticks = int(settings.seconds / TICK_S)
    for tick in range(ticks):
        at = round(tick * TICK_S, 3)
        for cls, share in ARRIVAL_MIX.items():
            n = _count(rng, settings.rate * share * TICK_S)
            if cls in walks:
                # Each step of the walk goes up or down with even odds: the replicas wander around
                # a steady level, and only the net rise of a tick makes pods.
                moves = _count(rng, 2 * settings.rate * share * TICK_S)
                up = sum(rng.random() < 0.5 for _unused in range(moves))
                changed, added = walks[cls].step(up, moves - up)
                for name, replicas in changed.items():
                    actions.append(Action(at, "scale", {"cls": cls, "name": name, "replicas": replicas}))
                if added:
                    actions.append(Action(at, "scaled_up", {"cls": cls, "arrivals": added}))
                continue
            if not n:
                continue
            if cls in ("job", "preemptor"):
                while n > 0:
                    size = min(n, rng.randint(1, 6) if cls == "job" else rng.randint(1, 2))
                    actions.append(Action(at, "job", {"cls": cls, "name": f"{cls}-{serial[cls]:06d}", "pods": size,
                                                      "arrivals": size}))
                    serial[cls] += 1
                    n -= size
                continue
            names = [f"{cls}-{serial[cls] + i:06d}" for i in range(n)]
            serial[cls] += n
            actions.append(Action(at, "pods", {"cls": cls, "names": names, "arrivals": n}))
            for name in names:
                lifetime = min(300.0, max(5.0, rng.expovariate(1.0 / MEAN_LIFETIME_S[cls])))
                if at + lifetime < settings.seconds:
                    actions.append(Action(round(at + lifetime, 3), "delete", {"cls": cls, "name": name}))
    actions.sort(key=lambda a: a.at)
    return Plan(settings, pools, actions, _faults(rng, settings, pools), initial)


def _faults(rng: random.Random, settings: Settings, pools: Pools) -> list[Fault]:
    faults: list[Fault] = []
    latest = settings.seconds - settings.tail_s
    for kind, (per_30_minutes, (shortest, longest)) in FAULT_KINDS.items():
        occurrences = max(1, round(per_30_minutes * settings.minutes / 30.0))
        for _unused in range(occurrences):
            duration = round(rng.uniform(shortest, longest), 1)
            at = round(rng.uniform(settings.warmup_s, max(settings.warmup_s, latest - duration)), 1)
            args: dict = {}
            if kind == "node_flap":
                args["nodes"] = rng.sample(pools.general, rng.randint(1, 3))
            elif kind == "node_recreate":
                args["nodes"] = rng.sample(pools.general, rng.randint(1, 2))
            faults.append(Fault(at, kind, duration, args))
    faults.sort(key=lambda f: f.at)
    return _apart(faults)


def _apart(faults: list[Fault]) -> list[Fault]:
    """Node faults take disjoint nodes: a node in two overlapping faults would be restored by
    the first to end while the second still holds it down."""
    kept: list[Fault] = []
    for fault in faults:
        if "nodes" in fault.args:
            busy = {n for other in kept if "nodes" in other.args and other.at <= fault.end and fault.at <= other.end
                    for n in other.args["nodes"]}
            nodes = [n for n in fault.args["nodes"] if n not in busy]
            if not nodes:
                continue
            fault = Fault(fault.at, fault.kind, fault.duration, {**fault.args, "nodes": nodes})
        kept.append(fault)
    return kept
