"""Micro-benchmark: what the scheduling queue costs per pod while many binds are in flight.

Not a test. Run from the repository root:

    .venv/bin/python tests/bench/micro/queue_attempts.py [--in-flight 30,300,1000] [--pods 2000]

With the given number of pods binding (their attempts open), each further pod is popped,
handed to binding, followed by one cluster event (kept for the open attempts), and the oldest
binding pod is bound, as binds end in about the order they began. Prints the time per pod, the
best of three runs. The queue must find the oldest open attempt as each bind ends; that cost
grew with the binds in flight while it was a minimum over all of them.
"""

from __future__ import annotations

import argparse
import sys
import time

sys.path.insert(0, ".")

from kubesched.backend.queue import SchedulingQueue  # noqa: E402
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource  # noqa: E402
from kubesched.framework.types import PodInfo  # noqa: E402

EVENT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)


def pod(number: int) -> PodInfo:
    return PodInfo({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"p{number}", "namespace": "default", "uid": f"uid-{number}",
                                 "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"containers": [{"name": "c", "image": "pause"}], "schedulerName": "default-scheduler"},
                    "status": {"phase": "Pending"}})


def per_pod_us(in_flight: int, pods: int) -> float:
    queue = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, plugin_events={"Filter": [EVENT]})
    for number in range(in_flight + pods):
        queue.add(pod(number))
    binding = []
    for _unused in range(in_flight):
        popped = queue.pop(timeout=0)
        queue.done(popped.uid)
        binding.append(popped)
        queue.move_all_to_active_or_backoff(EVENT)
    start = time.perf_counter()
    for _unused in range(pods):
        popped = queue.pop(timeout=0)
        queue.done(popped.uid)
        binding.append(popped)
        queue.move_all_to_active_or_backoff(EVENT)
        queue.delete(binding.pop(0))  # the oldest bind ends
    return (time.perf_counter() - start) / pods * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", default="30,300,1000")
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    for in_flight in (int(n) for n in args.in_flight.split(",")):
        best = min(per_pod_us(in_flight, args.pods) for _unused in range(3))
        print(f"{in_flight:5d} binds in flight: {best:6.1f} µs per pod (pop, bind, one event, the oldest bound)")


if __name__ == "__main__":
    main()
