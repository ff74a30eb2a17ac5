"""What plugins put in a pod's signature for OpportunisticBatching (upstream framework/signers.go):
the signer names, the keys of a signature, and the signers several plugins share. Each
plugin's sign_pod returns its fragments, or None when it cannot sign the pod (the pod is
then never batched). Two pods with the same signature get the same feasibility and scores
on the same nodes."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from kubesched.framework.batch import canonical

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

# A plugin's sign_pod: its fragments, or None when it cannot sign the pod.
Fragments = Optional[List[Tuple[str, Any]]]


def _spec(pod) -> dict:
    return pod.raw.get("spec") or {}


def tolerations_signer(pod) -> list:
    """TolerationsSigner: the pod's tolerations, in a fixed order."""
    tolerations = list(_spec(pod).get("tolerations") or ())
    return sorted(tolerations, key=lambda t: (t.get("key") or "", t.get("value") or ""))


def _requirements(requirements: list[dict] | None) -> list[str]:
    return sorted(canonical(dict(r, values=sorted(r.get("values") or ()))) for r in requirements or ())


def _term(term: dict) -> dict:
    return {"MatchExpressions": _requirements(term.get("matchExpressions")),
            "MatchFields": _requirements(term.get("matchFields"))}


def node_affinity_signer(pod) -> dict | None:
    """NodeAffinitySigner: required and preferred terms, each in a fixed order."""
    affinity = (_spec(pod).get("affinity") or {}).get("nodeAffinity")
    if affinity is None:
        return None
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    return {"Required": sorted(canonical(_term(t)) for t in required or ()),
            "Preferred": sorted(canonical({"Weight": p.get("weight", 0), "Preference": _term(p.get("preference") or {})})
                                for p in preferred or ())}


def volumes_signer(pod) -> list[str]:
    """VolumesSigner: the volumes but their names; ConfigMap and Secret volumes never affect
    placement and differ from pod to pod."""
    return sorted(canonical({k: v for k, v in volume.items() if k != "name"})
                  for volume in _spec(pod).get("volumes") or ()
                  if "configMap" not in volume and "secret" not in volume)


def host_ports_signer(pod) -> list[int]:
    """HostPortsSigner: the host ports of every container, init containers too."""
    spec = _spec(pod)
    return sorted({port["hostPort"] for container in list(spec.get("containers") or ()) + list(
        spec.get("initContainers") or ()) for port in container.get("ports") or () if port.get("hostPort")})


def resources_signer(pod) -> dict:
    """The pod's requests with overheads (computePodResourceRequest)."""
    requests = pod.requests
    return {"MilliCPU": requests.milli_cpu, "Memory": requests.memory, "EphemeralStorage": requests.ephemeral_storage,
            "ScalarResources": dict(sorted(requests.scalar.items()))}
