import gc
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kubesched import gctuning

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_tune_raises_only_the_youngest_generations_threshold(restored_gc):
    gc.set_threshold(700, 10, 10)
    gctuning.tune()
    assert gc.get_threshold() == (gctuning.GEN0_THRESHOLD, 10, 10)


def test_freezing_the_synced_caches_takes_them_out_of_the_collectors_view(restored_gc):
    cache = [{"metadata": {"name": f"node-{i}"}} for i in range(1000)]
    before = gc.get_freeze_count()
    gctuning.freeze_synced()
    assert gc.get_freeze_count() >= before + len(cache)
    assert not any(gc.is_tracked(obj) and obj in gc.get_objects(generation=2) for obj in cache[:3])


_FRAGMENTED_HEAP = """
import sys
from kubesched import gctuning

def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

# 2 KB strings come from glibc's heap (Python's own arenas take 512 bytes at most); keeping one
# in forty leaves the freed ones in the middle of the heap, where free() alone keeps them.
chunks = [("x" * 2048) + str(i) for i in range(60_000)]
kept = chunks[::40]
del chunks
before = rss_mb()
gctuning.malloc_trim()()
print(before - rss_mb())
"""


def test_malloc_trim_gives_the_freed_middle_of_the_heap_back():
    """What RSS keeps after the objects are freed (about 120 MB allocated, 3 MB kept), and what
    malloc_trim gives back, in a process of its own."""
    if gctuning.malloc_trim() is None:
        pytest.skip("the C library is not glibc: kubesched trims nothing there")
    given_back = float(subprocess.run([sys.executable, "-c", _FRAGMENTED_HEAP], check=True, capture_output=True,
                                      text=True, cwd=ROOT).stdout)
    assert given_back > 50


def test_the_trim_thread_trims_every_interval(monkeypatch):
    calls = threading.Semaphore(0)
    monkeypatch.setattr(gctuning, "malloc_trim", lambda: calls.release)
    thread = gctuning.return_free_memory(interval=0.01)
    assert thread.name == "malloc-trim" and thread.daemon
    assert calls.acquire(timeout=5) and calls.acquire(timeout=5)


def test_without_glibc_no_thread_starts(monkeypatch):
    monkeypatch.setattr(gctuning, "malloc_trim", lambda: None)
    assert gctuning.return_free_memory() is None
