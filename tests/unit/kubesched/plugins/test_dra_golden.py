"""kubesched's DRA allocator against upstream's (k8s.io/dynamic-resource-allocation 0.37.1).

golden/upstream_1.37.1_dra.json holds what upstream's structured allocator answered, node by
node, for the scenarios golden/make_scenarios.py generates with `dra` (seeded, regenerated
here): which devices each claim got, the config and node selector of each allocation, or
the error. golden/README.md says how the file was produced. Every scenario runs through each
CEL backend (cel-expr-python and cel-python), so a selector the two evaluate differently fails.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from kubesched.dra.allocator import AllocationError, Allocator
from kubesched.dra.cel import BACKENDS, SelectorCache
from kubesched.framework.quantity import parse_quantity
from kubesched.framework.types import NodeInfo

HERE = Path(__file__).parent / "golden"
GOLDEN_FILE = HERE / "upstream_1.37.1_dra.json"
GOLDEN = json.loads(GOLDEN_FILE.read_text()) if GOLDEN_FILE.exists() else []
_spec = importlib.util.spec_from_file_location("make_scenarios", HERE / "make_scenarios.py")
make_scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_scenarios)
CEL = {backend: SelectorCache(backend=backend) for backend in BACKENDS}


def normalized(value):
    """Drop what Go's omitempty drops, so both sides compare as JSON. A shareID is a fresh
    UUID on each side: only its presence is compared."""
    if isinstance(value, dict):
        out = {k: normalized(v) for k, v in value.items() if v not in (None, [], {}, "", False)}
        if "shareID" in out:
            out["shareID"] = "<a share ID>"
        return out
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def kubesched_answer(scenario: dict, backend: str) -> dict:
    classes = {c["metadata"]["name"]: c for c in scenario["classes"]}
    allocated = {tuple(d) for d in scenario["allocated"]}
    shared = {}
    for share in scenario["shared"]:
        consumed = shared.setdefault(tuple(share["device"]), {})
        for name, value in (share["consumedCapacity"] or {}).items():
            consumed[name] = consumed.get(name, 0) + parse_quantity(value)
    out = {}
    for node in scenario["nodes"]:
        allocator = Allocator(allocated, classes, scenario["slices"], CEL[backend], shared=shared)
        try:
            allocations = allocator.allocate(NodeInfo(node), scenario["claims"])
            out[node["metadata"]["name"]] = {"error": None, "allocations": normalized(allocations)}
        except AllocationError as err:
            out[node["metadata"]["name"]] = {"error": str(err), "allocations": None}
    return out


def test_golden_file_covers_at_least_50_scenarios():
    assert len(GOLDEN) >= 50


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(len(GOLDEN)))
def test_allocator_agrees_with_upstream(seed, backend):
    scenario = make_scenarios.dra_scenario(seed)
    want = {node: {"error": r["error"], "allocations": normalized(r["allocations"]) or None}
            for node, r in GOLDEN[seed].items()}
    got = kubesched_answer(scenario, backend)
    for node in want:
        got[node]["allocations"] = got[node]["allocations"] or None
    assert got == want
