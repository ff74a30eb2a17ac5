"""The Parallelizer plugins get from their Handle: pieces side by side, background work."""

import threading

import pytest

from kubesched.framework.handle import Handle
from kubesched.framework.parallelize import Parallelizer


def _named(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


@pytest.fixture
def parallelizer():
    made = Parallelizer(3)
    yield made
    made.shutdown()


def test_until_runs_the_pieces_side_by_side_and_returns_their_results_in_order(parallelizer):
    barrier = threading.Barrier(3, timeout=10)  # passes only if all three run at once

    def work(piece):
        barrier.wait()
        return piece * 10

    assert parallelizer.until([1, 2, 3], work) == [10, 20, 30]


def test_until_raises_the_first_failure_once_every_piece_has_ended(parallelizer):
    ended = []

    def work(piece):
        if piece == "bad":
            raise ValueError("piece failed")
        threading.Event().wait(0.05)
        ended.append(piece)

    with pytest.raises(ValueError, match="piece failed"):
        parallelizer.until(["a", "bad", "b"], work)
    assert sorted(ended) == ["a", "b"]


def test_a_lone_piece_runs_in_the_calling_thread(parallelizer):
    assert parallelizer.until(["x"], lambda piece: threading.current_thread().name) == \
        [threading.current_thread().name]
    assert parallelizer.until([], lambda piece: 1 / 0) == []


def test_background_work_that_waits_for_pieces_does_not_wait_for_itself():
    """With one thread of each, background work that runs an until still finishes (a single
    shared pool would deadlock here)."""
    single = Parallelizer(1)
    try:
        future = single.go(lambda: single.until([1, 2], lambda piece: piece + 1))
        assert future.result(10) == [2, 3]
    finally:
        single.shutdown()


def test_a_handle_without_a_parallelizer_starts_threads_only_when_used():
    before = len(_named("parallelize_")), len(_named("background_"))
    handle = Handle(parallelism=2)
    assert (len(_named("parallelize_")), len(_named("background_"))) == before
    assert handle.parallelizer.go(lambda: "done").result(10) == "done"
    assert (len(_named("parallelize_")), len(_named("background_"))) == (before[0] + 2, before[1] + 2)
    handle.parallelizer.shutdown()
    assert (len(_named("parallelize_")), len(_named("background_"))) == before
