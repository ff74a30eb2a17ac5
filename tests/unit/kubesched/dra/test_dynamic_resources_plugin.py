"""DynamicResources at each extension point, with the manager fed through the informers and the
fake client (edge cases; the lab tests run it against a real API server beside kube-scheduler)."""

import pytest
from dra_objects import DRIVER, claim, device_class, gpu_slice, request
from kubesched_fakes import FakeClient

from kubesched import client as client_module
from kubesched.client import ApiError
from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.dynamic_resources import DynamicResources

# Every test once per CEL backend (conftest.cel_backend).
pytestmark = pytest.mark.usefixtures("cel_backend")


def plugin(claims=(), slices=(), classes=None, client=None):
    handle = Handle(client=client or FakeClient())
    for c in claims:
        handle.informers.put("resourceclaims", c)
    for s in slices:
        handle.informers.put("resourceslices", s)
    for c in (classes if classes is not None else [device_class()]):
        handle.informers.put("deviceclasses", c)
    return DynamicResources(None, handle)


def failing_status_update():
    client = FakeClient()
    client.fail("PUT", ApiError(500, "InternalError", "etcd is sad"), match="/status")
    return client


def pod(name="p", claims=(("gpu", "claim"),), statuses=None):
    spec = {"containers": [{"name": "c"}],
            "resourceClaims": [{"name": n, "resourceClaimName": c} if c else
                               {"name": n, "resourceClaimTemplateName": "tmpl"} for n, c in claims]}
    status = {"resourceClaimStatuses": statuses} if statuses is not None else {}
    return PodInfo({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec,
                    "status": status})


def node(name):
    return NodeInfo({"metadata": {"name": name, "labels": {}}, "status": {"allocatable": {"pods": "10"}}})


def cycle(p, the_pod, nodes):
    state = CycleState()
    _unused, status = p.pre_filter(state, the_pod, nodes)
    return state, status


def test_pod_without_claims_skips_every_point():
    p = plugin()
    plain = PodInfo({"metadata": {"name": "x", "namespace": "default", "uid": "u"}, "spec": {"containers": []}})
    assert p.pre_enqueue(plain) is None
    state, status = cycle(p, plain, [node("n1")])
    assert status.code == Code.SKIP
    assert p.filter(state, plain, node("n1")) is None
    assert p.reserve(state, plain, "n1") is None and p.pre_bind(state, plain, "n1") is None


def test_template_claim_not_created_yet_waits_in_pre_enqueue():
    status = plugin().pre_enqueue(pod(claims=(("gpu", None),)))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ['pod "default/p": ResourceClaim not created yet']


def test_template_claim_is_found_through_the_pod_status_and_must_be_owned_by_the_pod():
    generated = claim("p-gpu-abcde")
    generated["metadata"]["ownerReferences"] = [{"uid": "uid-p", "controller": True, "kind": "Pod", "name": "p"}]
    the_pod = pod(claims=(("gpu", None),), statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}])
    p = plugin([generated], [gpu_slice("n1", 1)])
    assert p.pre_enqueue(the_pod) is None
    generated["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert "was not created for Pod default/p (Pod is not owner)" in p.pre_enqueue(the_pod).reasons[0]


def test_missing_device_class_is_unschedulable_with_upstreams_reason():
    p = plugin([claim("claim", request(cls="nope"))], [gpu_slice("n1", 1)])
    _state, status = cycle(p, pod(), [node("n1")])
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             ["request gpu: device class nope does not exist"])


def test_filter_allocates_per_node_and_rejects_where_nothing_fits():
    p = plugin([claim()], [gpu_slice("n1", 1)])
    state, status = cycle(p, pod(), [node("n1"), node("n2")])
    assert status is None
    assert p.filter(state, pod(), node("n1")) is None
    rejected = p.filter(state, pod(), node("n2"))
    assert (rejected.code, rejected.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["cannot allocate all claims"])


def test_malformed_cel_is_an_error_status_naming_the_class():
    p = plugin([claim()], [gpu_slice("n1", 1)], [device_class("gpu.example.com", "device.driver ==")])
    state, _status = cycle(p, pod(), [node("n1")])
    status = p.filter(state, pod(), node("n1"))
    assert status.code == Code.ERROR and status.reasons[0].startswith(
        "class gpu.example.com: selector #0: CEL compile error: ")


