"""Micro-benchmark: the memory a leader's event cache keeps per event.

Not a test. Run from the repository root:

    .venv/bin/python tests/bench/micro/event_cache.py [--events 20000]

Records one Scheduled event per pod through the recorder, as a leader does for every pod it
binds, on a client that accepts every write, and reports what stays allocated (tracemalloc)
once the queue is drained: the cache's entries, their keys and notes, with the pods still there
(bound) and gone (deleted, their strings kept only by what the cache holds). client-go keeps an event
6 to 12 minutes (tools/events' finishTime), so a leader binding 50 pods a second holds 18,000
to 36,000 of them; what each costs is what the leader's memory grows by after it takes over.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc

sys.path.insert(0, ".")

from kubesched.events import EventBroadcaster  # noqa: E402


class AcceptingClient:
    def create_event(self, namespace, event):
        return event

    def patch_event(self, namespace, name, patch):
        return patch


def pod(number: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-7c5d8f9b6d-{number:05x}", "namespace": "default",
                         "uid": f"3f1c2a9e-5b7d-4e21-9c0a-{number:012x}", "resourceVersion": str(100000 + number)}}


def bytes_per_event(events: int, pods_gone: bool) -> tuple[float, int]:
    broadcaster = EventBroadcaster(AcceptingClient(), "master-1")
    recorder = broadcaster.recorder("default-scheduler")
    pods = [pod(number) for number in range(events)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for number in range(events):
        raw = pods[number]
        if pods_gone:  # the pod's strings are made under the trace and dropped with the pod
            raw = pods[number] = pod(number)
            pods[number] = None
        recorder.eventf(raw, "Normal", "Scheduled", "Binding",
                        f"Successfully assigned default/{raw['metadata']['name']} to node-{number % 300}")
        broadcaster._send(*broadcaster.pending.get_nowait())
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return kept / events, len(broadcaster.cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    started = time.perf_counter()
    for pods_gone in (False, True):
        per_event, cached = bytes_per_event(args.events, pods_gone)
        print(f"{args.events} Scheduled events recorded, {cached} cached, pods {'gone' if pods_gone else 'there'}: "
              f"{per_event:.0f} bytes kept per event ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
