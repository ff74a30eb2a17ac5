"""The in-tree plugins by name, and the v1 default profile (kube-scheduler 1.37).

Names only, as upstream's framework/plugins/names and apis/config/v1/default_plugins.go:
the configuration checks and defaults a profile with these, and never imports a plugin
class. plugins/registry.py maps each name to its class; a unit test keeps the two in step.

DEFAULT_PLUGINS is getDefaultPlugins() with 1.37's default feature gates applied:
DynamicResources (DRA is GA) before DefaultPreemption, and NodeDeclaredFeatures (GA in
1.37) appended. A weight of 0 means the profile sets none; the framework then gives a Score
plugin weight 1, as upstream does.
"""

from __future__ import annotations

DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeName", 0),
    ("NodeUnschedulable", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
    ("NodeDeclaredFeatures", 0),
]

# applyGangScheduling: with the GenericWorkload feature gate on (beta, off by default in
# v1.37), GangScheduling is appended to the default profile's multiPoint.
GENERIC_WORKLOAD_PLUGINS: list[tuple[str, int]] = [("GangScheduling", 0)]

# Every in-tree plugin is in the default profile, some only with their feature gate on. A
# profile may name any of them whatever the gates, as upstream's registry holds them all.
IN_TREE_PLUGINS: frozenset[str] = frozenset(name for name, _unused in DEFAULT_PLUGINS + GENERIC_WORKLOAD_PLUGINS)


# The plugins that implement queueSort: every profile must agree on these, as one queue
# serves all profiles.
QUEUE_SORT_PLUGINS: frozenset[str] = frozenset({"PrioritySort"})
