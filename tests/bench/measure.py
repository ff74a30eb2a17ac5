"""Latency and throughput summaries of the bind times lab.pod_watch.PodWatch records."""

from __future__ import annotations

import bisect
import math


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile, the definition scheduler_perf's latency summaries use."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def scheduling_throughput(bound_times: list[float], start: float, interval_s: float = 1.0) -> float | None:
    """scheduler_perf's SchedulingThroughput average (throughputCollector.run and collect in
    test/integration/scheduler_perf/util.go), from sorted bind times: a sample every
    interval_s from start; the first sample that sees a pod bound only starts the clock; an
    interval in which no pod was bound is merged into the next, which counts once per
    interval it spans; the average is over those per-interval rates. Pods bound after the
    last sample are not counted, as upstream stops collecting once every pod is bound.
    None when the pods were bound within one interval (upstream reports no figure then)."""
    if not bound_times:
        return None
    rates: list[float] = []
    started_at: float | None = None
    last_count = 0
    skipped = 0
    tick = start + interval_s
    end = bound_times[-1]
    while tick <= end:
        count = bisect.bisect_right(bound_times, tick)
        if count and started_at is None:
            started_at, last_count = tick, count
        elif started_at is not None:
            if count == last_count:
                skipped += 1
            else:
                duration = tick - started_at
                rates.extend([(count - last_count) / duration] * (skipped + 1))
                started_at, last_count, skipped = tick, count, 0
        tick += interval_s
    return sum(rates) / len(rates) if rates else None
