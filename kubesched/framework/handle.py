"""What the framework gives every plugin (upstream's framework.Handle).

A plugin is built as ``cls(args, handle)``. The handle of a running scheduler is its
profile's Framework (framework/runtime.py), which the scheduler (scheduler.py) gives the
shared parts it built once: the API client, the informers, the storage objects and the DRA
manager, the nominator, the extenders. A ``Handle()`` made alone is the null handle, for a
plugin outside a scheduler (unit tests, micro-benchmarks): no API client, informers that
were never started, no nominated or waiting pods, no other plugins to run.
"""

from __future__ import annotations

import threading
from typing import Callable

from kubesched.backend.informers import InformerRegistry
from kubesched.backend.pod_groups import PodGroups
from kubesched.backend.queue import Nominator
from kubesched.backend.volumes import VolumeObjects
from kubesched.client import ApiClient
from kubesched.dra.manager import DRAManager
from kubesched.events import EventRecorder
from kubesched.extender import HTTPExtender
from kubesched.framework.interface import CycleState, Status
from kubesched.framework.parallelize import Parallelizer
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.framework.waiting_pods import WaitingPod, WaitingPodsMap


class _NoEvents:
    def eventf(self, obj_raw: dict, type_: str, reason: str, action: str, message: str) -> None:
        pass


class Handle:
    """The shared parts, the cycle's snapshot, the waiting pods, and the plugin runners
    preemption needs (upstream Handle, PodNominator, PluginsRunner)."""

    def __init__(self, *, client: ApiClient | None = None, informers: InformerRegistry | None = None,
                 volumes: VolumeObjects | None = None, dra: DRAManager | None = None,
                 nominator: Nominator | None = None, event_recorder: EventRecorder | None = None,
                 extenders: list[HTTPExtender] | None = None, parallelism: int = 16,
                 snapshot: Snapshot | None = None, pod_groups: PodGroups | None = None,
                 async_preemption: bool = False, parallelizer: Parallelizer | None = None):
        # The API client (kubesched/client.py): bind, delete_pod, patch_pod_status, request, ...
        self.client = client
        # Listers of every watched resource: get(resource, key), list(resource, namespace).
        self.informers = informers if informers is not None else InformerRegistry(client)
        # PersistentVolumes, claims, StorageClasses and CSI objects, with the PV/PVC assume cache.
        self.volumes = volumes if volumes is not None else VolumeObjects(self.informers)
        # ResourceClaims (with the claim assume cache), ResourceSlices and DeviceClasses.
        self.dra = dra if dra is not None else DRAManager(self.informers)
        self.nominator = nominator if nominator is not None else Nominator()
        self.event_recorder: EventRecorder | _NoEvents = event_recorder if event_recorder is not None \
            else _NoEvents()
        # The scheduler's extenders (Handle.Extenders()): preemption asks them about victims.
        self.extenders: list[HTTPExtender] = list(extenders or ())
        self.parallelism = parallelism
        # Threads for plugins' parallel and background work (upstream Handle.Parallelizer()):
        # the scheduler's, shared by its profiles, or one started at its first use.
        self.parallelizer = parallelizer if parallelizer is not None else Parallelizer(parallelism, lazy=True)
        # The pods of each PodGroup (GenericWorkload): None with the gate off.
        self.pod_groups = pod_groups
        # Set when the scheduler stops; long waits in plugins (VolumeBinding's PreBind) end then.
        self.stopping = threading.Event()
        self.waiting_pods = WaitingPodsMap()
        self._snapshot = snapshot if snapshot is not None else Snapshot()
        # SchedulerAsyncPreemption (the gate, passed by the scheduler): preemption evicts its
        # victims in the background and the preemptor waits at PreEnqueue meanwhile.
        self.async_preemption = async_preemption
        # Activate (upstream PodActivator): the given pods leave the unschedulable pods or
        # backoff for the active queue; the scheduler sets it to its queue's.
        self.activate: Callable[[list[PodInfo]], None] = lambda pods: None

    def snapshot(self) -> Snapshot:
        """The snapshot of the cluster the current scheduling cycle reads."""
        return self._snapshot

    def set_snapshot(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    # -- waiting pods (IterateOverWaitingPods, GetWaitingPod, RejectWaitingPod) ---------------

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def iterate_over_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        self.waiting_pods.iterate(callback)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self.waiting_pods.get(uid)
        return waiting.reject("", "removed") if waiting is not None else False

    # -- running the profile's other plugins (PluginsRunner; the Framework runs its own) -----

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo,
                                               node_info: NodeInfo) -> Status | None:
        """Every Filter plugin on the node, counting the pods nominated to it (none here)."""
        return None

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None:
        return None

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None:
        return None

    def run_reserve_plugins_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None
