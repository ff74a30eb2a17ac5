"""The structured allocator on kubesched's side: which devices, which node selector, which error."""

import pytest
from dra_objects import DRIVER, claim, device_class, gpu_slice, partitionable_slices, request

from kubesched.dra.allocator import AllocationError, Allocator, FailedOnNode
from kubesched.dra.cel import SelectorCache
from kubesched.framework.types import NodeInfo

# Every test once per CEL backend (conftest.cel_backend).
pytestmark = pytest.mark.usefixtures("cel_backend")


def node(name="n1", labels=None):
    return NodeInfo({"metadata": {"name": name, "labels": labels or {}}, "status": {"allocatable": {}}})


def allocate(claims, slices, classes=None, allocated=(), on="n1"):
    classes = classes or {"gpu.example.com": device_class()}
    return Allocator(set(allocated), classes, slices, SelectorCache()).allocate(node(on), claims)


def devices(result):
    return [[(r["request"], r["pool"], r["device"]) for r in a["devices"]["results"]] for a in result]


def test_one_gpu_by_class_takes_the_first_free_device_of_this_node():
    result = allocate([claim()], [gpu_slice("n1"), gpu_slice("n2")], allocated={(DRIVER, "n1", "gpu-0")})
    assert devices(result) == [[("gpu", "n1", "gpu-1")]]
    assert result[0]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


def test_two_claims_never_share_a_device():
    assert devices(allocate([claim("a"), claim("b")], [gpu_slice("n1", 2)])) == [
        [("gpu", "n1", "gpu-0")], [("gpu", "n1", "gpu-1")]]
    assert allocate([claim("a"), claim("b"), claim("c")], [gpu_slice("n1", 2)]) is None


def test_match_attribute_backs_off_to_devices_on_one_pcie_root():
    # gpu-0 is taken: gpu-1 alone on pci0, so both devices come from pci1.
    c = claim("c", request(count=2), constraints=[{"matchAttribute": f"{DRIVER}/pcieRoot"}])
    result = allocate([c], [gpu_slice("n1", 4)], allocated={(DRIVER, "n1", "gpu-0")})
    assert devices(result) == [[("gpu", "n1", "gpu-2"), ("gpu", "n1", "gpu-3")]]


