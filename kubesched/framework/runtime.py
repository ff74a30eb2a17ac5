"""One Framework per profile: builds its plugins and runs them per extension point.

This is upstream's frameworkImpl (pkg/scheduler/framework/runtime/framework.go). It is also
the Handle every plugin of the profile receives (framework/handle.py), with the plugin
runners preemption needs working over the profile's own plugins.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping
from itertools import compress, repeat
from typing import Any, Callable

import numpy as np

from kubesched import klog, metrics
from kubesched.backend.informers import InformerRegistry
from kubesched.backend.pod_groups import PodGroups
from kubesched.backend.queue import Nominator
from kubesched.backend.volumes import VolumeObjects
from kubesched.client import ApiClient
from kubesched.config.types import EXTENSION_POINT_METHODS, EXTENSION_POINTS, PluginRef, Profile
from kubesched.dra.manager import DRAManager
from kubesched.events import EventRecorder
from kubesched.extender import HTTPExtender
from kubesched.framework.batch import OpportunisticBatch, sign_pod
from kubesched.framework.handle import Handle
from kubesched.framework.interface import (
    CODE_NAMES,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    ClusterEvent,
    Code,
    CycleState,
    NodeScore,
    PluginArgsError,
    PreFilterResult,
    Status,
)
from kubesched.framework.parallelize import Parallelizer
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.framework.waiting_pods import MAX_PERMIT_TIMEOUT, WaitingPod, permit_outcome


class FrameworkError(ValueError):
    """The profile cannot be built; field names the configuration path to fix."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def _ordered_unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


