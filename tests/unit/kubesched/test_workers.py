"""Thread pools whose threads all start at once (kubesched/workers.py)."""

import threading

import pytest

from kubesched.workers import started_executor


def _named(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_every_thread_is_started_at_once_and_a_burst_adds_none():
    pool = started_executor(3, "burst")
    try:
        assert len(_named("burst_")) == 3
        release = threading.Event()
        held = [pool.submit(release.wait, 10) for _unused in range(15)]  # five times the threads
        assert len(_named("burst_")) == 3
        release.set()
        assert all(future.result(10) for future in held)
        assert len(_named("burst_")) == 3
    finally:
        pool.shutdown()
    assert _named("burst_") == []


def test_the_threads_run_side_by_side():
    pool = started_executor(4, "side")
    try:
        everyone = threading.Barrier(4, timeout=10)  # passes only if all four run at once
        assert [f.result(10) for f in [pool.submit(lambda: everyone.wait() >= 0) for _unused in range(4)]] == [True] * 4
    finally:
        pool.shutdown()


def test_a_pool_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker, not 0"):
        started_executor(0, "none")
