"""Every in-tree plugin by name, and the v1 default profile (kube-scheduler 1.37).

DEFAULT_PLUGINS is getDefaultPlugins() of pkg/scheduler/apis/config/v1/default_plugins.go
with 1.37's default feature gates applied: DynamicResources (DRA is GA) before
DefaultPreemption, and NodeDeclaredFeatures (GA in 1.37) appended. A weight of 0 means the
profile sets none; the framework then gives a Score plugin weight 1, as upstream does.
"""

from __future__ import annotations

from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.default_preemption import DefaultPreemption
from kubesched.plugins.dynamic_resources import DynamicResources
from kubesched.plugins.image_locality import ImageLocality
from kubesched.plugins.inter_pod_affinity import InterPodAffinity
from kubesched.plugins.node_affinity import NodeAffinity
from kubesched.plugins.node_declared_features import NodeDeclaredFeatures
from kubesched.plugins.node_name import NodeName
from kubesched.plugins.node_ports import NodePorts
from kubesched.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.plugins.node_unschedulable import NodeUnschedulable
from kubesched.plugins.node_volume_limits import NodeVolumeLimits
from kubesched.plugins.pod_topology_spread import PodTopologySpread
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.plugins.scheduling_gates import SchedulingGates
from kubesched.plugins.taint_toleration import TaintToleration
from kubesched.plugins.volume_binding import VolumeBinding
from kubesched.plugins.volume_restrictions import VolumeRestrictions
from kubesched.plugins.volume_zone import VolumeZone

REGISTRY: dict[str, type] = {cls.name: cls for cls in (
    SchedulingGates,
    PrioritySort,
    NodeName,
    NodeUnschedulable,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeRestrictions,
    NodeVolumeLimits,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
    DynamicResources,
    DefaultPreemption,
    NodeResourcesBalancedAllocation,
    ImageLocality,
    DefaultBinder,
    NodeDeclaredFeatures,
)}

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