class Framework(Handle):
    """The plugins of one profile, ready to run. Also the plugins' Handle."""

    def __init__(self, profile: Profile, registry: dict[str, type], *, client: ApiClient | None = None,
                 informers: InformerRegistry | None = None, volumes: VolumeObjects | None = None,
                 dra: DRAManager | None = None, nominator: Nominator | None = None,
                 event_recorder: EventRecorder | None = None, extenders: list[HTTPExtender] | None = None,
                 parallelism: int = 16, batching: bool = False, pod_groups: PodGroups | None = None,
                 async_preemption: bool = False, parallelizer: Parallelizer | None = None):
        super().__init__(client=client, informers=informers, volumes=volumes, dra=dra, nominator=nominator,
                         event_recorder=event_recorder, extenders=extenders, parallelism=parallelism,
                         pod_groups=pod_groups, async_preemption=async_preemption, parallelizer=parallelizer)
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self.plugins: dict[str, Any] = {}
        self.score_weights: dict[str, int] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}
        self._build(profile, registry)
        # OpportunisticBatching (the feature gate, passed by the scheduler): None when off.
        self.batch: OpportunisticBatch | None = OpportunisticBatch(self) if batching else None
        self.signers = self._batchable_signers() if batching else None

    def _batchable_signers(self) -> list[Callable[[PodInfo], Any]] | None:
        """The sign_pod of every PreFilter, Filter, PreScore and Score plugin, or None when the
        profile cannot sign pods: an extender, or a plugin without sign_pod (upstream
        computeBatchablePlugins)."""
        if self.extenders:
            klog.info("Disabling signatures for profile because it has extenders configured.",
                      profile=self.profile_name)
            return None
        signers: dict[str, Callable[[PodInfo], Any]] = {}
        unsupported = []
        for plugin in self.pre_filter_plugins + self.filter_plugins + self.pre_score_plugins + self.score_plugins:
            if plugin.name in signers or plugin.name in unsupported:
                continue
            if hasattr(plugin, "sign_pod"):
                signers[plugin.name] = plugin.sign_pod
            else:
                unsupported.append(plugin.name)
        if unsupported:
            klog.info("Disabling signatures for profile because plugins do not support it.",
                      profile=self.profile_name, plugins=unsupported)
            return None
        return list(signers.values())

    def sign_pod(self, pod: PodInfo) -> str | None:
        """The pod's signature for batching, or None (upstream SignPod)."""
        return sign_pod(self.signers, pod) if self.signers is not None else None

    # -- construction (NewFramework + expandMultiPointPlugins) -------------------------------

    def _build(self, profile: Profile, registry: dict[str, type]) -> None:
        needed = _ordered_unique([p.name for ps in profile.plugins.values() for p in ps.enabled])
        for name in needed:
            cls = registry.get(name)
            if cls is None:
                raise FrameworkError(f"{profile.path}.plugins", f"unknown plugin {name!r}")
            args = profile.plugin_config.get(name)
            try:
                self.plugins[name] = cls(args, self)
            except PluginArgsError as err:
                where = profile.plugin_config_paths.get(name, f"{profile.path}.pluginConfig[{name}]")
                field = f"{where}.args.{err.field}" if err.field else f"{where}.args"
                raise FrameworkError(field, err.message) from None
            except Exception as err:  # noqa: BLE001 - an out-of-tree plugin's own bug, reported as config
                raise FrameworkError(f"{profile.path}.plugins",
                                     f"plugin {name!r} cannot start: {type(err).__name__}: {err}") from None
        points: dict[str, list[Any]] = {}
        for point in EXTENSION_POINTS:
            points[point] = self._expand(profile, point)
        self.pre_enqueue_plugins = points["preEnqueue"]
        self.queue_sort_plugins = points["queueSort"]
        self.pre_filter_plugins = points["preFilter"]
        self.filter_plugins = points["filter"]
        self.post_filter_plugins = points["postFilter"]
        self.pre_score_plugins = points["preScore"]
        self.score_plugins = points["score"]
        self.reserve_plugins = points["reserve"]
        self.permit_plugins = points["permit"]
        self.pre_bind_plugins = points["preBind"]
        self.bind_plugins = points["bind"]
        self.post_bind_plugins = points["postBind"]
        if len(self.queue_sort_plugins) != 1:
            raise FrameworkError(f"{profile.path}.plugins.queueSort",
                                 f"only one queue sort plugin required for profile with scheduler name "
                                 f"{profile.scheduler_name!r}, but got {len(self.queue_sort_plugins)}")
        if not self.bind_plugins:
            raise FrameworkError(f"{profile.path}.plugins.bind",
                                 f"at least one bind plugin is needed for profile with scheduler name "
                                 f"{profile.scheduler_name!r}")
        self._score_weights(profile.plugins["score"].enabled + profile.plugins["multiPoint"].enabled)
        self.less = self.queue_sort_plugins[0].less
        # Extension points with nothing to do are skipped whole in the hot path.
        self.pre_filter_extensions = [(p, p.pre_filter_extensions()) for p in self.pre_filter_plugins
                                      if hasattr(p, "pre_filter_extensions") and p.pre_filter_extensions()]

    def _expand(self, profile: Profile, point: str) -> list[Any]:
        """Specific extension-point entries plus multiPoint entries, in upstream's order."""
        method = EXTENSION_POINT_METHODS[point]
        explicit = profile.plugins[point]
        enabled = _ordered_unique([p.name for p in explicit.enabled])
        for name in enabled:
            if not hasattr(self.plugins[name], method):
                raise FrameworkError(f"{profile.path}.plugins.{point}",
                                     f"plugin {name!r} does not extend {point}")
        disabled = {p.name for p in explicit.disabled}
        if "*" in disabled:
            return [self.plugins[n] for n in enabled]
        overrides: list[str] = []
        multi: list[str] = []
        for ref in profile.plugins["multiPoint"].enabled:
            plugin = self.plugins[ref.name]
            if not hasattr(plugin, method) or ref.name in disabled:
                continue
            if ref.name in enabled:
                overrides.append(ref.name)
                continue
            if ref.name in multi:
                raise FrameworkError(f"{profile.path}.plugins.multiPoint",
                                     f"plugin {ref.name!r} already registered as {point}")
            multi.append(ref.name)
        ordered = overrides + multi + [n for n in enabled if n not in overrides]
        return [self.plugins[n] for n in ordered]

    def _score_weights(self, refs: list[PluginRef]) -> None:
        scorers = {p.name for p in self.score_plugins}
        for ref in refs:
            if ref.name not in scorers or ref.name in self.score_weights:
                continue
            self.score_weights[ref.name] = ref.weight or 1
        self.weighted_score_plugins = [(p, self.score_weights.get(p.name, 1)) for p in self.score_plugins]

    # -- queue-side extension points --------------------------------------------------------

    def events_to_register(self) -> dict[str, list[ClusterEvent]]:
        """Plugin name -> the cluster events that may make a pod it rejected schedulable."""
        events = {}
        for name, plugin in self.plugins.items():
            if hasattr(plugin, "events_to_register"):
                events[name] = list(plugin.events_to_register())
        return events

    def run_pre_enqueue_plugins(self, pod: PodInfo) -> Status | None:
        for plugin in self.pre_enqueue_plugins:
            status = plugin.pre_enqueue(pod)
            if status is not None and not status.is_success():
                status.plugin = plugin.name
                return status
        return None

    # -- scheduling cycle -------------------------------------------------------------------

    def run_pre_filter_plugins(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
                               ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Upstream RunPreFilterPlugins: (merged node restriction, status, plugins that restricted
        or rejected)."""
        start = time.perf_counter()
        result: PreFilterResult | None = None
        returned: Status | None = None
        restricting: list[str] = []
        rejecting: set[str] = set()
        try:
            for plugin in self.pre_filter_plugins:
                res, status = plugin.pre_filter(state, pod, nodes)
                if status is not None and status.code == Code.SKIP:
                    state.skip_filter_plugins.add(plugin.name)
                    continue
                if status is not None and not status.is_success():
                    status.plugin = plugin.name
                    if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        return None, status, {plugin.name}
                    if status.code == Code.UNSCHEDULABLE:
                        returned = status
                        rejecting.add(plugin.name)
                        continue
                    return None, Status(Code.ERROR, f'running PreFilter plugin "{plugin.name}": '
                                                    f"{status.message()}", plugin=plugin.name), set()
                if res is not None and not res.all_nodes():
                    restricting.append(plugin.name)
                    if result is None or result.all_nodes():
                        result = PreFilterResult(set(res.node_names or ()))
                    else:
                        result = PreFilterResult(result.node_names & set(res.node_names or ()))
                    if not result.node_names:
                        if len(restricting) == 1:
                            msg = f"node(s) didn't satisfy plugin {restricting[0]}"
                        else:
                            msg = f"node(s) didn't satisfy plugin(s) [{' '.join(restricting)}] simultaneously"
                        return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg), set(restricting)
            return result, returned, set(restricting) | rejecting
        finally:
            self._observe("PreFilter", returned, start)

    def active_filter_plugins(self, state: CycleState) -> list[Any]:
        skip = state.skip_filter_plugins
        return [p for p in self.filter_plugins if p.name not in skip] if skip else self.filter_plugins

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node_info: NodeInfo,
                           plugins: list[Any] | None = None) -> Status | None:
        # Hot path: called once per node per cycle.
        plugin = None
        try:
            for plugin in plugins if plugins is not None else self.active_filter_plugins(state):
                status = plugin.filter(state, pod, node_info)
                if status is not None and status.code != Code.SUCCESS:
                    if status.code not in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING):
                        status = Status(Code.ERROR, f'running "{plugin.name}" filter plugin: {status.message()}',
                                        error=status.error)
                    status.plugin = plugin.name
                    return status
        except Exception as err:  # noqa: BLE001 - a plugin bug fails this pod's cycle, not the scheduler
            name = getattr(plugin, "name", "?")
            return Status(Code.ERROR, f'running "{name}" filter plugin: {err}', plugin=name, error=err)
        return None

    def run_filter_plugins_on_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                                    plugins: list[Any]) -> tuple[list[NodeInfo], list[tuple[NodeInfo, Status]]]:
        """Filter many nodes plugin by plugin: (feasible nodes in order, (node, status) rejected).

        Each node gets the status of the first plugin rejecting it, exactly as per-node
        filtering gives; a plugin's ``filter_nodes`` (vectorised) is used when it has one.
        Hot path: one call per plugin per chunk of nodes instead of one per node and plugin.
        Raises FilterError when a plugin fails.
        """
        candidates = nodes
        rejected: list[tuple[NodeInfo, Status]] = []
        for plugin in plugins:
            if not candidates:
                break
            batch = getattr(plugin, "filter_nodes", None)
            try:
                if batch is not None:
                    results = batch(state, pod, candidates)
                else:
                    check = plugin.filter
                    results = [check(state, pod, node) for node in candidates]
            except Exception as err:  # noqa: BLE001
                raise FilterError(f'running "{plugin.name}" filter plugin: {err}') from err
            if results.count(None) == len(results):
                continue  # hot path: the plugin passed every node
            # Statuses are mostly a few shared instances: each distinct one is checked once.
            failed = [(node, status) for node, status in zip(candidates, results) if status is not None]
            distinct = {id(status): status for _unused, status in failed}.values()
            if any(status.code == Code.SUCCESS for status in distinct):
                failed = [(node, status) for node, status in failed if status.code != Code.SUCCESS]
                refused = {id(node) for node, _unused in failed}
                keep = [node for node in candidates if id(node) not in refused]
            else:
                keep = list(compress(candidates, map(operator.is_, results, repeat(None))))
            for status in distinct:
                if status.code == Code.SUCCESS:
                    continue
                if status.code not in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING):
                    raise FilterError(f'running "{plugin.name}" filter plugin: {status.message()}')
                status.plugin = plugin.name
            rejected.extend(failed)
            candidates = keep
        return candidates, rejected

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo, node_info: NodeInfo,
                                               plugins: list[Any] | None = None) -> Status | None:
        """Filters run twice when higher-or-equal priority pods are nominated to the node:
        with them added (they will take the room) and without (affinity may need them absent)."""
        nominated = self.nominator.nominated_pods_for_node(node_info.name)
        if not nominated:
            return self.run_filter_plugins(state, pod, node_info, plugins)
        added, state_with, node_with = self._add_nominated_pods(state, pod, node_info, nominated)
        if isinstance(added, Status):
            return added
        status = self.run_filter_plugins(state_with, pod, node_with, plugins)
        if status is not None and status.code == Code.ERROR:
            return status
        if added and (status is None or status.is_success()):
            status = self.run_filter_plugins(state, pod, node_info, plugins)
        return status

    def _add_nominated_pods(self, state: CycleState, pod: PodInfo, node_info: NodeInfo,
                            nominated: list[PodInfo]) -> tuple[Any, CycleState, NodeInfo]:
        node_out = node_info.clone()
        state_out = state.clone()
        added = False
        for other in nominated:
            if other.priority >= pod.priority and other.uid != pod.uid:
                node_out.add_pod(other)
                status = self.run_pre_filter_extension_add_pod(state_out, pod, other, node_out)
                if status is not None and not status.is_success():
                    return status, state, node_info
                added = True
        return added, state_out, node_out

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None:
        return self._run_pre_filter_extension("add_pod", "AddPod", state, pod, pod_to_add, node_info)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None:
        return self._run_pre_filter_extension("remove_pod", "RemovePod", state, pod, pod_to_remove, node_info)

    def _run_pre_filter_extension(self, method: str, upstream_name: str, state: CycleState, pod: PodInfo,
                                  other: PodInfo, node_info: NodeInfo) -> Status | None:
        """Tell every PreFilter plugin's extensions that `other` joins or leaves node_info."""
        for plugin, ext in self.pre_filter_extensions:
            if plugin.name in state.skip_filter_plugins:
                continue
            status = getattr(ext, method)(state, pod, other, node_info)
            if status is not None and not status.is_success():
                return Status(Code.ERROR, f'running {upstream_name} on PreFilter plugin "{plugin.name}": '
                                          f"{status.message()}", plugin=plugin.name)
        return None

    def run_post_filter_plugins(self, state: CycleState, pod: PodInfo,
                                statuses: dict[str, Status]) -> tuple[str | None, Status]:
        """Upstream RunPostFilterPlugins: the first success wins; otherwise the reasons of all
        rejecting plugins, attributed to the first."""
        start = time.perf_counter()
        reasons: list[str] = []
        rejector = ""
        nominated: str | None = None
        final: Status | None = None
        try:
            for plugin in self.post_filter_plugins:
                # Upstream counts every PostFilter (preemption) run as an attempt.
                metrics.preemption_attempts.inc()
                node, status = plugin.post_filter(state, pod, statuses)
                if status is None or status.is_success():
                    final = status or Status()
                    return node, final
                if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    status.plugin = plugin.name
                    final = status
                    return node, status
                if not status.is_rejected():
                    final = Status(Code.ERROR, status.message(), plugin=plugin.name, error=status.error)
                    return None, final
                if node is not None:  # "" clears a nomination (ModeOverride); None leaves it (ModeNoop)
                    nominated = node
                reasons.extend(status.reasons)
                rejector = rejector or plugin.name
            final = Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)
            return nominated, final
        finally:
            self._observe("PostFilter", final, start)

    def run_pod_group_post_filter_plugins(self, pod_group: dict, members: list[PodInfo], states: list[CycleState],
                                          simulate: Callable) -> tuple[dict[str, str], Status]:
        """Upstream RunPodGroupPostFilterPlugins over the PostFilter plugins that have a pod
        group part (pod_group_post_filter): ({member uid: nominated node}, status). states are
        the cycle states of the members the cycle tried, in order (upstream's
        PodGroupCycleState); simulate places the group on the snapshot as it stands
        (DefaultPreemption's what-if)."""
        start = time.perf_counter()
        final = Status(Code.UNSCHEDULABLE)
        try:
            reasons: list[str] = []
            rejector = ""
            for plugin in self.post_filter_plugins:
                if not hasattr(plugin, "pod_group_post_filter"):
                    continue
                nominations, status = plugin.pod_group_post_filter(pod_group, members, states, simulate)
                if status.is_success() or status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    final = status.with_plugin(plugin.name)
                    return nominations, final
                if status.code != Code.UNSCHEDULABLE:
                    final = Status(Code.ERROR, f'error in "{plugin.name}" PodGroupPostFilter plugins: '
                                               f'{status.message()}', plugin=plugin.name)
                    return {}, final
                reasons += status.reasons
                rejector = rejector or plugin.name
            final = Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)
            return {}, final
        finally:
            self._observe("PodGroupPostFilter", final, start)

    def run_pre_score_plugins(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        start = time.perf_counter()
        failed: Status | None = None
        try:
            for plugin in self.pre_score_plugins:
                status = plugin.pre_score(state, pod, nodes)
                if status is not None and status.code == Code.SKIP:
                    state.skip_score_plugins.add(plugin.name)
                    continue
                if status is not None and not status.is_success():
                    failed = Status(Code.ERROR, f'running PreScore plugin "{plugin.name}": {status.message()}',
                                    plugin=plugin.name, error=status.error)
                    return failed
            return None
        finally:
            self._observe("PreScore", failed, start)

    def run_score_plugins(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                          breakdown: dict[str, Mapping[str, int]] | None = None,
                          raw_scores: dict[str, list[int]] | None = None) -> list[int]:
        """Weighted total score per node, aligned with nodes. With breakdown, also record
        plugin -> node -> weighted score (for `kubesched explain`); with raw_scores, each
        plugin's scores before normalising (OpportunisticBatching keeps them). Raises ScoreError."""
        start = time.perf_counter()
        try:
            raw = self.run_raw_score_plugins(state, pod, nodes)
            if raw_scores is not None:
                raw_scores.update((name, list(values)) for name, values in raw.items())
            return self.normalize_scores(state, pod, nodes, raw, breakdown)
        finally:
            self._observe("Score", None, start)

    def run_raw_score_plugins(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> dict[str, Any]:
        """Each non-skipped Score plugin's scores of the nodes, before normalising. Raises ScoreError."""
        raw: dict[str, Any] = {}
        skip = state.skip_score_plugins
        for plugin, _weight in self.weighted_score_plugins:
            if plugin.name in skip:
                continue
            try:
                # A plugin may score all nodes at once (vectorised); else node by node.
                if hasattr(plugin, "score_nodes"):
                    raw[plugin.name] = plugin.score_nodes(state, pod, nodes)
                else:
                    score = plugin.score
                    raw[plugin.name] = [score(state, pod, node) for node in nodes]
            except Exception as err:  # noqa: BLE001
                raise ScoreError(f'running Score plugins: plugin "{plugin.name}" failed with: {err}') from err
        return raw

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], raw_scores: dict[str, Any],
                         breakdown: dict[str, Mapping[str, int]] | None = None) -> list[int]:
        """Normalise each plugin's raw scores of the nodes and sum them by weight. Raises ScoreError."""
        totals = np.zeros(len(nodes), dtype=np.int64)
        scores: list[NodeScore] | None = None
        names: list[str] | None = None
        for plugin, weight in self.weighted_score_plugins:
            raw = raw_scores.get(plugin.name)
            if raw is None:
                continue
            if hasattr(plugin, "normalize_scores"):
                # hot path: normalising plain ints, no NodeScore objects
                raw = plugin.normalize_scores(state, pod, raw)
            elif hasattr(plugin, "normalize_score"):
                # One NodeScore list per cycle, refilled per plugin: building objects per
                # node and plugin was the largest cost of scoring.
                if scores is None:
                    scores = [NodeScore(node.name, value) for node, value in zip(nodes, raw)]
                else:
                    for entry, value in zip(scores, raw):
                        entry.score = value
                status = plugin.normalize_score(state, pod, scores)
                if status is not None and not getattr(status, "is_success", lambda: True)():
                    raise ScoreError(f'running Normalize on Score plugins: plugin "{plugin.name}" '
                                     f"failed with: {status.message()}")
                raw = [s.score for s in scores]
            if not len(raw):
                continue
            values = _score_array(raw)
            if values.max() > MAX_NODE_SCORE or values.min() < MIN_NODE_SCORE:
                value = next(v for v in raw if v > MAX_NODE_SCORE or v < MIN_NODE_SCORE)
                raise ScoreError(f'applying score defaultWeights on Score plugins: plugin '
                                 f'"{plugin.name}" returns an invalid score {value}, it should in the '
                                 f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
            totals += values.astype(np.int64) * weight
            if breakdown is not None:
                if names is None:
                    names = [node.name for node in nodes]
                breakdown[plugin.name] = NodeScores(names, values.astype(np.int64) * weight)
        return totals.tolist()

    def run_reserve_plugins_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.reserve_plugins:
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - the pod is assumed: the caller must undo, not unwind
                status = Status(Code.ERROR, repr(err), error=err)
            if status is not None and not status.is_success():
                status.plugin = plugin.name
                if not status.is_rejected():
                    status = Status(Code.ERROR, f'running Reserve plugin "{plugin.name}": {status.message()}',
                                    plugin=plugin.name)
                return status
        return None

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        # Reverse order, as upstream, so each plugin undoes after those reserved after it. A
        # plugin that raises must not keep the others from undoing, nor the caller from
        # forgetting the assumed pod (upstream's Unreserve cannot fail).
        for plugin in reversed(self.reserve_plugins):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin's bug, or an API call that found no server
                klog.error("Unreserve failed; the other plugins still undo theirs", plugin=plugin.name,
                           pod=pod.key, node=node_name, err=repr(err))

    def run_permit_plugins(self, state: CycleState, pod: PodInfo, node_name: str
                           ) -> tuple[Status | None, dict[str, float]]:
        """Upstream RunPermitPlugins: (status, plugin -> wait seconds). A plugin's permit
        returns a Status or (Status, timeout seconds); Wait from any plugin and a rejection
        from none gives a Wait status, and the caller makes the pod a waiting pod."""
        if not self.permit_plugins:
            return None, {}  # hot path: the default profile has no Permit plugin
        start = time.perf_counter()
        wait_status: Status | None = None
        wait_times: dict[str, float] = {}
        status: Status | None = None
        try:
            for plugin in self.permit_plugins:
                try:
                    result = plugin.permit(state, pod, node_name)
                except Exception as err:  # noqa: BLE001 - the pod is assumed: the caller must undo, not unwind
                    result = Status(Code.ERROR, repr(err), error=err)
                status, timeout = result if isinstance(result, tuple) else (result, 0.0)
                if status is None or status.is_success():
                    continue
                status.plugin = plugin.name
                if status.is_rejected():
                    return status, {}
                if status.code == Code.WAIT:
                    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout or 0)
                    wait_times[plugin.name] = min(seconds, MAX_PERMIT_TIMEOUT)
                    wait_status = status
                    continue
                status = Status(Code.ERROR, f'running Permit plugin "{plugin.name}": {status.message()}',
                                plugin=plugin.name, error=status.error)
                return status, {}
            if wait_status is not None:
                wait_status.reasons.append("one or more plugins asked to wait and no plugin rejected pod")
                status = wait_status
                return wait_status, wait_times
            status = None
            return None, {}
        finally:
            self._observe("Permit", status, start)

    # -- waiting pods (the Handle reads them: framework/handle.py) -----------------------------

    def add_waiting_pod(self, pod: PodInfo, plugins_wait_time: dict[str, float]) -> WaitingPod:
        waiting = WaitingPod(pod, plugins_wait_time)
        self.waiting_pods.add(waiting)
        return waiting

    def finish_waiting(self, waiting: WaitingPod) -> Status | None:
        """Remove a resolved waiting pod and give WaitOnPermit's result for it."""
        self.waiting_pods.remove(waiting.pod.uid)
        status = waiting.status() or Status(Code.ERROR, "waiting pod finished without a signal")
        metrics.permit_wait_duration.labels(CODE_NAMES[status.code]).observe(time.monotonic() - waiting.since)
        return permit_outcome(status)

    def run_pre_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = None
        try:
            for plugin in self.pre_bind_plugins:
                status = plugin.pre_bind(state, pod, node_name)
                if status is not None and not status.is_success() and status.code != Code.SKIP:
                    status = Status(Code.ERROR, f'running PreBind plugin "{plugin.name}": {status.message()}',
                                    plugin=plugin.name, error=status.error)
                    return status
            status = None
            return None
        finally:
            self._observe("PreBind", status, start)

    def run_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status: Status | None = Status(Code.SKIP)
        try:
            for plugin in self.bind_plugins:
                status = plugin.bind(state, pod, node_name)
                if status is not None and status.code == Code.SKIP:
                    continue
                if status is not None and not status.is_success():
                    status = Status(Code.ERROR, f'running Bind plugin "{plugin.name}": {status.message()}',
                                    plugin=plugin.name, error=status.error)
                return status
            return status
        finally:
            self._observe("Bind", status, start)

    def run_post_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self.post_bind_plugins:
            plugin.post_bind(state, pod, node_name)

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def has_filter_plugins(self) -> bool:
        return bool(self.filter_plugins)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)

    def _observe(self, point: str, status: Status | None, start: float) -> None:
        code = "Success" if status is None or status.is_success() else CODE_NAMES[status.code]
        self.observe_duration(point, code, start)

    def observe_duration(self, point: str, code: str, start: float) -> None:
        """framework_extension_point_duration_seconds{point, code, profile} since start."""
        child = self._duration_children.get((point, code))
        if child is None:  # labels() costs a lock and a lookup; each series is resolved once
            child = self._duration_children[(point, code)] = \
                metrics.framework_extension_point_duration.labels(point, code, self.profile_name)
        child.observe(time.perf_counter() - start)


