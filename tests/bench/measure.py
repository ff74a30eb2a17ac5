"""Latency summaries of the bind times lab.pod_watch.PodWatch records."""

from __future__ import annotations

import math


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile, the definition scheduler_perf's latency summaries use."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]
