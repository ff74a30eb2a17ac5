"""lab/demo_gpu.py's verdict on the GPU workload's placements (the demo runs it on the lab)."""

from lab.demo_gpu import REPLICAS, problems


def row(pod, node, device):
    return {"pod": pod, "node": node, "phase": "Running", "claim": f"{pod}-gpu", "device": device}


def placed():
    return [row("a", "demo-node-2", "demo-node-2/gpu-0"), row("b", "demo-node-2", "demo-node-2/gpu-1"),
            row("c", "demo-node-1", "demo-node-1/gpu-0")]


def test_every_pod_on_a_gpu_node_with_a_device_of_its_own_is_fine():
    assert len(placed()) == REPLICAS and problems(placed()) == []


def test_a_shared_device_a_pending_pod_and_a_device_on_another_node_are_reported():
    rows = placed()
    rows[1]["device"] = "demo-node-2/gpu-0"
    assert problems(rows) == ["two pods got the same device"]
    rows = placed()
    rows[2].update(node="", device="")
    assert problems(rows) == ["c is not bound with an allocated claim yet"]
    rows = placed()
    rows[2]["node"] = "demo-node-0"
    assert problems(rows) == ["c is on demo-node-0, its device demo-node-1/gpu-0 is not on that node"]