def _score_array(raw: Any) -> np.ndarray:
    """Scores (ints, as upstream's int64) as an int64 array; ints beyond int64 as exact Python
    ints, which the range check then rejects."""
    if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu":
        return raw
    try:
        return np.fromiter(raw, dtype=np.int64, count=len(raw))
    except OverflowError:
        return np.asarray([int(v) for v in raw], dtype=object)


class NodeScores(Mapping):
    """node name -> one plugin's weighted score: the scored nodes' names and an array of their
    scores, read as a dict. Building a dict of every node cost whatif (which reads two nodes of
    each) a third of its scoring; the first few names are found by a C-level scan of the names,
    later ones (kubesched explain reads them all) by an index built once."""

    __slots__ = ("names", "values", "_index", "_scans")
    SCANS = 4

    def __init__(self, names: list[str], values: np.ndarray):
        self.names = names
        self.values = values
        self._index: dict[str, int] | None = None
        self._scans = 0

    def _position(self, name: str) -> int:
        if self._index is None:
            self._scans += 1
            if self._scans <= self.SCANS:
                try:
                    return self.names.index(name)
                except ValueError:
                    raise KeyError(name) from None
            self._index = {node: i for i, node in enumerate(self.names)}
        return self._index[name]

    def __getitem__(self, name: str) -> int:
        return int(self.values[self._position(name)])

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


class ScoreError(RuntimeError):
    """A score plugin misbehaved (score out of range, failed normalisation)."""


class FilterError(RuntimeError):
    """A filter plugin failed (an error rather than a rejection)."""


def build_frameworks(profiles: list[Profile], registry: dict[str, type], **handle: Any) -> dict[str, Framework]:
    """schedulerName -> Framework for every profile; FrameworkError names the field to fix."""
    return {p.scheduler_name: Framework(p, registry, **handle) for p in profiles}
