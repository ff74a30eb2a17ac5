"""Snapshot.columns(): numpy rows stay equal to the NodeInfos they were read from, and any
node the columns cannot answer for exactly sends the caller to its per-node path."""

import random

import numpy as np
from plugin_builders import make_node, make_pod, place

from kubesched.framework.columns import FIELDS, _row
from kubesched.framework.snapshot import Snapshot
from kubesched.plugins.resource_allocation import (
    allocated_score_cpu_memory,
    allocated_scores_cpu_memory,
    balanced_score_cpu_memory,
    balanced_scores_cpu_memory,
)


def assert_rows_match(columns, nodes, rows):
    for row, node in zip(rows.tolist(), nodes):
        assert tuple(int(getattr(columns, f)[row]) for f in FIELDS) == _row(node)


def test_rows_follow_nodes_the_cache_replaces_and_nodes_changed_in_place():
    nodes = [make_node(f"n{i}", cpu="4", memory="8Gi", pods=10) for i in range(5)]
    snapshot = Snapshot(nodes)
    columns = snapshot.columns()
    assert_rows_match(columns, nodes, columns.rows(nodes))
    # the cache puts a changed clone in the snapshot's list at the same index
    clone = place(nodes[2].clone(), make_pod("a", reqs=[{"cpu": "1", "memory": "1Gi"}]))
    snapshot.node_info_list[2] = clone
    current = snapshot.node_info_list
    rows = columns.rows(current)
    assert rows.tolist() == [0, 1, 2, 3, 4]
    assert columns.req_cpu[2] == 1000 and columns.pod_count[2] == 1
    # a node changed in place is re-read from its new generation
    place(current[4], make_pod("b", reqs=[{"cpu": "500m"}]))
    columns.rows(current[3:])
    assert columns.req_cpu[4] == 500
    assert snapshot.columns() is columns


def test_nodes_outside_the_snapshot_or_the_exact_range_get_no_rows():
    nodes = [make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    snapshot = Snapshot(nodes)
    columns = snapshot.columns()
    assert columns.rows([nodes[0], nodes[1]]) is not None
    assert columns.rows([nodes[0], nodes[1].clone()]) is None  # a clone may differ from its row
    assert columns.rows([place(nodes[1].clone(), make_pod("p", reqs=[{"cpu": "1"}]))]) is None  # preemption's what-if
    assert columns.rows([make_node("elsewhere", cpu="1")]) is None
    huge = make_node("huge", cpu="4", memory="64Pi")
    snapshot.set_nodes([*nodes, huge])
    columns = snapshot.columns()
    assert columns.rows(snapshot.node_info_list[:3]) is not None
    assert columns.rows(snapshot.node_info_list) is None


def test_array_scores_equal_the_per_node_scores_on_random_nodes():
    rng = random.Random(5)
    nodes = []
    for i in range(300):
        node = make_node(f"n{i}", cpu=str(rng.choice([0, 1, 2, 4, 7])),
                         memory=rng.choice(["0", "1Gi", "3Gi", "16Gi", "1000000007"]), pods=rng.randint(1, 8))
        for j in range(rng.randint(0, 6)):
            requests = {"cpu": rng.choice(["100m", "333m", "1", "3"]), "memory": rng.choice(["200Mi", "777Mi", "2Gi"])}
            place(node, make_pod(f"p{i}-{j}", reqs=[{k: v for k, v in requests.items() if rng.random() < 0.7}]))
        nodes.append(node)
    columns = Snapshot(nodes).columns()
    rows = columns.rows(nodes)
    for pod_cpu, pod_mem in ((0, 0), (100, 209715200), (1500, 1), (9000, 40 << 30)):
        for most in (False, True):
            for w_cpu, w_mem in ((1, 1), (3, 7)):
                want = [allocated_score_cpu_memory(n, pod_cpu, pod_mem, w_cpu, w_mem, most) for n in nodes]
                got = allocated_scores_cpu_memory(columns, rows, pod_cpu, pod_mem, w_cpu, w_mem, most)
                assert got.tolist() == want
        want = [balanced_score_cpu_memory(n, pod_cpu, pod_mem) for n in nodes]
        assert balanced_scores_cpu_memory(columns, rows, pod_cpu, pod_mem).tolist() == want
    assert isinstance(rows, np.ndarray)
