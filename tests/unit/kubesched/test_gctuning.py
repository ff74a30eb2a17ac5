import gc

import pytest

from kubesched import gctuning


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
