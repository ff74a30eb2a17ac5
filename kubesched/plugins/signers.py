"""What each in-tree plugin puts in a pod's signature for OpportunisticBatching (v1.37's SignPod
of each plugin; signer names from upstream framework/signers.go). Two pods with the same
signature get the same feasibility and scores on the same nodes; a signer that returns None
cannot sign the pod, which then is never batched."""

from __future__ import annotations

from typing import Any, Callable

from kubesched.framework.batch import canonical
from kubesched.plugins.image_locality import normalized_image_name
from kubesched.plugins.node_declared_features import required_features

# Signer names (upstream framework/signers.go): the keys of a signature.
IMAGE_NAMES_KEY = "v1.Pod.Spec.CanonicalImageNames()"
LABELS_KEY = "v1.Pod.Labels"
NODE_NAME_KEY = "v1.Pod.Spec.NodeName"
NODE_AFFINITY_KEY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR_KEY = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS_KEY = "v1.Pod.Spec.HostPorts()"
RESOURCES_KEY = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
TOLERATIONS_KEY = "v1.Pod.Spec.Tolerations"
VOLUMES_KEY = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES_KEY = "v1.Pod.Spec.RequiredFeatures()"

Fragments = list[tuple[str, Any]] | None  # None: the plugin cannot sign this pod


def _spec(pod) -> dict:
    return pod.raw.get("spec") or {}


def _tolerations(pod) -> list:
    tolerations = list(_spec(pod).get("tolerations") or ())
    return sorted(tolerations, key=lambda t: (t.get("key") or "", t.get("value") or ""))


def _requirements(requirements: list[dict] | None) -> list[str]:
    return sorted(canonical(dict(r, values=sorted(r.get("values") or ()))) for r in requirements or ())


def _term(term: dict) -> dict:
    return {"MatchExpressions": _requirements(term.get("matchExpressions")),
            "MatchFields": _requirements(term.get("matchFields"))}


def _node_affinity(pod) -> dict | None:
    affinity = (_spec(pod).get("affinity") or {}).get("nodeAffinity")
    if affinity is None:
        return None
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    return {"Required": sorted(canonical(_term(t)) for t in required or ()),
            "Preferred": sorted(canonical({"Weight": p.get("weight", 0), "Preference": _term(p.get("preference") or {})})
                                for p in preferred or ())}


def _volumes(pod) -> list[str]:
    # ConfigMap and Secret volumes never affect placement and differ from pod to pod.
    return sorted(canonical({k: v for k, v in volume.items() if k != "name"})
                  for volume in _spec(pod).get("volumes") or ()
                  if "configMap" not in volume and "secret" not in volume)


def _host_ports(pod) -> list[int]:
    spec = _spec(pod)
    return sorted({port["hostPort"] for container in list(spec.get("containers") or ()) + list(
        spec.get("initContainers") or ()) for port in container.get("ports") or () if port.get("hostPort")})


def _resources(pod) -> dict:
    requests = pod.requests
    return {"MilliCPU": requests.milli_cpu, "Memory": requests.memory, "EphemeralStorage": requests.ephemeral_storage,
            "ScalarResources": dict(sorted(requests.scalar.items()))}


def _sign_resources(plugin, pod) -> Fragments:
    # A request a DeviceClass backs is allocated through DRA: such pods are not signable.
    backed = getattr(plugin, "_dra_backed", None)
    if pod.requests.scalar and backed is not None and backed(pod.requests.scalar):
        return None
    return [(RESOURCES_KEY, _resources(pod))]


def _sign_images(_plugin, pod) -> Fragments:
    spec = _spec(pod)
    containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
    return [(IMAGE_NAMES_KEY, sorted({normalized_image_name(c.get("image") or "") for c in containers}))]


def _sign_features(_plugin, pod) -> Fragments:
    return [(FEATURES_KEY, sorted(required_features(pod)))]


def _sign_topology_spread(plugin, pod) -> Fragments:
    if _spec(pod).get("topologySpreadConstraints") or plugin.default_constraints:
        return None  # spreading depends on every pod of the domain, not on the pod and node
    return []


def _sign_inter_pod_affinity(plugin, pod) -> Fragments:
    affinity = _spec(pod).get("affinity") or {}
    if affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None:
        return None
    if plugin.ignore_preferred_terms_of_existing_pods:
        return []
    # Existing pods' affinity terms may match this pod's labels.
    return [(LABELS_KEY, dict(sorted(pod.labels.items())))]


def _sign_volumes(_plugin, pod) -> Fragments:
    return [(VOLUMES_KEY, _volumes(pod))]


def _sign_tolerations(_plugin, pod) -> Fragments:
    return [(TOLERATIONS_KEY, _tolerations(pod))]


# What each in-tree plugin's v1.37 SignPod puts in the signature, by plugin name. The plugins
# that may refuse come first: the framework asks them first, so an unsignable pod (every pod
# under the default profile's system default spreading) costs one check.
SIGNERS: dict[str, Callable[[Any, Any], Fragments]] = {
    "PodTopologySpread": _sign_topology_spread,
    "InterPodAffinity": _sign_inter_pod_affinity,
    "DynamicResources": lambda _plugin, pod: None if _spec(pod).get("resourceClaims") else [],
    "NodeResourcesFit": _sign_resources,
    "NodeResourcesBalancedAllocation": _sign_resources,
    "NodeName": lambda _plugin, pod: [(NODE_NAME_KEY, _spec(pod).get("nodeName") or "")],
    "NodeUnschedulable": _sign_tolerations,
    "TaintToleration": _sign_tolerations,
    "NodeAffinity": lambda _plugin, pod: [(NODE_AFFINITY_KEY, _node_affinity(pod)),
                                          (NODE_SELECTOR_KEY, _spec(pod).get("nodeSelector"))],
    "NodePorts": lambda _plugin, pod: [(HOST_PORTS_KEY, _host_ports(pod))],
    "VolumeRestrictions": _sign_volumes,
    "NodeVolumeLimits": _sign_volumes,
    "VolumeBinding": _sign_volumes,
    "VolumeZone": _sign_volumes,
    "ImageLocality": _sign_images,
    "NodeDeclaredFeatures": _sign_features,
}
