"""OpportunisticBatching (beta, on by default in v1.37): a pod identical to the one scheduled
just before it takes the next node of that pod's ranking instead of filtering and scoring
every node again (upstream framework/runtime/batch.go, the Sign extension point and
framework/sorted_nodes.go).

Identical means the same signature: a JSON object of every field the profile's PreFilter,
Filter, PreScore and Score plugins read, each plugin naming its fields (its sign_pod, as each
v1.37 plugin's SignPod). A plugin that cannot sign a pod (topology spread, inter-pod
affinity, DRA claims) makes it unbatchable; a plugin with no signer, or an extender, turns
batching off for the profile.

The ranking a pod leaves behind is reused by the next pod only when (batchStateCompatible,
refreshHintCandidates):
- the next pod is the very next scheduling cycle (no pod of another profile, no failed or
  skipped pod in between), is not nominated, and has the same signature;
- the ranking is younger than 500 ms;
- the node the previous pod took still exists. If the pod no longer fits there, the next node
  of the ranking is the hint; if it still fits, that node is scored afresh against the kept
  raw scores and put back into the ranking before the hint is taken.
The hint is then filtered like a nominated node; if it fails, the pod is scheduled normally.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from kubesched import metrics
from kubesched.framework.interface import CycleState

MAX_BATCH_AGE_S = 0.5

# batch_attempts_total results and batch_cache_flushed_total reasons (upstream metrics.go).
HINT_USED, HINT_NOT_USED, NO_HINT = "hint_used", "hint_not_used", "no_hint"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_POD_FAILED = "pod_failed"
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_EXPIRED = "expired"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_FILTER_ERROR = "filter_error"
FLUSH_PRESCORE_ERROR = "prescore_error"
FLUSH_RESCORE_ERROR = "rescore_error"
FLUSH_NORMALIZE_ERROR = "normalize_error"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"

SCHEDULER_NAME_KEY = "v1.Pod.Spec.SchedulerName"


def canonical(value: Any) -> str:
    """JSON with sorted keys: equal values give equal text, as Go's json.Marshal of a map."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ScoredNode:
    """A node of a kept ranking: its name, its raw score per plugin and its weighted total."""

    __slots__ = ("name", "raw", "total")

    def __init__(self, name: str, raw: dict[str, int], total: int):
        self.name = name
        self.raw = raw
        self.total = total