def test_reserved_device_is_not_given_to_the_next_pod_and_unreserve_frees_it():
    p = plugin([claim("a", uid="ua"), claim("b", uid="ub")], [gpu_slice("n1", 1)])
    first, second = pod("p1", (("gpu", "a"),)), pod("p2", (("gpu", "b"),))
    state1, _unused = cycle(p, first, [node("n1")])
    assert p.filter(state1, first, node("n1")) is None
    assert p.reserve(state1, first, "n1") is None
    state2, _unused = cycle(p, second, [node("n1")])
    assert p.filter(state2, second, node("n1")).reasons == ["cannot allocate all claims"]
    p.unreserve(state1, first, "n1")
    state3, _unused = cycle(p, second, [node("n1")])
    assert p.filter(state3, second, node("n1")) is None


def test_pre_bind_writes_finalizer_allocation_and_reservation():
    client = FakeClient()
    p = plugin([claim()], [gpu_slice("n1", 2)], client=client)
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    p.filter(state, the_pod, node("n1"))
    p.reserve(state, the_pod, "n1")
    assert p.pre_bind(state, the_pod, "n1") is None
    (m1, path1, body1), (m2, path2, body2) = client.calls
    assert (m1, path1) == ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/claim")
    assert body1["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert (m2, path2) == ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/claim/status")
    assert body2["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
    assert body2["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    # The informer has not seen the write yet: the assumed claim keeps gpu-0 taken.
    assert (DRIVER, "n1", "gpu-0") in p.manager.allocated_devices()
    assert p.manager.in_flight == {}


def test_failed_pre_bind_leaves_no_allocation_behind():
    p = plugin([claim()], [gpu_slice("n1", 1)], client=failing_status_update())
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    p.filter(state, the_pod, node("n1"))
    p.reserve(state, the_pod, "n1")
    status = p.pre_bind(state, the_pod, "n1")
    assert status.code == Code.ERROR and "add allocation and reservation to claim default/claim" in status.reasons[0]
    p.unreserve(state, the_pod, "n1")
    assert p.manager.allocated_devices() == set()


class AwayAfterWrite(FakeClient):
    """The API server refuses the first `away` GETs (it restarts), then answers."""

    away = 0

    def get(self, path, params=None):
        if self.away:
            self.away -= 1
            self._call("GET", path)
            raise ConnectionRefusedError(111, "Connection refused")
        return super().get(path, params)


def claim_write_without_answer(monkeypatch, landed):
    """A plugin whose claim status write gets no answer (the connection reset after the request
    left); with landed, the claim as the API server then has it: allocated and reserved."""
    monkeypatch.setattr(client_module, "READ_BACK_PAUSE_S", 0.0)
    client = AwayAfterWrite()
    client.fail("PUT", ConnectionResetError("Connection reset by peer"), match="/status")
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/claim"
    if landed:
        written = claim()
        written["metadata"]["resourceVersion"] = "3"
        written["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}
        client.answers[path] = written
    p = plugin([claim()], [gpu_slice("n1", 1)], client=client)
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    p.filter(state, the_pod, node("n1"))
    p.reserve(state, the_pod, "n1")
    return p, the_pod, state, client


def test_a_claim_write_whose_answer_was_lost_is_read_back_and_kept_when_it_was_made(monkeypatch):
    p, the_pod, state, client = claim_write_without_answer(monkeypatch, landed=True)
    assert p.pre_bind(state, the_pod, "n1") is None
    assert client.calls[-1][0] == "GET"
    # The device stays taken: the next pod must not get it before the watch shows the write.
    assert (DRIVER, "n1", "gpu-0") in p.manager.allocated_devices()


def test_a_claim_write_whose_answer_was_lost_keeps_its_devices_until_the_api_server_answers(monkeypatch):
    """The soak's API server restarts: three read-backs 1 s apart all came while it was away,
    and the allocation was undone though the write had been made."""
    p, the_pod, state, client = claim_write_without_answer(monkeypatch, landed=True)
    client.away = 20
    assert p.pre_bind(state, the_pod, "n1") is None
    assert [verb for verb, _target, _body in client.calls].count("GET") == 21
    assert (DRIVER, "n1", "gpu-0") in p.manager.allocated_devices()


def test_a_claim_write_whose_answer_was_lost_is_undone_when_the_scheduler_stops_before_an_answer(monkeypatch):
    p, the_pod, state, client = claim_write_without_answer(monkeypatch, landed=True)
    client.away = 10**9
    p.handle.stopping.set()  # the next leader decides
    with pytest.raises(ConnectionResetError):
        p.pre_bind(state, the_pod, "n1")
    assert [verb for verb, _target, _body in client.calls].count("GET") == 1
    p.unreserve(state, the_pod, "n1")
    assert p.manager.allocated_devices() == set()


def test_a_claim_write_whose_answer_was_lost_and_that_was_not_made_fails_as_before(monkeypatch):
    p, the_pod, state, client = claim_write_without_answer(monkeypatch, landed=False)
    with pytest.raises(ConnectionResetError):
        p.pre_bind(state, the_pod, "n1")
    assert [verb for verb, _target, _body in client.calls].count("GET") == 1  # unallocated: no second look
    p.unreserve(state, the_pod, "n1")
    assert p.manager.allocated_devices() == set()


def test_claim_allocated_elsewhere_and_reserved_only_for_this_pod_is_deallocated_in_post_filter():
    allocated = claim()
    allocated["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}
    client = FakeClient()
    p = plugin([allocated], [gpu_slice("n1", 1)], client=client)
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    assert p.filter(state, the_pod, node("n1")).reasons == ["resourceclaim not available on the node"]
    _node, status = p.post_filter(state, the_pod, {})
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, ["deallocation of ResourceClaim completed"])
    (_method, path, body), = client.calls
    assert path.endswith("/resourceclaims/claim/status") and "allocation" not in body["status"]


def test_pod_group_post_filter_deallocates_each_tried_members_claim_as_post_filter_does():
    def allocated_to(name):
        allocated = claim(f"claim-{name}")
        allocated["status"] = {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2",
                                                    "device": "gpu-0"}]},
                           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                               {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}
        return allocated

    client = FakeClient()
    p = plugin([allocated_to("a"), allocated_to("b"), allocated_to("c")], [gpu_slice("n1", 1)], client=client)
    members = [pod(name, claims=(("gpu", f"claim-{name}"),)) for name in ("a", "b", "c")]
    states = []
    for member in members[:2]:  # the cycle tried two of the three
        state, _unused = cycle(p, member, [node("n1")])
        assert p.filter(state, member, node("n1")).reasons == ["resourceclaim not available on the node"]
        states.append(state)
    nominations, status = p.pod_group_post_filter({}, members, states, None)
    assert nominations == {}
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, ["deallocation and deletion of ResourceClaims completed"])
    assert sorted(path.rsplit("/", 2)[-2] for _method, path, _body in client.calls) == ["claim-a", "claim-b"]
    assert all("allocation" not in body["status"] for _method, _path, body in client.calls)


