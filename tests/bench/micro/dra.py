"""Micro-benchmark of DynamicResources in kubesched's scheduling cycle, no API server: the shape
of SchedulingWithResourceClaimTemplate (one ResourceSlice of 8 GPUs per node, one DeviceClass
with a CEL selector, every pod's claim made from a template and allocated by the scheduler).

Not a test. Run it from the repository root:

    .venv/bin/python tests/bench/micro/dra.py [--nodes 500] [--pods 2000]

The scheduler's informers are fed the objects as a watch would bring them; each pod's
claim is added just before the pod is scheduled (as the resourceclaim controller makes it),
and PreBind's claim writes are answered at once, so the allocated claims pile up in the
manager's assume cache as they do on a real cluster. It prints the mean CPU and wall
milliseconds per pod, warm-up pods excluded.
"""

from __future__ import annotations

import argparse
import copy
import random
import resource
import sys
import time

sys.path.insert(0, ".")
sys.path.insert(0, "tests/bench/micro")

from schedule_one import node_manifest  # noqa: E402

from kubesched import gctuning  # noqa: E402
from kubesched.config import parse_config  # noqa: E402
from kubesched.framework.types import PodInfo  # noqa: E402
from kubesched.scheduler import Scheduler  # noqa: E402
from lab.fake_dra_driver import device_class, gpu_slice  # noqa: E402
from tests.bench.loop import NullClient  # noqa: E402

CLASS = "bench-gpu.example.com"


class ClaimWritingClient(NullClient):
    """NullClient that also answers PreBind's claim writes with the claim, one version newer."""

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        out = copy.deepcopy(body or {})
        meta = out.setdefault("metadata", {})
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 1) + 1)
        return out


def pod_and_claim(index: int) -> tuple[dict, dict]:
    name, uid = f"pod-{index:06d}", f"uid-{index:06d}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "bench", "uid": uid, "resourceVersion": "1",
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"schedulerName": "default-scheduler", "priority": 0,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "bench-one-gpu"}]},
           "status": {"phase": "Pending",
                      "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{name}-gpu", "namespace": "bench", "uid": f"claim-{uid}", "resourceVersion": "1",
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid,
                                               "controller": True}]},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}
    return pod, claim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--default-gc", action="store_true",
                        help="leave Python's garbage collector as it comes (kubesched tunes it: kubesched/gctuning.py)")
    opts = parser.parse_args()
    if not opts.default_gc:
        gctuning.tune()

    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{}]})
    client = ClaimWritingClient()
    sched = Scheduler(cfg, client, rng=random.Random(opts.seed))
    informers, manager = sched.informers, sched.dra
    informers.put("deviceclasses", device_class(CLASS))
    for i in range(opts.nodes):
        node = node_manifest(i, "basic")
        sched.on_node_add(node)
        body = gpu_slice(node["metadata"]["name"], 8)
        body["metadata"]["resourceVersion"] = "1"
        informers.put("resourceslices", body)
    manager.list_slices()
    if not opts.default_gc:
        gctuning.freeze_synced()

    def run(first: int, count: int) -> tuple[float, float]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for index in range(first, first + count):
            pod, claim = pod_and_claim(index)
            informers.put("resourceclaims", claim)
            sched.schedule_one(PodInfo(pod))
        sched.wait_for_binds(60)
        return time.process_time() - cpu0, time.perf_counter() - wall0

    run(0, opts.warmup)
    cpu, wall = run(opts.warmup, opts.pods)
    allocated = sum(1 for c in manager.assumed.values() if (c.get("status") or {}).get("allocation"))
    print(f"nodes={opts.nodes} pods={opts.pods} (+{opts.warmup} warm-up) bound={len(client.bound)} "
          f"claims_allocated={allocated}")
    print(f"cpu_ms_per_pod={1000 * cpu / opts.pods:.3f} wall_ms_per_pod={1000 * wall / opts.pods:.3f} "
          f"pods_per_s={opts.pods / wall:.0f} peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
