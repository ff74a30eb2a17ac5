"""The demo gang's verdict (lab/demo_gang.py): all four workers bound, each on a GPU node of its own."""

from lab import demo_gang


def rows(*nodes: str) -> list[dict]:
    return [{"pod": f"trainer-{i}", "node": node} for i, node in enumerate(nodes)]


def test_four_workers_on_four_nodes_is_the_verdict_the_demo_wants():
    assert demo_gang.problems(rows("g-0", "g-1", "g-2", "g-3")) == []


def test_a_missing_or_unbound_worker_or_a_shared_node_fails_the_demo():
    assert demo_gang.problems(rows("g-0", "g-1", "g-2", "")) == ["trainer-3 is not bound"]
    assert demo_gang.problems(rows("g-0", "g-1", "g-2")) == ["3 workers, the group has 4"]
    assert demo_gang.problems(rows("g-0", "g-0", "g-2", "g-3")) == ["two workers share a node with one GPU"]


def test_each_worker_belongs_to_the_group_and_asks_for_one_gpu_on_the_gang_nodes():
    pod = demo_gang.worker(2)
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": demo_gang.GROUP_NAME}
    assert pod["spec"]["containers"][0]["resources"]["requests"][demo_gang.GPU] == "1"
    assert pod["spec"]["nodeSelector"] == dict([demo_gang.POOL])
    assert demo_gang.pod_group()["spec"]["schedulingPolicy"]["gang"]["minCount"] == demo_gang.WORKERS == 4