def test_pod_group_post_filter_fails_when_no_member_reached_pre_filter_and_stops_at_an_api_error():
    p = plugin([claim()], [gpu_slice("n1", 1)], client=failing_status_update())
    status = p.pod_group_post_filter({}, [pod()], [CycleState()], None)[1]
    assert (status.code, status.reasons) == (Code.ERROR, ["not found"])
    allocated = claim()
    allocated["status"] = {"allocation": {"devices": {"results": []}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    p = plugin([allocated], [gpu_slice("n1", 1)], client=failing_status_update())
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    p.filter(state, the_pod, node("n1"))
    status = p.pod_group_post_filter({}, [the_pod], [state], None)[1]
    assert status.code == Code.ERROR and "etcd is sad" in status.message()


def test_score_prefers_the_earlier_subrequest():
    first_available = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.example.com", "count": 1,
         "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}]},
        {"name": "any", "deviceClassName": "gpu.example.com", "count": 1}]}
    p = plugin([claim("claim", first_available)],
               [gpu_slice("n1", 1, models=("H100",)), gpu_slice("n2", 1, models=("A100",))])
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1"), node("n2")])
    p.filter(state, the_pod, node("n1"))
    p.filter(state, the_pod, node("n2"))
    assert p.pre_score(state, the_pod, []) is None
    assert (p.score(state, the_pod, node("n1")), p.score(state, the_pod, node("n2"))) == (8, 7)


