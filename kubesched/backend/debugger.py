"""The cache debugger: on SIGUSR2, compare the cache with the informers and dump it to the log.

Upstream's pkg/scheduler/backend/cache/debugger (CacheDebugger, New, ListenForSignal):
kube-scheduler answers SIGUSR2 by comparing the nodes and pods its listers hold with the
scheduler cache and the scheduling queue, logging "Cache mismatch" with what is missed or
redundant, and then logging "Dump of cached NodeInfo" and "Dump of scheduling queue". The
lines carry the fields and texts upstream's dumper prints, so one reader parses both
schedulers' dumps (tests/reliability/soak/ checks the cache against the API with them).
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Callable

from kubesched import klog
from kubesched.framework.types import assigned, is_terminal

if TYPE_CHECKING:
    from kubesched.framework.types import NodeInfo, PodInfo, Resource
    from kubesched.scheduler import Scheduler

COMPARE_SIGNAL = signal.SIGUSR2


def compare_strings(actual: list[str], cached: list[str]) -> tuple[list[str], list[str]]:
    """(missed, redundant): in actual and not cached, in cached and not actual (compareStrings)."""
    have, held = set(actual), set(cached)
    return sorted(have - held), sorted(held - have)


class CacheComparer:
    """CacheComparer.Compare: the informers' nodes and pods against the cache and the queue."""

    def __init__(self, scheduler: "Scheduler"):
        self.scheduler = scheduler

    def compare(self) -> tuple[tuple[list[str], list[str]], tuple[list[str], list[str]]]:
        """((missed, redundant) node names, (missed, redundant) pod UIDs), also logged on a mismatch."""
        sched = self.scheduler
        if klog.V(3):
            klog.info("Cache comparer started")
        nodes = [raw.get("metadata", {}).get("name", "") for raw in sched.informers.list("nodes")]
        # Upstream's pod lister holds no terminal pod (its informer selects them out).
        pods = [raw.get("metadata", {}).get("uid", "") for raw in sched.informers.list("pods")
                if not is_terminal(raw) and (assigned(raw) or _responsible(sched, raw))]
        dump = sched.cache.dump()
        cached_pods = [uid for info in dump.values() for uid in info.pods]
        cached_pods += [pod.uid for pods_in_place in sched.queue.pending().values() for pod in pods_in_place]
        missed_nodes, redundant_nodes = compare_strings(nodes, list(dump))
        if missed_nodes or redundant_nodes:
            klog.info("Cache mismatch", missedNodes=missed_nodes, redundantNodes=redundant_nodes)
        missed_pods, redundant_pods = compare_strings(pods, cached_pods)
        if missed_pods or redundant_pods:
            klog.info("Cache mismatch", missedPods=missed_pods, redundantPods=redundant_pods)
        if klog.V(3):
            klog.info("Cache comparer finished")
        return (missed_nodes, redundant_nodes), (missed_pods, redundant_pods)


class CacheDumper:
    """CacheDumper.DumpAll: every cached NodeInfo with its pods and nominated pods, then the queue."""

    def __init__(self, scheduler: "Scheduler"):
        self.scheduler = scheduler

    def dump_all(self) -> None:
        self.dump_nodes()
        self.dump_scheduling_queue()

    def dump_nodes(self) -> None:
        infos = [self.print_node_info(name, info) for name, info in self.scheduler.cache.dump().items()]
        klog.info("Dump of cached NodeInfo", nodes="\n\n".join(infos))

    def dump_scheduling_queue(self) -> None:
        pending = self.scheduler.queue.pending()
        pods = [pod for place in pending.values() for pod in place]
        summary = (f"activeQ:{len(pending['active'])}; backoffQ:{len(pending['backoff'])}; "
                   f"unschedulableEntities:{len(pending['unschedulable']) + len(pending['gated'])}")
        klog.info("Dump of scheduling queue", summary=summary, pods="".join(print_pod(pod) for pod in pods))

    def print_node_info(self, name: str, info: "NodeInfo") -> str:
        lines = [f"Node name: {name}\nDeleted: {'false' if info.raw else 'true'}\n"
                 f"Requested Resources: {_resource(info.requested)}\n"
                 f"Allocatable Resources:{_resource(info.allocatable)}\n"
                 f"Scheduled Pods(number: {len(info.pods)}):\n"]
        lines += [print_pod(pod) for pod in info.pods.values()]
        nominated = self.scheduler.nominator.nominated_pods_for_node(name)
        if nominated:
            lines.append(f"Nominated Pods(number: {len(nominated)}):\n")
            lines += [print_pod(pod) for pod in nominated]
        return "".join(lines)


def print_pod(pod: "PodInfo") -> str:
    return (f"name: {pod.name}, namespace: {pod.namespace}, uid: {pod.uid}, phase: {pod.phase}, "
            f"nominated node: {pod.nominated_node_name}\n")


def _resource(r: "Resource") -> str:
    """Go's %+v of a *framework.Resource."""
    scalar = " ".join(f"{k}:{v}" for k, v in sorted(r.scalar.items()))
    return (f"&{{MilliCPU:{r.milli_cpu} Memory:{r.memory} EphemeralStorage:{r.ephemeral_storage} "
            f"AllowedPodNumber:{r.allowed_pod_number} ScalarResources:map[{scalar}]}}")


def _responsible(scheduler: "Scheduler", raw: dict) -> bool:
    return ((raw.get("spec") or {}).get("schedulerName") or "default-scheduler") in scheduler.frameworks


def listen_for_signal(scheduler: "Scheduler", stop: threading.Event,
                      install: Callable[[int, Callable], object] = signal.signal) -> None:
    """CacheDebugger.ListenForSignal: on SIGUSR2 compare, then dump, on a thread of its own (a
    Python signal handler runs on the main thread, which must not hold the locks it takes)."""
    comparer, dumper = CacheComparer(scheduler), CacheDumper(scheduler)

    def run() -> None:
        if stop.is_set():
            return
        comparer.compare()
        dumper.dump_all()

    def on_signal(_signum, _frame) -> None:
        threading.Thread(target=run, name="cache-debugger", daemon=True).start()

    install(COMPARE_SIGNAL, on_signal)
