"""Micro-benchmark of an informer's memory across relists: is a relist's peak kept (a
high-water mark) or does each relist add to it (a leak)?

Not a test. Run from the repository root:

    .venv/bin/python tests/bench/micro/relist_memory.py [--pods 3500] [--page 500] [--changed 0.05]

It fills an Informer's store with pods as the watch process sends them (trimmed, encoded and
decoded by kubesched/jsoncodec.py, a page of listing per message), then relists it again and
again, each time with a share of the pods changed (a new resourceVersion), as after a
reconnect. It prints the process's RSS after the first listing and after each relist. The
soak's standbys stepped up at each API server or etcd restart; this shows what a relist
itself keeps.
"""

from __future__ import annotations

import argparse
import gc
import sys

sys.path.insert(0, ".")

from kubesched import jsoncodec  # noqa: E402
from kubesched.backend.informer import Informer  # noqa: E402
from kubesched.backend.trim import trim_metadata  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def pod(index: int, version: int) -> dict:
    """A running pod of a Deployment, about as large as the soak's."""
    condition = {"status": "True", "lastTransitionTime": "2026-11-30T05:00:00Z"}
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": f"pod-{index}", "namespace": "bench", "uid": f"uid-{index}",
                     "resourceVersion": str(version * 100_000 + index),
                     "labels": {"app": f"app-{index % 40}", "pod-template-hash": "5d8f7c"},
                     "creationTimestamp": "2026-11-30T05:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{index % 40}",
                                          "uid": f"rs-uid-{index % 40}", "controller": True}]},
        "spec": {"schedulerName": "default-scheduler", "nodeName": f"node-{index % 300}",
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}],
                 "terminationGracePeriodSeconds": 1, "priority": 0},
        "status": {"phase": "Running", "podIP": f"10.0.{index // 250}.{index % 250}",
                   "startTime": "2026-11-30T05:00:00Z",
                   "conditions": [{"type": kind, **condition}
                                  for kind in ("PodScheduled", "Initialized", "Ready", "ContainersReady")]},
    }


def listing(informer: Informer, pods: int, page: int, versions: list[int], resource_version: str) -> None:
    """One listing, a page per message, as the watch process sends it."""
    for start in range(0, pods, page):
        last = start + page >= pods
        message = jsoncodec.dumps([[1, "L", [trim_metadata(pod(i, versions[i])) for i in range(start, min(pods, start + page))],
                                    start == 0, resource_version if last else None]])
        record = jsoncodec.loads(message)[0]
        del message
        informer.apply_list_page(record[2], record[3], record[4])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--pods", type=int, default=3500)
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--changed", type=float, default=0.05, help="share of the pods changed per relist")
    parser.add_argument("--relists", type=int, default=9)
    args = parser.parse_args()
    informer = Informer(None, "/api/v1/pods", name="pods", on_add=lambda _o: None,
                        on_update=lambda _old, _new: None, on_delete=lambda _o: None)
    versions = [0] * args.pods
    print(f"start: RSS {rss_mb():.1f} MB")
    listing(informer, args.pods, args.page, versions, "0")
    gc.collect()
    first = rss_mb()
    print(f"first listing of {len(informer.store)} pods: RSS {first:.1f} MB")
    every = max(1, round(1 / args.changed)) if args.changed > 0 else 0
    for relist in range(1, args.relists + 1):
        if every:
            versions = [relist if i % every == 0 else v for i, v in enumerate(versions)]
        listing(informer, args.pods, args.page, versions, str(relist))
        gc.collect()
        print(f"relist {relist}: RSS {rss_mb():.1f} MB ({rss_mb() - first:+.1f} MB over the first listing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