class SortedScoredNodes:
    """Nodes by total score, highest first, popped as Go's container/heap pops them (upstream
    sortedNodeScores): equal totals come out in the heap's order, which the first pop shares
    with select_host."""

    def __init__(self, nodes: list[ScoredNode]):
        self.heap = nodes
        for index in range(len(nodes) // 2 - 1, -1, -1):
            self._down(index, len(nodes))

    def _down(self, index: int, size: int) -> None:
        heap = self.heap
        while True:
            child = 2 * index + 1
            if child >= size:
                return
            right = child + 1
            if right < size and heap[right].total > heap[child].total:
                child = right
            if not heap[child].total > heap[index].total:
                return
            heap[index], heap[child] = heap[child], heap[index]
            index = child

    def pop(self) -> ScoredNode:
        heap = self.heap
        last = len(heap) - 1
        heap[0], heap[last] = heap[last], heap[0]
        self._down(0, last)
        return heap.pop()

    def __len__(self) -> int:
        return len(self.heap)


class UnrankedNodes:
    """The rest of a ranking an unbatchable pod leaves: only how many nodes it held matters
    (it tells pod_not_batchable from empty_list), so it is never built."""

    def __init__(self, count: int):
        self.count = count

    def __len__(self) -> int:
        return self.count


class OpportunisticBatch:
    """One profile's kept ranking and the cycle that left it (upstream OpportunisticBatch)."""

    def __init__(self, fwk):
        self.fwk = fwk
        self.profile = fwk.profile_name
        self.sorted_nodes: SortedScoredNodes | None = None
        self.signature: str | None = None
        self.created = 0.0
        self.last_cycle = -1
        self.last_chosen = ""
        self.last_succeeded = False
        self.batched_pods = 0  # pods placed on a hint, for tests
        self._flushed: dict[str, Any] = {}
        self._attempts = {result: metrics.batch_attempts.labels(self.profile, result)
                          for result in (HINT_USED, HINT_NOT_USED, NO_HINT)}

    def _flush(self, reason: str) -> None:
        counter = self._flushed.get(reason)
        if counter is None:
            counter = self._flushed[reason] = metrics.batch_cache_flushed.labels(self.profile, reason)
        counter.inc()

    def get_node_hint(self, pod, signature: str | None, state: CycleState, cycle: int) -> str:
        """The node this pod should try first, or "" (upstream GetNodeHint)."""
        start = time.perf_counter()
        hint = ""
        if self._compatible(pod, signature, cycle) and self._refresh_candidates(pod, state, cycle):
            hint = self.sorted_nodes.pop().name
        if not hint:
            self._attempts[NO_HINT].inc()
        metrics.get_node_hint_duration.labels("hint" if hint else "no_hint", self.profile).observe(
            time.perf_counter() - start)
        return hint

    def store_schedule_results(self, signature: str | None, hinted: str, chosen: str,
                               other_nodes: SortedScoredNodes | UnrankedNodes | None, cycle: int) -> None:
        """Remember this cycle, and the rest of its ranking when the next pod may use it."""
        start = time.perf_counter()
        self.last_cycle, self.last_chosen, self.last_succeeded = cycle, chosen, True
        try:
            if hinted == chosen:
                self._attempts[HINT_USED].inc()
                self.batched_pods += 1
                return
            if hinted:
                self._attempts[HINT_NOT_USED].inc()
            if signature is not None and other_nodes is not None and len(other_nodes) > 0:
                self.sorted_nodes, self.signature, self.created = other_nodes, signature, time.monotonic()
                return
            self._flush(FLUSH_EMPTY_LIST if other_nodes is None or len(other_nodes) == 0 else FLUSH_POD_NOT_BATCHABLE)
            self.sorted_nodes = self.signature = None
        finally:
            metrics.store_schedule_results_duration.labels(self.profile).observe(time.perf_counter() - start)

    def _compatible(self, pod, signature: str | None, cycle: int) -> bool:
        if self.sorted_nodes is None or len(self.sorted_nodes) == 0:
            return False
        reason = None
        if cycle != self.last_cycle + 1:
            reason = FLUSH_POD_SKIPPED
        elif not self.last_succeeded:
            reason = FLUSH_POD_FAILED
        elif pod.nominated_node_name:
            reason = FLUSH_POD_NOMINATED
        elif signature is None or signature != self.signature:
            reason = FLUSH_POD_INCOMPATIBLE
        elif time.monotonic() > self.created + MAX_BATCH_AGE_S:
            reason = FLUSH_EXPIRED
        if reason is not None:
            self._flush(reason)
            return False
        return True

    def _refresh_candidates(self, pod, state: CycleState, cycle: int) -> bool:
        """The previous pod's node is full for this pod: the ranking holds. It still fits: score
        it afresh among the kept nodes (upstream rescoreHintedNode)."""
        node = self.fwk.snapshot().get(self.last_chosen)
        if node is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        status = self.fwk.run_filter_plugins(state, pod, node)
        if status is None or status.is_success():
            return self._rescore(pod, state, node)
        if not status.is_rejected():
            self._flush(FLUSH_FILTER_ERROR)
            return False
        return True

    def _rescore(self, pod, state: CycleState, chosen_node) -> bool:
        start = time.perf_counter()
        metrics.batch_rescore_attempts.labels(self.profile).inc()
        try:
            snapshot = self.fwk.snapshot()
            kept = list(self.sorted_nodes.heap)
            nodes = [snapshot.get(entry.name) for entry in kept]
            if any(node is None for node in nodes):
                self._flush(FLUSH_NODE_MISSING)
                return False
            nodes.append(chosen_node)
            rescore_state = state.clone()
            status = self.fwk.run_pre_score_plugins(rescore_state, pod, nodes)
            if status is not None and not status.is_success():
                self._flush(FLUSH_PRESCORE_ERROR)
                return False
            try:
                fresh = self.fwk.run_raw_score_plugins(rescore_state, pod, [chosen_node])
            except Exception:  # noqa: BLE001 - a failed rescore drops the ranking, as upstream
                self._flush(FLUSH_RESCORE_ERROR)
                return False
            entries = kept + [ScoredNode(chosen_node.name, {name: raw[0] for name, raw in fresh.items()}, 0)]
            plugins = list(fresh)
            raw = {name: [entry.raw.get(name, 0) for entry in entries] for name in plugins}
            try:
                totals = self.fwk.normalize_scores(rescore_state, pod, nodes, raw)
            except Exception:  # noqa: BLE001
                self._flush(FLUSH_NORMALIZE_ERROR)
                return False
            for entry, total in zip(entries, totals):
                entry.total = total
            self.sorted_nodes = SortedScoredNodes(entries)
            return True
        finally:
            metrics.batch_rescore_duration.labels(self.profile).observe(time.perf_counter() - start)


def ranked_nodes(names: list[str], raw: dict[str, list[int]], totals: list[int]) -> SortedScoredNodes:
    return SortedScoredNodes([ScoredNode(name, {plugin: values[i] for plugin, values in raw.items()}, total)
                              for i, (name, total) in enumerate(zip(names, totals))])


def sign_pod(signers: list[Callable[[Any], list[tuple[str, Any]] | None]], pod) -> str | None:
    """The pod's signature, or None when a plugin cannot sign it (upstream SignPod).

    A signer that refuses moves to the front of the list: a profile's unsignable pods are
    mostly refused by one plugin (PodTopologySpread under system default spreading: every
    pod), which then costs one call instead of every signer before it. The signature is the
    same in any order."""
    signature: dict[str, Any] = {SCHEDULER_NAME_KEY: pod.scheduler_name}
    for index, signer in enumerate(signers):
        fragments = signer(pod)
        if fragments is None:
            if index:
                signers.insert(0, signers.pop(index))
            return None
        signature.update(fragments)
    return canonical(signature)
