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
    """With one background thread, background work that runs an until still finishes."""
    single = Parallelizer(1)
    try:
        future = single.go(lambda: single.until([1, 2], lambda piece: piece + 1))
        assert future.result(10) == [2, 3]
    finally:
        single.shutdown()


def test_each_until_has_threads_of_its_own_that_end_with_it(parallelizer):
    """Two calls at once, each with as many pieces as the parallelism, all run side by side: a
    call's pieces never wait behind another call's."""
    barrier = threading.Barrier(6, timeout=10)
    before = len(_named("parallelize"))
    calls = [threading.Thread(target=parallelizer.until, args=([1, 2, 3], lambda piece: barrier.wait()))
             for _unused in range(2)]
    for call in calls:
        call.start()
    for call in calls:
        call.join(10)
    assert not barrier.broken and barrier.n_waiting == 0
    assert len(_named("parallelize")) == before


def test_background_work_runs_on_threads_started_once(parallelizer):
    before = threading.active_count()
    release = threading.Event()
    held = [parallelizer.go(release.wait, 10) for _unused in range(6)]  # twice the threads
    assert threading.active_count() == before
    release.set()
    assert all(future.result(10) for future in held)


def test_a_handle_without_a_parallelizer_starts_threads_only_when_used():
    before = len(_named("background_"))
    handle = Handle(parallelism=2)
    assert len(_named("background_")) == before
    assert handle.parallelizer.go(lambda: "done").result(10) == "done"
    assert len(_named("background_")) == before + 2
    handle.parallelizer.shutdown()
    assert len(_named("background_")) == before
