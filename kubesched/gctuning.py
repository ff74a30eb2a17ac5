"""How kubesched's processes set Python's garbage collector.

CPython collects its youngest generation after every 700 net allocations of container objects,
and examines the whole heap when enough objects have survived into the oldest generation. A
scheduling cycle allocates tens of thousands of short-lived objects (a DRA allocation search
runs on hundreds of nodes), while the cache holds hundreds of thousands of long-lived ones
(node and pod objects): with the default settings, the collector ran a full collection every
few dozen DRA pods and took a large share of the scheduling loop's CPU
(tests/bench/micro/dra.py prints the cost per pod; --default-gc leaves the collector as it
comes). kubesched therefore:

- collects the youngest generation after GEN0_THRESHOLD allocations instead of 700, which
  makes the older generations' turns come as much less often;
- freezes what the informers' initial lists brought (gc.freeze, once the caches synced): those
  objects are moved out of the collector's sight, so a full collection examines only what came
  later. They are still freed by reference counting when they go; only a reference cycle among
  them would outlive its use, and informer objects are plain JSON data without cycles.

Neither changes what is freed, only when the collector looks for cycles.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 20_000


def tune() -> None:
    """Set the collector's thresholds; called first thing in every kubesched process."""
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def freeze_synced() -> None:
    """Move every object alive now (the caches' initial contents) out of the collector's view."""
    gc.collect()
    gc.freeze()
