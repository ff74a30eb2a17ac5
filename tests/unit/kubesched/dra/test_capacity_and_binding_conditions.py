"""Consumable capacity, binding conditions and the CEL cost limit (edge cases; the golden test
runs upstream's allocator over generated scenarios with both features, the lab tests run both
schedulers)."""

import copy

import pytest
from dra_objects import DRIVER, claim, gpu_slice, request
from kubesched_fakes import FakeClient
from test_dynamic_resources_plugin import cycle, node, plugin, pod

from kubesched.backend.informers import InformerRegistry
from kubesched.dra.allocator import AllocationError, Allocator
from kubesched.dra.capacity import consumed_capacity, format_quantity, request_fits
from kubesched.dra.cel import SelectorCache
from kubesched.dra.manager import DRAManager
from kubesched.framework.interface import Code
from kubesched.framework.quantity import parse_quantity
from kubesched.plugins import dynamic_resources

# Every test once per CEL backend (conftest.cel_backend).
pytestmark = pytest.mark.usefixtures("cel_backend")

RANGE_POLICY = {"default": "4Gi", "validRange": {"min": "4Gi", "step": "4Gi", "max": "32Gi"}}


def shared_gpu_slice(node_name: str, count: int = 1, policy: dict | None = None) -> dict:
    s = gpu_slice(node_name, count)
    for device in s["spec"]["devices"]:
        device["allowMultipleAllocations"] = True
        if policy is not None:
            device["capacity"]["memory"]["requestPolicy"] = policy
    return s


def memory_request(name: str, memory: str) -> dict:
    return request(name, capacity={"requests": {"memory": memory}})


