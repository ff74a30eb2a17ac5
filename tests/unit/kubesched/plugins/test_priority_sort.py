import pytest
from plugin_builders import make_pod

from kubesched.plugins.priority_sort import PrioritySort


def _queued(priority, timestamp):
    pod = make_pod(priority=priority)
    pod.timestamp = timestamp
    return pod


@pytest.mark.parametrize("a, b, want", [
    ((100, 2.0), (50, 1.0), True),     # higher priority first, whatever the time
    ((50, 1.0), (100, 2.0), False),
    ((100, 1.0), (100, 2.0), True),    # equal priority: earlier first
    ((100, 2.0), (100, 1.0), False),
    ((100, 1.0), (100, 1.0), False),   # strict order
    ((0, 1.0), (-5, 0.0), True),       # priority may be negative
])
def test_less(a, b, want):
    assert PrioritySort(None, None).less(_queued(*a), _queued(*b)) is want


def test_unset_priority_is_zero():
    assert PrioritySort(None, None).less(_queued(1, 5.0), _queued(None, 1.0))
