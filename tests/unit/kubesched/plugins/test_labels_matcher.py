"""RequiredNodeAffinity.labels_matcher (NodeAffinity's batch filter) decides as matches()
for every shape of nodeSelector plus required terms, and declines terms on node names."""

import itertools

import pytest
from plugin_builders import make_node

from kubesched.api.node_affinity import RequiredNodeAffinity


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key, op, *values):
    e = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return {"matchExpressions": [e]}


AFFINITIES = [
    None,
    required(expr("zone", "In", "a", "b")),
    required(expr("zone", "In", "a"), expr("disk", "Exists")),
    required(expr("zone", "NotIn", "a"), {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}),
    required({"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}),
    required(expr("disk", "DoesNotExist")),
    required(),
]
NODE_SELECTORS = [None, {}, {"zone": "a"}, {"zone": "b", "disk": "ssd"}]
NODES = [make_node(f"n{i}", labels=labels) for i, labels in enumerate(
    [{}, {"zone": "a"}, {"zone": "b"}, {"zone": "b", "disk": "ssd"}, {"zone": "c", "disk": "hdd"}])]


@pytest.mark.parametrize("affinity, node_selector", list(itertools.product(AFFINITIES, NODE_SELECTORS)))
def test_labels_matcher_decides_as_matches(affinity, node_selector):
    req = RequiredNodeAffinity(node_selector, affinity)
    matcher = req.labels_matcher()
    assert matcher is not None
    assert [matcher(n.labels) for n in NODES] == [req.matches(n) for n in NODES]


def test_terms_on_node_names_are_left_to_matches():
    affinity = required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
    assert RequiredNodeAffinity(None, affinity).labels_matcher() is None