def allocate(slices, claims, allocated=(), shared=None):
    classes = {"gpu.example.com": {"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}}
    return Allocator(set(allocated), classes, slices, SelectorCache(), shared=shared).allocate(node("n1"), claims)


def test_request_is_rounded_up_by_the_range_policy_and_the_device_is_shared():
    results = allocate([shared_gpu_slice("n1", policy=RANGE_POLICY)],
                       [claim("a", memory_request("gpu", "5Gi")), claim("b", memory_request("gpu", "30Gi"))])
    (a,), (b,) = (r["devices"]["results"] for r in results)
    assert a["device"] == b["device"] == "gpu-0"
    assert a["consumedCapacity"] == {"memory": "8Gi"} and b["consumedCapacity"] == {"memory": "32Gi"}
    assert a["shareID"] != b["shareID"]


def test_shares_already_allocated_count_against_the_capacity():
    the_slice = shared_gpu_slice("n1", count=2, policy=RANGE_POLICY)
    used = {(DRIVER, "n1", "gpu-0"): {"memory": parse_quantity("32Gi")}}
    (result,) = allocate([the_slice], [claim("a", memory_request("gpu", "10Gi"))], shared=used)
    assert result["devices"]["results"][0]["device"] == "gpu-1"


def test_a_request_without_capacity_takes_the_default_and_above_max_fits_nowhere():
    assert consumed_capacity(None, {"memory": {"value": "40Gi", "requestPolicy": RANGE_POLICY}}) == {
        "memory": (parse_quantity("4Gi"), "BinarySI")}
    assert allocate([shared_gpu_slice("n1", policy=RANGE_POLICY)], [claim("a", memory_request("gpu", "33Gi"))]) is None


def test_valid_values_round_up_to_the_next_value():
    policy = {"default": "8Gi", "validValues": ["8Gi", "16Gi"]}
    capacities = {"memory": {"value": "40Gi", "requestPolicy": policy}}
    assert consumed_capacity({"requests": {"memory": "9Gi"}}, capacities) == {"memory": (parse_quantity("16Gi"), "BinarySI")}
    assert not request_fits(None, {"requests": {"memory": "17Gi"}}, capacities, None)


def test_an_exclusive_device_checks_capacity_but_is_held_whole():
    slices = [gpu_slice("n1", 2, memory="40Gi")]
    assert allocate(slices, [claim("a", memory_request("gpu", "41Gi"))]) is None
    (result,) = allocate(slices, [claim("a", memory_request("gpu", "10Gi"))])
    entry = result["devices"]["results"][0]
    assert "shareID" not in entry and "consumedCapacity" not in entry


@pytest.mark.parametrize("value,fmt,text", [
    (12 * 2**30, "BinarySI", "12Gi"), (1536 * 2**20, "BinarySI", "1536Mi"), (1000, "BinarySI", "1k"),
    (12 * 2**30, "DecimalSI", "12884901888"), (15000, "DecimalSI", "15k"), (parse_quantity("0.5"), "DecimalSI", "500m"),
])
def test_consumed_capacity_prints_as_go_prints_a_quantity(value, fmt, text):
    assert format_quantity(value, fmt) == text


def test_a_request_for_a_capacity_the_device_lacks_skips_it():
    assert allocate([shared_gpu_slice("n1")], [claim("a", request("gpu", capacity={"requests": {"cores": "1"}}))]) is None


def test_manager_counts_shares_of_allocated_claims_apart_from_whole_devices():
    informers = InformerRegistry()
    manager = DRAManager(informers)
    held = claim("held")
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0", "shareID": "s1",
         "consumedCapacity": {"memory": "8Gi"}},
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-1"}]}}}
    informers.put("resourceclaims", held)
    whole, shared = manager.allocated_state()
    assert whole == {(DRIVER, "n1", "gpu-1")}
    assert shared == {(DRIVER, "n1", "gpu-0"): {"memory": parse_quantity("8Gi")}}


def allocated_to(name: str, rv: str, *results: dict) -> dict:
    c = claim(name)
    c["metadata"]["resourceVersion"] = rv
    c["status"] = {"allocation": {"devices": {"results": list(results)}}}
    return c


def whole(device: str) -> dict:
    return {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}


def share(device: str, memory: str, share_id: str) -> dict:
    return {**whole(device), "shareID": share_id, "consumedCapacity": {"memory": memory}}


def test_manager_counts_held_devices_as_claims_change_not_per_cycle():
    informers = InformerRegistry()
    manager = DRAManager(informers)
    informers.put("resourceclaims", allocated_to("a", "1", whole("gpu-0"), share("gpu-2", "8Gi", "s1")))
    informers.put("resourceclaims", allocated_to("b", "1", whole("gpu-0"), share("gpu-2", "4Gi", "s2")))
    held, shared = manager.allocated_state()
    assert held == {(DRIVER, "n1", "gpu-0")}
    assert shared == {(DRIVER, "n1", "gpu-2"): {"memory": parse_quantity("12Gi")}}

    deallocated = claim("a")  # b still holds gpu-0 and its share of gpu-2
    deallocated["metadata"]["resourceVersion"] = "2"
    informers.put("resourceclaims", deallocated)
    held, shared = manager.allocated_state()
    assert held == {(DRIVER, "n1", "gpu-0")}
    assert shared == {(DRIVER, "n1", "gpu-2"): {"memory": parse_quantity("4Gi")}}

    # PreBind's write is assumed over the informer's older copy, until a rollback.
    manager.assume(allocated_to("a", "3", whole("gpu-1")))
    assert manager.allocated_state()[0] == {(DRIVER, "n1", "gpu-0"), (DRIVER, "n1", "gpu-1")}
    manager.restore("default", "a")
    assert manager.allocated_state()[0] == {(DRIVER, "n1", "gpu-0")}

    # The informer catches up with an assumed claim: counted once, from the informer's copy.
    manager.assume(allocated_to("a", "4", whole("gpu-1")))
    informers.put("resourceclaims", allocated_to("a", "4", whole("gpu-1")))
    assert manager.assumed == {}
    informers.remove("resourceclaims", claim("b"))
    held, shared = manager.allocated_state()
    assert held == {(DRIVER, "n1", "gpu-1")} and shared == {}
    informers.remove("resourceclaims", claim("a"))
    assert manager.allocated_state() == (set(), {})


def test_an_allocation_in_flight_counts_its_shares_until_the_written_claim_does():
    informers = InformerRegistry()
    manager = DRAManager(informers)
    pending = allocated_to("a", "1", share("gpu-2", "8Gi", "s1"))
    informers.put("resourceclaims", claim("a"))
    manager.signal_pending_allocation("uid-a", pending)
    assert manager.allocated_state()[1] == {(DRIVER, "n1", "gpu-2"): {"memory": parse_quantity("8Gi")}}
    manager.assume(allocated_to("a", "2", share("gpu-2", "8Gi", "s1")))
    assert manager.allocated_state()[1] == {(DRIVER, "n1", "gpu-2"): {"memory": parse_quantity("8Gi")}}
    manager.remove_pending_allocation("uid-a")
    assert manager.allocated_state()[1] == {(DRIVER, "n1", "gpu-2"): {"memory": parse_quantity("8Gi")}}


# --- binding conditions ---------------------------------------------------------------------------

def conditioned_slice() -> dict:
    s = gpu_slice("n1", 1)
    s["spec"]["devices"][0].update(bindingConditions=["example.com/attached"],
                                   bindingFailureConditions=["example.com/failed"])
    return s


class Recorder:
    def __init__(self):
        self.events = []

    def eventf(self, obj, type_, reason, action, message):
        self.events.append((type_, reason, action, message))


def reserved_and_pre_bound(p, monkeypatch, driver_status=None, timeout=30.0):
    """Run the cycle up to PreBind; driver_status, if given, is what the driver reports."""
    monkeypatch.setattr(dynamic_resources, "BINDING_CONDITIONS_POLL_INTERVAL", 0.02)
    p.binding_timeout = timeout
    p.handle.event_recorder = Recorder()
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    assert p.filter(state, the_pod, node("n1")) is None
    p.reserve(state, the_pod, "n1")
    if driver_status is not None:
        real_bind = p._bind_claim

        def bind_then_driver_reports(*args):
            bound = real_bind(*args)
            reported = copy.deepcopy(bound)
            reported["metadata"]["resourceVersion"] = "100"
            reported["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "gpu-0",
                                              "conditions": driver_status}]
            p.handle.informers.put("resourceclaims", reported)
            return bound
        monkeypatch.setattr(p, "_bind_claim", bind_then_driver_reports)
    return p.pre_bind(state, the_pod, "n1"), p.handle.event_recorder.events


