"""priority_class against the lab API server."""

from .helpers import read_json


def test_create_check_mode_idempotence_update_and_delete(priority_classes, scheduling_v1, run_module):
    name = priority_classes("high-priority")
    check = run_module("priority_class", check_mode=True, name=name, value=1000000, description="customer facing")
    assert check["changed"] is True and check["diff"]["before"] == {}
    assert check["diff"]["after"] == {"value": 1000000, "globalDefault": False,
                                      "preemptionPolicy": "PreemptLowerPriority", "description": "customer facing"}
    assert name not in [pc["metadata"]["name"] for pc in read_json(scheduling_v1.list_priority_class)["items"]]

    created = run_module("priority_class", name=name, value=1000000, description="customer facing")
    assert created["changed"] is True and created["priority_class"]["value"] == 1000000
    assert run_module("priority_class", name=name, value=1000000)["changed"] is False

    described = run_module("priority_class", name=name, value=1000000, description="changed")
    assert described["changed"] is True and described["recreated"] is False
    assert read_json(scheduling_v1.read_priority_class, name)["description"] == "changed"

    deleted = run_module("priority_class", name=name, state="absent")
    assert deleted["changed"] is True and deleted["diff"]["after"] == {}
    assert run_module("priority_class", name=name, state="absent")["changed"] is False


def test_force_recreates_with_the_new_value(priority_classes, scheduling_v1, run_module):
    name = priority_classes("batch")
    assert run_module("priority_class", name=name, value=100)["changed"] is True
    uid = read_json(scheduling_v1.read_priority_class, name)["metadata"]["uid"]

    preview = run_module("priority_class", check_mode=True, name=name, value=200, preemption_policy="Never", force=True)
    assert preview["changed"] is True and preview["recreated"] is True
    assert preview["diff"]["before"]["value"] == 100 and preview["diff"]["after"]["value"] == 200
    assert read_json(scheduling_v1.read_priority_class, name)["metadata"]["uid"] == uid

    recreated = run_module("priority_class", name=name, value=200, preemption_policy="Never", force=True)
    assert recreated["changed"] is True and recreated["recreated"] is True
    stored = read_json(scheduling_v1.read_priority_class, name)
    assert (stored["value"], stored["preemptionPolicy"]) == (200, "Never") and stored["metadata"]["uid"] != uid
    assert run_module("priority_class", name=name, value=200, preemption_policy="Never", force=True)["changed"] is False


def test_global_default_can_move_when_released_first(priority_classes, run_module):
    first, second = priority_classes("default-a"), priority_classes("default-b")
    assert run_module("priority_class", name=first, value=10, global_default=True)["changed"] is True
    assert run_module("priority_class", name=first, value=10, global_default=False)["changed"] is True
    assert run_module("priority_class", name=second, value=20, global_default=True)["changed"] is True
