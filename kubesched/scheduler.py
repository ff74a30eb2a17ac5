"""The scheduler's assembly and its loop (upstream scheduler.go).

The path of one pod, file by file:
informer events -> cache and queue (eventhandlers.py)
-> schedule_one: PreFilter/Filter, PostFilter on failure, PreScore/Score, select a host,
   assume the pod onto the node in the cache, Reserve/Permit (schedule_one.py)
-> bind on a worker thread (PreBind/Bind/PostBind) while the next pod is scheduled
-> the Scheduled event; or, on failure, one handler: the FailedScheduling event, the
   PodScheduled=False condition, and the pod back in the queue.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubesched import features, klog, metrics
from kubesched.backend.api_dispatcher import APIDispatcher
from kubesched.backend.cache import SchedulerCache
from kubesched.backend.informers import InformerRegistry
from kubesched.backend.pod_groups import PodGroups
from kubesched.backend.queue import Nominator, SchedulingQueue
from kubesched.backend.trim import trim_metadata, trim_node, trim_pod
from kubesched.backend.volumes import VolumeObjects
from kubesched.client import ApiClient
from kubesched.config.types import KubeSchedulerConfiguration
from kubesched.dra.manager import DRAManager
from kubesched.eventhandlers import EventHandlers
from kubesched.events import EventBroadcaster
from kubesched.extender import build_extenders
from kubesched.framework.interface import ClusterEvent
from kubesched.framework.parallelize import Parallelizer
from kubesched.framework.runtime import Framework, build_frameworks
from kubesched.framework.snapshot import Snapshot
from kubesched.plugins.outoftree import full_registry
from kubesched.schedule_one import SchedulingCycle


class Scheduler(EventHandlers, SchedulingCycle):
    def __init__(self, cfg: KubeSchedulerConfiguration, client: ApiClient | None, *,
                 registry: dict[str, type] | None = None, event_client: ApiClient | None = None,
                 instance: str = "kubesched", bind_workers: int = 32, rng: random.Random | None = None,
                 feature_gates: dict[str, bool] | None = None):
        self.cfg = cfg
        self.feature_gates = features.resolve(feature_gates)
        self.client = client
        self.rng = rng or random.Random()
        self.cache = SchedulerCache()
        self.nominator = Nominator()
        self.snapshot = Snapshot()
        self.broadcaster = EventBroadcaster(event_client or client, instance)
        # What plugins share, built once and reached through each profile's Handle (upstream New).
        self.informers = InformerRegistry(client)
        self.volumes = VolumeObjects(self.informers)
        self.dra = DRAManager(self.informers)
        self.extenders = build_extenders(cfg.extenders)
        # GenericWorkload (beta, off by default): the pods of each PodGroup, for GangScheduling
        # and the pod group cycle; None keeps every pod on the one-pod path.
        self.pod_groups = PodGroups(lambda key: self.informers.get("podgroups", key), self.cache.is_assumed) \
            if self.feature_gates["GenericWorkload"] else None
        if self.pod_groups is not None:
            metrics.register_generic_workload()
        self.frameworks: dict[str, Framework] = {}
        # Every profile's plugins share these threads; started now, standing by or not, so the
        # thread count does not step up at the first preemption.
        self.parallelizer = Parallelizer(cfg.parallelism)
        for profile in cfg.profiles:
            self.frameworks.update(build_frameworks(
                [profile], full_registry() if registry is None else registry, client=client,
                informers=self.informers, volumes=self.volumes, dra=self.dra, nominator=self.nominator,
                extenders=self.extenders, event_recorder=self.broadcaster.recorder(profile.scheduler_name),
                parallelism=cfg.parallelism, batching=self.feature_gates["OpportunisticBatching"],
                pod_groups=self.pod_groups, async_preemption=self.feature_gates["SchedulerAsyncPreemption"],
                parallelizer=self.parallelizer))
        for fwk in self.frameworks.values():
            fwk.set_snapshot(self.snapshot)
        first = next(iter(self.frameworks.values()))
        plugin_events: dict[str, list[ClusterEvent]] = {}
        for fwk in self.frameworks.values():
            plugin_events.update(fwk.events_to_register())
        self.queue = SchedulingQueue(
            first.less, pre_enqueue=self._pre_enqueue, plugin_events=plugin_events,
            initial_backoff=cfg.pod_initial_backoff_seconds, max_backoff=cfg.pod_max_backoff_seconds,
            nominator=self.nominator)
        for fwk in self.frameworks.values():
            fwk.activate = self.queue.activate
        self.next_start_node_index = 0
        self.bind_pool = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="bind")
        self.api_dispatcher = APIDispatcher(workers=cfg.parallelism)
        self.binds_in_flight = 0
        self.binds_lock = threading.Lock()
        self._binding_goroutines = metrics.goroutines.labels("binding")  # resolved once, set per pod
        self._attempt_metrics: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.stop = threading.Event()
        # Extenders are sent whole pods and nodes, as kube-scheduler sends them.
        self.informers.request("nodes", trim_metadata if self.extenders else trim_node)
        self.informers.request("pods", trim_metadata if self.extenders else trim_pod)
        for resource in sorted(self.plugin_informers(plugin_events)):
            self.informers.request(resource)
        self.add_all_event_handlers(plugin_events)

    def run(self, stop: threading.Event) -> None:
        """Schedule pods until stop is set (call after the caches synced)."""
        self.stop = stop
        for fwk in self.frameworks.values():
            fwk.stopping = stop  # plugins waiting in PreBind (VolumeBinding) give up when set
        self.broadcaster.start()
        self.queue.run_flushers(stop)
        last_cleanup = time.monotonic()
        while not stop.is_set():
            pod = self.queue.pop(timeout=0.5)
            if time.monotonic() - last_cleanup > 1.0:
                self.cache.cleanup_expired_assumed_pods()
                last_cleanup = time.monotonic()
            if pod is None:
                continue
            try:
                self.schedule_one(pod)
            except Exception as err:  # noqa: BLE001 - one pod's bug must not stop the scheduler
                klog.error("Error scheduling pod; retrying", pod=pod.key, err=repr(err))
                pod.unschedulable_plugins = set()
                pod.pending_plugins = set()
                self.queue.add_unschedulable_if_not_present(pod)

    def wait_for_binds(self, timeout: float) -> bool:
        """Wait until no bind is queued or in flight (True), or timeout (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.binds_lock:
                if self.binds_in_flight == 0:
                    return True
            time.sleep(0.01)
        return False

    def shutdown(self, timeout: float = 5.0) -> None:
        self.queue.close()
        self.bind_pool.shutdown(wait=True, cancel_futures=False)
        self.api_dispatcher.close(timeout)
        self.parallelizer.shutdown(wait=False)
        self.broadcaster.shutdown(timeout)
