"""ImageLocality: favour nodes that already hold the pod's images, scaled by their spread.

An image's size counts in proportion to the share of nodes that have it, so a popular
image does not pull every pod to the same nodes. The sum is clamped between 23 MiB and
1000 MiB per container and mapped linearly to [0, 100].
"""

from __future__ import annotations

import operator

from kubesched.framework.handle import Handle
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.signers import IMAGE_NAMES_KEY, Fragments
from kubesched.framework.types import NodeInfo, PodInfo

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
PRE_SCORE_STATE_KEY = "PreScoreImageLocality"


def normalized_image_name(name: str) -> str:
    """Add ":latest" when the name carries no tag (upstream's normalizedImageName)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: PodInfo) -> tuple[list[str], int]:
    """Normalised image names of init and regular containers and image volumes, and their count."""
    spec = pod.raw.get("spec") or {}
    containers = list(spec.get("initContainers") or ()) + list(spec.get("containers") or ())
    names = [normalized_image_name(c.get("image") or "") for c in containers]
    for volume in spec.get("volumes") or ():
        image = volume.get("image")
        if image is not None:
            names.append(normalized_image_name(image.get("reference") or ""))
    return names, len(names)


def calculate_priority(sum_scores: int, image_count: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


_IMAGE_STATES_OF = operator.attrgetter("image_states")


class ImageLocality:
    name = "ImageLocality"

    def __init__(self, args: dict | None, handle: Handle):
        self.handle = handle

    def sign_pod(self, pod: PodInfo) -> Fragments:
        spec = pod.raw.get("spec") or {}
        containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
        return [(IMAGE_NAMES_KEY, sorted({normalized_image_name(c.get("image") or "") for c in containers}))]

    def _images(self, state, pod: PodInfo) -> tuple[list[str], int, int]:
        """(normalised image names, image count, the score of a node holding none of them)."""
        images = state.get(PRE_SCORE_STATE_KEY) if state is not None else None
        if images is None:
            names, count = pod_images(pod)
            images = (names, count, calculate_priority(0, count))
        return images

    def pre_score(self, state, pod: PodInfo, nodes: list[NodeInfo]):
        # Not an upstream extension point for this plugin: it only computes the pod's image
        # names once per cycle instead of once per node. It never skips.
        names, count = pod_images(pod)
        state.write(PRE_SCORE_STATE_KEY, (names, count, calculate_priority(0, count)))
        return None

    def score(self, state, pod: PodInfo, node_info: NodeInfo) -> int:
        names, count, zero = self._images(state, pod)
        if not node_info.image_states:  # hot path: most nodes report no images the pod uses
            return zero
        return calculate_priority(self._sum(node_info, names, self.handle.snapshot().num_nodes()), count)

    @staticmethod
    def _sum(node: NodeInfo, names: list[str], total_nodes: int) -> int:
        states = node.image_states
        total = 0
        for name in names:
            state = states.get(name)
            if state is not None:
                total += int(state.size * (state.num_nodes / total_nodes))
        return total

    def score_nodes(self, state, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        names, count, zero = self._images(state, pod)
        if not any(map(_IMAGE_STATES_OF, nodes)):  # hot path: a C-level scan when no node reports images
            return [zero] * len(nodes)
        total_nodes = self.handle.snapshot().num_nodes()
        return [calculate_priority(self._sum(n, names, total_nodes), count) if n.image_states else zero
                for n in nodes]
