"""Micro-benchmark of NodeAffinity.filter_nodes on one chunk of 750 of 5,000 nodes, the shape
of a SchedulingNodeAffinity cycle (required node-group In [group-1]; half the nodes match).

Not a test. Run it from the repository root:

    .venv/bin/python tests/bench/micro/node_affinity_filter.py [--repeat 300]
"""

from __future__ import annotations

import argparse
import sys
import time

sys.path.insert(0, ".")
sys.path.insert(0, "tests/bench/micro")

from schedule_one import node_manifest, pod_manifest  # noqa: E402

from kubesched.framework.handle import Handle  # noqa: E402
from kubesched.framework.interface import CycleState  # noqa: E402
from kubesched.framework.snapshot import Snapshot  # noqa: E402
from kubesched.framework.types import NodeInfo, PodInfo  # noqa: E402
from kubesched.plugins.node_affinity import NodeAffinity  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    opts = parser.parse_args()
    nodes = [NodeInfo(node_manifest(i, "affinity")) for i in range(5000)]
    plugin = NodeAffinity(None, Handle(snapshot=Snapshot(nodes)))
    pod = PodInfo(pod_manifest(1, "affinity"))
    chunk = nodes[1000:1750]
    cpu0 = time.process_time()
    for _unused in range(opts.repeat):
        state = CycleState()
        plugin.pre_filter(state, pod, nodes)
        results = plugin.filter_nodes(state, pod, chunk)
    cpu = time.process_time() - cpu0
    print(f"cpu_us_per_chunk={1e6 * cpu / opts.repeat:.0f} nodes={len(chunk)} "
          f"feasible={sum(r is None for r in results)}")


if __name__ == "__main__":
    main()
