import pytest
from plugin_builders import FakeHandle, make_node, make_pod, run_scores

from kubesched.plugins.image_locality import ImageLocality, normalized_image_name

MB = 1024 * 1024
NODE_40_300_2000 = [(["gcr.io/40:latest", "gcr.io/40:v1"], 40 * MB), (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
                    (["gcr.io/2000:latest"], 2000 * MB)]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900 = [(["gcr.io/600:latest"], 600 * MB), (["gcr.io/40:latest"], 40 * MB),
                   (["gcr.io/900:latest"], 900 * MB)]
NODE_300_600_900 = [(["gcr.io/300:latest"], 300 * MB), (["gcr.io/600:latest"], 600 * MB),
                    (["gcr.io/900:latest"], 900 * MB)]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]


@pytest.mark.parametrize("images, node_images, want", [
    (["gcr.io/40", "gcr.io/250"], [NODE_40_300_2000, NODE_250_10], [0, 5]),
    (["gcr.io/40", "gcr.io/300"], [NODE_40_300_2000, NODE_250_10], [7, 0]),
    (["gcr.io/10", "gcr.io/4000"], [NODE_4000_30, NODE_250_10], [100, 0]),
    (["gcr.io/10", "gcr.io/4000"], [NODE_4000_30, NODE_250_10, None], [66, 0, 0]),
    (["gcr.io/300", "gcr.io/600", "gcr.io/900"], [NODE_600_40_900, NODE_300_600_900, None], [32, 36, 0]),
])
def test_score(images, node_images, want):
    nodes = [make_node(f"node{i}", images=imgs) for i, imgs in enumerate(node_images)]
    handle = FakeHandle(nodes)
    assert run_scores(ImageLocality(None, handle), make_pod(images=images), nodes) == want


def test_image_volumes_and_init_containers_count():
    nodes = [make_node("node0", images=NODE_4000_30), make_node("node1")]
    handle = FakeHandle(nodes)
    spec = {"initContainers": [{"name": "init", "image": "gcr.io/30"}],
            "volumes": [{"name": "v", "image": {"reference": "gcr.io/4000"}}]}
    got = run_scores(ImageLocality(None, handle), make_pod(images=["gcr.io/none"], spec=spec), nodes)
    # 3 images, each on 1 of 2 nodes: (30 + 4000) / 2 = 2015 MiB -> 100 * (2015 - 23) / (3000 - 23) = 66
    assert got == [66, 0]


@pytest.mark.parametrize("name, want", [
    ("nginx", "nginx:latest"),
    ("nginx:1.25", "nginx:1.25"),
    ("registry:5000/nginx", "registry:5000/nginx:latest"),
    ("registry:5000/nginx:1", "registry:5000/nginx:1"),
    ("nginx@sha256:abc", "nginx@sha256:abc"),
])
def test_normalized_image_name(name, want):
    assert normalized_image_name(name) == want
