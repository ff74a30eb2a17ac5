"""GangScheduling agrees with upstream's own plugin code (v1.37.1's gangscheduling.go, run by
golden/upstream_runner over the scheduler cache's pod group state): PreEnqueue, PlacementFeasible
and the QueueingHints, on the scenarios golden/make_scenarios.py's gang_scheduling seeds make.
golden/README.md says how golden/upstream_1.37.1_gang.json was produced."""

import importlib.util
import json
from pathlib import Path

import pytest

from kubesched.backend.pod_groups import PodGroups
from kubesched.framework.handle import Handle
from kubesched.framework.interface import ActionType, EventResource
from kubesched.framework.types import PodInfo
from kubesched.plugins.gang_scheduling import GangScheduling

HERE = Path(__file__).parent / "golden"
GOLDEN = json.loads((HERE / "upstream_1.37.1_gang.json").read_text())
_spec = importlib.util.spec_from_file_location("make_scenarios", HERE / "make_scenarios.py")
make_scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_scenarios)

# Upstream's Code.String() for the codes GangScheduling returns.
CODES = {"SUCCESS": "Success", "UNSCHEDULABLE": "Unschedulable",
         "UNSCHEDULABLE_AND_UNRESOLVABLE": "UnschedulableAndUnresolvable", "WAIT": "Wait", "ERROR": "Error"}
EVENTS = {"UnscheduledPodAdd": (EventResource.UNSCHEDULED_POD, ActionType.ADD),
          "AssignedPodAdd": (EventResource.ASSIGNED_POD, ActionType.ADD),
          "PodGroupAdd": (EventResource.POD_GROUP, ActionType.ADD),
          "PodGroupUpdate": (EventResource.POD_GROUP, ActionType.UPDATE)}


def status_out(status) -> dict:
    if status is None:
        return {"code": "Success", "message": ""}
    return {"code": CODES[status.code.name], "message": status.message()}


def ours(sc: dict) -> dict:
    store = {"ns/train": sc["podGroup"]} if sc["podGroup"] else {}
    pod_groups = PodGroups(store.get, lambda _uid: False)
    for member in sc["members"]:
        pod_groups.add_pod(member)
    plugin = GangScheduling(None, Handle(pod_groups=pod_groups))
    pod = PodInfo(sc["pod"])
    feasible = [status_out(plugin.placement_feasible(sc["podGroup"], remaining, scheduled)) if sc["podGroup"] else None
                for remaining, scheduled in sc["progress"]]
    registered = plugin.events_to_register()
    hints = []
    for event in sc["events"]:
        resource, action = EVENTS[event["event"]]
        hint = next((e.hint for e in registered if e.resource == resource and e.action & action), None)
        hints.append("none registered" if hint is None else
                     "Queue" if hint(pod, event.get("old"), event.get("new")) else "QueueSkip")
    return {"name": sc["name"], "preEnqueue": status_out(plugin.pre_enqueue(pod)), "feasible": feasible,
            "hints": hints}


def test_the_scenarios_cover_every_outcome():
    pre_enqueue = {case["preEnqueue"]["message"].split('"')[0] for case in GOLDEN}
    assert pre_enqueue == {"", "waiting for pods's pod group ",
                           "waiting for minCount pods from a gang to appear in scheduling queue"}
    assert {f["code"] for case in GOLDEN for f in case["feasible"] if f} == {"Success", "Wait", "Unschedulable"}
    assert {h for case in GOLDEN for h in case["hints"]} == {"Queue", "QueueSkip"}


@pytest.mark.parametrize("seed", range(len(GOLDEN)))
def test_gang_scheduling_agrees_with_upstream(seed):
    assert ours(make_scenarios.gang_scenario(seed)) == GOLDEN[seed]
