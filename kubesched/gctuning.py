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

What is freed goes back to the C allocator, which keeps it. Objects of more than 512 bytes (a
pod's dicts and strings, a watch page) come from glibc's heaps, and a freed chunk in the middle
of a heap stays in the process's RSS until glibc is asked to give it back: as pods are replaced
by their newer versions, RSS climbs to the most the process ever held and stays there, whatever
it holds now. Go's runtime gives free memory back to the system as a matter of course (its
scavenger); here a thread calls glibc's malloc_trim every TRIM_INTERVAL_S, which releases the
free pages of every heap (a few milliseconds). Every 60 s was too seldom for a busy scheduler:
what its processes freed in a minute (replaced pods, decoded watch batches) sat in RSS until the
next trim, several percent of it, so RSS sampled at any moment said as much about the time since
the last trim as about what the process held. Where the C library is not glibc, nothing is
done. Python's own small-object arenas are given back by Python when they empty.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
from typing import Callable

GEN0_THRESHOLD = 20_000
TRIM_INTERVAL_S = 10.0


def tune() -> None:
    """Set the collector's thresholds; called first thing in every kubesched process."""
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def malloc_trim() -> Callable[[], None] | None:
    """glibc's malloc_trim(0) as a function, or None where the C library has none."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


def return_free_memory(interval: float = TRIM_INTERVAL_S) -> threading.Thread | None:
    """Start the thread that gives the C allocator's free pages back every interval seconds
    (for a scheduler's processes, which run for months); None where there is no malloc_trim."""
    trim = malloc_trim()
    if trim is None:
        return None

    def run() -> None:
        while True:
            time.sleep(interval)
            trim()

    thread = threading.Thread(target=run, name="malloc-trim", daemon=True)
    thread.start()
    return thread


def freeze_synced() -> None:
    """Move every object alive now (the caches' initial contents) out of the collector's view."""
    gc.collect()
    gc.freeze()
