"""The batch paths (filter_nodes, score_nodes; for the resource plugins the numpy columns of
the snapshot) against kube-scheduler 1.37.1's own decisions on the golden scenarios."""

import pytest
from test_upstream_golden import CODES, GOLDEN, PLUGINS, build

from kubesched.framework.interface import CycleState, NodeScore


def batch_filter_results(plugin, pod, nodes):
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        _unused, status = plugin.pre_filter(state, pod, nodes)
        if status is not None and status.is_skip():
            return [None] * len(nodes)
    return [None if s is None else {"code": s.code, "reasons": s.reasons} for s in plugin.filter_nodes(state, pod, nodes)]


def batch_score_results(plugin, pod, nodes):
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, nodes)
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, nodes)
        if status is not None and status.is_skip():
            return None
    raw = plugin.score_nodes(state, pod, nodes)
    assert all(isinstance(v, int) for v in raw), "score_nodes must return Python ints, not numpy scalars"
    if hasattr(plugin, "normalize_scores"):  # the runtime's batch normalisation
        return plugin.normalize_scores(state, pod, raw)
    scores = [NodeScore(n.name, v) for n, v in zip(nodes, raw)]
    if hasattr(plugin, "normalize_score"):
        plugin.normalize_score(state, pod, scores)
    return [s.score for s in scores]


@pytest.mark.parametrize("case", GOLDEN, ids=[c["name"] for c in GOLDEN])
def test_batch_paths_agree_with_upstream(case):
    seed = int(case["name"].split("-")[1])
    handle, nodes, pod = build(seed, case["nodes"])
    for name, want in case["filters"].items():
        plugin = PLUGINS[name](handle)
        if hasattr(plugin, "filter_nodes"):
            want = [None if w is None else {"code": CODES[w["code"]], "reasons": w["reasons"]} for w in want]
            assert batch_filter_results(plugin, pod, nodes) == want, f"{name} filter_nodes"
    for name, want in case["scores"].items():
        plugin = PLUGINS[name](handle)
        if hasattr(plugin, "score_nodes"):
            assert batch_score_results(plugin, pod, nodes) == want, f"{name} score_nodes"