def test_allocation_carries_the_devices_binding_conditions():
    (result,) = allocate([conditioned_slice()], [claim()])
    assert result["devices"]["results"][0]["bindingConditions"] == ["example.com/attached"]
    assert result["devices"]["results"][0]["bindingFailureConditions"] == ["example.com/failed"]


def test_pre_bind_waits_until_the_driver_reports_the_conditions_true(monkeypatch):
    p = plugin([claim()], [conditioned_slice()])
    status, events = reserved_and_pre_bound(
        p, monkeypatch, [{"type": "example.com/attached", "status": "True", "reason": "Attached"}])
    assert status is None
    assert events == [("Normal", "BindingConditionsPending", "Scheduling",
                       "waiting for binding conditions for device on node n1")]


def test_a_binding_failure_condition_fails_pre_bind_with_upstreams_words(monkeypatch):
    p = plugin([claim()], [conditioned_slice()])
    status, _events = reserved_and_pre_bound(
        p, monkeypatch, [{"type": "example.com/failed", "status": "True", "reason": "NoLink", "message": "cable out"}])
    assert (status.code, status.reasons) == (
        Code.ERROR, ['device binding failed: claim=claim, reason=NoLink, message="cable out"'])


def test_pre_bind_gives_up_after_the_binding_timeout(monkeypatch):
    p = plugin([claim()], [conditioned_slice()], client=FakeClient())
    status, _events = reserved_and_pre_bound(p, monkeypatch, timeout=0.1)
    assert status.code == Code.ERROR and status.reasons[0].startswith("device binding timeout")


@pytest.mark.parametrize("conditions", [
    [{"type": "example.com/failed", "status": "True", "reason": "NoLink"}],
    [],  # not ready, allocated longer than bindingTimeout ago
])
def test_filter_finds_a_failed_or_timed_out_binding_unavailable_and_post_filter_deallocates(conditions):
    allocated = claim()
    allocated["status"] = {
        "allocation": {"allocationTimestamp": "2020-01-01T00:00:00Z", "devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
             "bindingConditions": ["example.com/attached"], "bindingFailureConditions": ["example.com/failed"]}]}},
        "devices": [{"driver": DRIVER, "pool": "n1", "device": "gpu-0", "conditions": conditions}]}
    client = FakeClient()
    p = plugin([allocated], [conditioned_slice()], client=client)
    state, _unused = cycle(p, pod(), [node("n1")])
    assert p.filter(state, pod(), node("n1")).reasons == ["resourceclaim not available on the node"]
    _node, status = p.post_filter(state, pod(), {})
    assert status.reasons == ["deallocation of ResourceClaim completed"]
    (_method, _path, body), = client.calls
    assert "devices" not in body["status"] and "allocation" not in body["status"]


# --- the CEL cost limit ---------------------------------------------------------------------------

EXPENSIVE = ("cel.bind(l, [" + ", ".join(str(i) for i in range(100)) + "], "
             "l.all(a, l.all(b, l.all(c, a + b + c >= 0))))")


def test_an_expensive_selector_is_refused_with_upstreams_words():
    with pytest.raises(AllocationError) as err:
        allocate([gpu_slice("n1", 1)], [claim("a", request("gpu", selectors=(EXPENSIVE,)))])
    assert str(err.value) == ("claim default/a: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error: "
                              "operation cancelled: actual cost limit exceeded")


# --- which pods a claim event wakes (PreQueueingHint and QueueingHint) ----------------------------

def test_a_claim_event_concerns_only_the_pods_that_refer_to_the_claim():
    from kubesched.dra.manager import pods_affected_by_claim

    own, other = pod("p", (("gpu", "claim"),)), pod("q", (("gpu", "other"),))
    refers = pods_affected_by_claim(None, claim())
    assert refers(own) and not refers(other)
    allocated = claim()
    allocated["status"] = {"allocation": {"devices": {"results": []}}}
    assert pods_affected_by_claim(allocated, claim()) is None  # a deallocation may help anyone
    assert pods_affected_by_claim(allocated, None) is None


def test_claim_hint_requeues_for_the_pods_own_claim_and_skips_unrelated_changes():
    created = claim()
    p = plugin([created], [gpu_slice("n1", 1)])
    the_pod = pod()
    assert p.is_schedulable_after_claim_change(the_pod, None, created)
    assert not p.is_schedulable_after_claim_change(the_pod, created, copy.deepcopy(created))
    updated = copy.deepcopy(created)
    updated["status"] = {"reservedFor": [{"resource": "pods", "name": "x", "uid": "x"}]}
    assert p.is_schedulable_after_claim_change(the_pod, created, updated)
    unrelated = claim("unrelated", uid="u2")
    assert not p.is_schedulable_after_claim_change(the_pod, None, unrelated)
    waiting_for_another = pod("w", (("gpu", "claim"), ("nic", "missing")))
    assert not p.is_schedulable_after_claim_change(waiting_for_another, None, created)