def test_distinct_attribute_takes_devices_from_different_roots():
    c = claim("c", request(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/pcieRoot"}])
    assert devices(allocate([c], [gpu_slice("n1", 4)])) == [[("gpu", "n1", "gpu-0"), ("gpu", "n1", "gpu-2")]]


def test_first_available_falls_back_to_the_next_subrequest():
    c = claim("c", {"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.example.com", "count": 1,
         "selectors": [{"cel": {"expression": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0'}}]},
        {"name": "small", "deviceClassName": "gpu.example.com", "count": 1}]})
    assert devices(allocate([c], [gpu_slice("n1", 2)])) == [[("r/small", "n1", "gpu-0")]]


def test_all_mode_takes_every_matching_device_or_nothing():
    assert devices(allocate([claim("c", request(mode="All"))], [gpu_slice("n1", 3)])) == [
        [("gpu", "n1", "gpu-0"), ("gpu", "n1", "gpu-1"), ("gpu", "n1", "gpu-2")]]
    assert allocate([claim("c", request(mode="All"))], [gpu_slice("n1", 3)], allocated={(DRIVER, "n1", "gpu-1")}) is None


def test_shared_counters_allow_two_halves_but_not_whole_and_half():
    assert devices(allocate([claim("c", request(count=2))], partitionable_slices("n1"))) == [
        [("gpu", "n1-part", "half-0"), ("gpu", "n1-part", "half-1")]]
    assert allocate([claim("c")], partitionable_slices("n1"), allocated={(DRIVER, "n1-part", "half-0")}) is not None
    result = allocate([claim("c")], partitionable_slices("n1"), allocated={(DRIVER, "n1-part", "half-0")})
    assert devices(result) == [[("gpu", "n1-part", "half-1")]]


def test_tainted_device_needs_a_toleration():
    taint = {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"}
    slices = [gpu_slice("n1", 2, taints={0: taint})]
    assert devices(allocate([claim()], slices)) == [[("gpu", "n1", "gpu-1")]]
    tolerating = claim("c", request(tolerations=[{"key": "example.com/broken", "operator": "Exists"}]))
    result = allocate([tolerating], slices)
    assert devices(result) == [[("gpu", "n1", "gpu-0")]]
    assert result[0]["devices"]["results"][0]["tolerations"] == [{"key": "example.com/broken", "operator": "Exists"}]


def test_admin_access_may_use_an_allocated_device():
    c = claim("c", request(adminAccess=True))
    result = allocate([c], [gpu_slice("n1", 1)], allocated={(DRIVER, "n1", "gpu-0")})
    assert result[0]["devices"]["results"][0] == {"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                  "device": "gpu-0", "adminAccess": True}


def test_class_and_claim_config_are_copied_into_the_result():
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"sharing": "timeslice"}}}
    classes = {"gpu.example.com": device_class(config=[opaque])}
    c = claim("c", request(), config=[{"requests": ["gpu"], **opaque}])
    config = allocate([c], [gpu_slice("n1", 1)], classes)[0]["devices"]["config"]
    assert config == [{"source": "FromClass", **opaque}, {"source": "FromClaim", **opaque}]


def test_selector_on_attributes_capacity_and_versions():
    selectors = (f'device.attributes["{DRIVER}"].index >= 2',
                 f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.0.0"))',
                 f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("16Gi"))')
    assert devices(allocate([claim("c", request(selectors=selectors))], [gpu_slice("n1", 4)])) == [
        [("gpu", "n1", "gpu-2")]]


def test_missing_attribute_is_a_cel_runtime_error_naming_the_device():
    c = claim("c", request(selectors=(f'device.attributes["{DRIVER}"].missing == "x"',)))
    with pytest.raises(AllocationError, match=r"claim default/c: selector #0 on device gpu.example.com/n1/gpu-0: "
                                              r"CEL runtime error: no such key: missing"):
        allocate([c], [gpu_slice("n1", 1)])


def test_malformed_selector_is_a_compile_error():
    classes = {"gpu.example.com": device_class("gpu.example.com", "device.driver ==")}
    with pytest.raises(AllocationError, match="class gpu.example.com: selector #0: CEL compile error"):
        allocate([claim()], [gpu_slice("n1", 1)], classes)


def test_missing_class_is_an_error():
    with pytest.raises(AllocationError, match="could not retrieve device class nope"):
        allocate([claim("c", request(cls="nope"))], [gpu_slice("n1", 1)])


def test_incomplete_pool_is_skipped_and_duplicate_device_names_make_the_pool_invalid():
    assert allocate([claim()], [gpu_slice("n1", 1, slice_count=2)]) is None
    broken = gpu_slice("n1", 2)
    broken["spec"]["devices"][1]["name"] = "gpu-0"
    with pytest.raises(FailedOnNode, match="invalid resource pools were encountered"):
        allocate([claim()], [broken])


def test_slice_of_another_node_offers_nothing_here():
    assert allocate([claim()], [gpu_slice("n2")]) is None


def test_a_search_longer_than_filter_timeout_is_an_error_naming_the_node():
    from kubesched.dra.allocator import AllocationTimeout

    # 16 devices, half on each root, a pair that must share a root it cannot get and a 5th
    # device: the search walks many combinations before giving up.
    c = claim("c", request(count=9), constraints=[{"matchAttribute": f"{DRIVER}/pcieRoot"}])
    allocator = Allocator(set(), {"gpu.example.com": device_class()}, [gpu_slice("n1", 16)], SelectorCache(),
                          timeout=1e-9)
    with pytest.raises(AllocationTimeout, match="^node n1: timed out trying to allocate devices$"):
        allocator.allocate(node("n1"), [c])
