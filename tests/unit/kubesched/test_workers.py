"""WorkerPool: every thread starts with the pool and no burst adds one."""

import threading

import pytest

from kubesched.workers import WorkerPool


def _threads(name):
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}_")]


def test_all_workers_start_with_the_pool_and_a_burst_adds_none():
    pool = WorkerPool(4, "burst-test")
    try:
        assert len(_threads("burst-test")) == 4
        gate = threading.Event()
        futures = [pool.submit(gate.wait, 10) for _unused in range(20)]  # five times the workers at once
        assert len(_threads("burst-test")) == 4
        gate.set()
        assert [f.result(10) for f in futures] == [True] * 20
        assert len(_threads("burst-test")) == 4
    finally:
        pool.shutdown()
    assert not _threads("burst-test")


def test_results_and_errors_reach_the_caller_and_the_worker_goes_on():
    pool = WorkerPool(1, "error-test")
    try:
        failed = pool.submit(int, "not a number")
        with pytest.raises(ValueError, match="not a number"):
            failed.result(10)
        assert pool.submit(sum, [1, 2, 3]).result(10) == 6
    finally:
        pool.shutdown()


def test_shutdown_runs_what_was_submitted_then_refuses_more():
    pool = WorkerPool(2, "shutdown-test")
    done = []
    for index in range(10):
        pool.submit(done.append, index)
    pool.shutdown(wait=True)
    assert sorted(done) == list(range(10))
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(done.append, 99)


def test_a_pool_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool(0, "none")