def gpu_pod(count="2", name="p"):
    return PodInfo({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                    "spec": {"containers": [{"name": "main", "resources": {"requests": {"example.com/gpu": count}}}]}})


def extended_class():
    cls = device_class()
    cls["spec"]["extendedResourceName"] = "example.com/gpu"
    return cls


def test_extended_resource_backed_by_dra_gets_devices_and_a_claim_made_in_pre_bind():
    client = FakeClient()
    p = plugin([], [gpu_slice("n1", 4)], [extended_class()], client=client)
    the_pod = gpu_pod()
    state, status = cycle(p, the_pod, [node("n1")])
    assert status is None
    assert p.filter(state, the_pod, node("n1")) is None
    assert p.reserve(state, the_pod, "n1") is None
    assert p.pre_bind(state, the_pod, "n1") is None
    (post, path, body), _finalizer, (_put, status_path, status_body), (patch, pod_path, pod_patch) = client.calls
    assert (post, path) == ("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")
    assert body["metadata"]["generateName"] == "p-extended-resources-" and "name" not in body["metadata"]
    assert body["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert body["spec"] == {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}]}}
    assert status_path.endswith("/resourceclaims/p-extended-resources-x1y2z/status")
    assert [r["device"] for r in status_body["status"]["allocation"]["devices"]["results"]] == ["gpu-0", "gpu-1"]
    assert (patch, pod_path) == ("patch_status", "default/p")
    assert pod_patch["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "main", "resourceName": "example.com/gpu",
                             "requestName": "container-0-request-0"}],
        "resourceClaimName": "p-extended-resources-x1y2z"}


def test_extended_resource_on_a_node_with_a_device_plugin_uses_the_nodes_allocatable():
    p = plugin([], [gpu_slice("n1", 4)], [extended_class()])
    the_pod = gpu_pod()
    state, _status = cycle(p, the_pod, [node("n1")])
    with_plugin = NodeInfo({"metadata": {"name": "n1", "labels": {}},
                            "status": {"allocatable": {"pods": "10", "example.com/gpu": "4"}}})
    assert p.filter(state, the_pod, with_plugin) is None
    assert p.reserve(state, the_pod, "n1") is None and p.pre_bind(state, the_pod, "n1") is None
    assert p.handle.client.calls == []


def test_extended_resource_without_free_devices_cannot_allocate():
    p = plugin([], [gpu_slice("n1", 1)], [extended_class()])
    the_pod = gpu_pod()
    state, _status = cycle(p, the_pod, [node("n1")])
    assert p.filter(state, the_pod, node("n1")).reasons == ["cannot allocate all claims"]


def test_node_resources_fit_leaves_a_dra_backed_resource_to_dynamic_resources():
    from kubesched.plugins.node_resources_fit import NodeResourcesFit

    handle = Handle()
    handle.informers.put("deviceclasses", extended_class())
    fit = NodeResourcesFit(None, handle)
    state = CycleState()
    fit.pre_filter(state, gpu_pod(), [])
    assert fit.filter(state, gpu_pod(), node("n1")) is None
    handle.informers.remove("deviceclasses", extended_class())
    state = CycleState()
    fit.pre_filter(state, gpu_pod(), [])
    assert fit.filter(state, gpu_pod(), node("n1")).reasons == ["Insufficient example.com/gpu"]


def test_device_taint_rule_taints_the_devices_it_selects():
    p = plugin([claim()], [gpu_slice("n1", 2)])
    p.handle.informers.put("devicetaintrules", {"metadata": {"name": "maintenance"}, "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
        "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}})
    the_pod = pod()
    state, _unused = cycle(p, the_pod, [node("n1")])
    assert p.filter(state, the_pod, node("n1")) is None
    assert [r["device"] for r in state.get("DynamicResources").allocations_on("n1")[0]["devices"]["results"]] == [
        "gpu-1"]
    # The informer's object is left as the API server sent it.
    assert "taints" not in p.manager.slices[f"n1-{DRIVER}"]["spec"]["devices"][0]
