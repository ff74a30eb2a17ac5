import inspect

import pytest

from kubesched.config.default_plugins import DEFAULT_PLUGINS, IN_TREE_PLUGINS, QUEUE_SORT_PLUGINS
from kubesched.plugins.registry import REGISTRY

UPSTREAM_1_37_DEFAULTS = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeName", 0), ("NodeUnschedulable", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2), ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0),
    ("NodeDeclaredFeatures", 0),
]


def test_default_profile_is_upstream_1_37():
    assert DEFAULT_PLUGINS == UPSTREAM_1_37_DEFAULTS


def test_every_plugin_named_is_registered_under_its_own_name():
    assert set(REGISTRY) == IN_TREE_PLUGINS
    for name, cls in REGISTRY.items():
        assert cls.name == name


def test_the_queue_sort_names_are_the_plugins_that_sort():
    assert QUEUE_SORT_PLUGINS == {name for name, cls in REGISTRY.items() if hasattr(cls, "less")}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_plugin_file_is_named_after_the_plugin(name):
    module = inspect.getmodule(REGISTRY[name]).__name__.rsplit(".", 1)[1]
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    assert module == snake


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_plugin_builds_with_default_args(name):
    from plugin_builders import FakeHandle
    plugin = REGISTRY[name](None, FakeHandle())
    assert plugin.name == name


def test_score_plugins_of_the_default_profile_have_score_methods():
    for name, weight in DEFAULT_PLUGINS:
        if weight:
            assert hasattr(REGISTRY[name], "score"), name


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_requeue_events_are_cluster_events(name):
    from plugin_builders import FakeHandle

    from kubesched.framework.interface import ClusterEvent
    plugin = REGISTRY[name](None, FakeHandle())
    if hasattr(plugin, "events_to_register"):
        assert all(isinstance(e, ClusterEvent) for e in plugin.events_to_register())
