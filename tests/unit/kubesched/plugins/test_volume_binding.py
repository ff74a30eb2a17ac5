"""VolumeBinding: claims sorted in PreFilter, PVs matched or provisioned per node in Filter,
assumed in Reserve, written and awaited in PreBind, restored in Unreserve."""

import pytest
from plugin_builders import FakeHandle, code_and_reasons, make_node, make_pod
from volume_builders import (
    IMMEDIATE,
    claim_volume,
    make_class,
    make_pv,
    make_pvc,
    node_affinity,
)

from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    STATE_KEY,
    UNBOUND_IMMEDIATE,
    VolumeBinding,
)

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
HOST = "kubernetes.io/hostname"
NODES = [make_node(n, labels={HOST: n, "topology.kubernetes.io/zone": z}) for n, z in
         (("a", "z1"), ("b", "z1"), ("c", "z2"))]


def setup(*objects, args=None):
    handle = FakeHandle(NODES)
    handle.add("storageclasses", make_class("wait"), make_class("now", mode=IMMEDIATE),
               make_class("dyn", provisioner="csi.example.com"),
               make_class("zoned", provisioner="csi.example.com",
                          allowed_topologies=[{"matchLabelExpressions": [
                              {"key": "topology.kubernetes.io/zone", "values": ["z2"]}]}]))
    for resource, obj in objects:
        handle.add(resource, obj)
    return VolumeBinding(args, handle), handle


def pvc(*a, **kw):
    return ("persistentvolumeclaims", make_pvc(*a, **kw))


def pv(*a, **kw):
    return ("persistentvolumes", make_pv(*a, **kw))


def run(plugin, pod):
    state = CycleState()
    _unused, status = plugin.pre_filter(state, pod, NODES)
    if status is not None:
        return state, status, {}
    return state, None, {n.name: code_and_reasons(plugin.filter(state, pod, n)) for n in NODES}


def test_pod_without_claims_skips_and_writes_no_state():
    plugin, _handle = setup()
    state = CycleState()
    pod = make_pod(volumes=[{"name": "tmp", "emptyDir": {}}])
    assert plugin.pre_filter(state, pod, NODES)[1].is_skip()
    assert state.get(STATE_KEY) is None
    assert plugin.pre_score(state, pod, NODES).is_skip()


@pytest.mark.parametrize("objects, volumes, reason", [
    ((), [claim_volume("missing")], 'persistentvolumeclaim "missing" not found'),
    ((), [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}],
     'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-scratch"'),
    ((pvc("web-scratch", owner_uid="someone-else"),), [{"name": "scratch", "ephemeral": {}}],
     "PVC default/web-scratch was not created for pod default/web (pod is not owner)"),
    ((pvc("lost", phase="Lost", volume_name="gone"),), [claim_volume("lost")],
     'persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"'),
    ((pvc("old", deleting=True),), [claim_volume("old")], 'persistentvolumeclaim "old" is being deleted'),
    ((pvc("now", storage_class="now"),), [claim_volume("now")], UNBOUND_IMMEDIATE),
    # A claim without a class, or of a class that does not exist, binds immediately.
    ((pvc("classless", storage_class=None),), [claim_volume("classless")], UNBOUND_IMMEDIATE),
    ((pvc("unknown", storage_class="nope"),), [claim_volume("unknown")], UNBOUND_IMMEDIATE),
    # Pre-bound to a PV but not yet bound by the PV controller: waits like an immediate claim.
    ((pvc("prebound", volume_name="pv1"),), [claim_volume("prebound")], UNBOUND_IMMEDIATE),
])
def test_pre_filter_rejections(objects, volumes, reason):
    plugin, _handle = setup(*objects)
    _state, status, _unused = run(plugin, make_pod("web", volumes=volumes))
    assert code_and_reasons(status) == (UU, (reason,))


def test_class_without_binding_mode_is_an_error():
    plugin, handle = setup(pvc("c", storage_class="broken"))
    handle.add("storageclasses", make_class("broken", mode=None))
    _state, status, _unused = run(plugin, make_pod(volumes=[claim_volume("c")]))
    assert status.code == Code.ERROR and 'VolumeBindingMode not set for StorageClass "broken"' in status.message()


def test_bound_claim_keeps_pod_on_the_pv_node():
    plugin, _handle = setup(pvc("data", bound=True, volume_name="pv-a", storage_class="now"),
                            pv("pv-a", node="a", storage_class="now", phase="Bound"))
    _state, status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert status is None
    assert by_node == {"a": None, "b": (UU, (ERR_REASON_NODE_CONFLICT,)), "c": (UU, (ERR_REASON_NODE_CONFLICT,))}


def test_bound_claim_whose_pv_is_gone():
    plugin, _handle = setup(pvc("data", bound=True, volume_name="gone"))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert set(by_node.values()) == {(UU, (ERR_REASON_PV_NOT_EXIST,))}


def test_wait_for_first_consumer_picks_the_smallest_fitting_pv_per_node():
    plugin, _handle = setup(pvc("data", size="1Gi"), pv("big-a", node="a", size="10Gi"),
                            pv("small-a", node="a", size="2Gi"), pv("tiny-a", node="a", size="500Mi"),
                            pv("b", node="b", size="5Gi", access_modes=("ReadOnlyMany",)),
                            pv("c-block", node="c", size="5Gi", volume_mode="Block"))
    state, status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert status is None
    assert by_node == {"a": None, "b": (UU, (ERR_REASON_BIND_CONFLICT,)), "c": (UU, (ERR_REASON_BIND_CONFLICT,))}
    [(chosen, _claim)] = state.read(STATE_KEY).by_node["a"].static_bindings
    assert chosen["metadata"]["name"] == "small-a"


def test_each_pv_serves_one_claim_smallest_claim_first():
    plugin, _handle = setup(pvc("big", size="4Gi"), pvc("small", size="1Gi"), pv("pv5", node="a", size="5Gi"),
                            pv("pv2", node="a", size="2Gi"), pv("pv-b", node="b", size="5Gi"))
    state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("big", "x"), claim_volume("small", "y")]))
    assert by_node["a"] is None and by_node["b"] == (UU, (ERR_REASON_BIND_CONFLICT,))
    chosen = {c["metadata"]["name"]: p["metadata"]["name"] for p, c in state.read(STATE_KEY).by_node["a"].static_bindings}
    assert chosen == {"small": "pv2", "big": "pv5"}


def test_claim_selector_and_bound_pvs_are_respected():
    plugin, _handle = setup(pvc("data", selector={"matchLabels": {"tier": "fast"}}),
                            pv("slow", node="a", labels={"tier": "slow"}),
                            pv("taken", node="b", labels={"tier": "fast"}, phase="Bound",
                               claim=make_pvc("other")),
                            pv("fast", node="c", labels={"tier": "fast"}))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert [n for n, r in by_node.items() if r is None] == ["c"]


def test_both_bound_and_unbound_conflicts_are_reported():
    plugin, _handle = setup(pvc("bound", bound=True, volume_name="pv-a", storage_class="now"),
                            pv("pv-a", node="a", storage_class="now", phase="Bound"), pvc("wait"))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("bound", "x"), claim_volume("wait", "y")]))
    assert by_node["b"] == (UU, (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT))
    assert by_node["a"] == (UU, (ERR_REASON_BIND_CONFLICT,))


def test_selected_node_limits_a_claim_being_provisioned():
    plugin, _handle = setup(pvc("data", storage_class="dyn", selected_node="b"))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert by_node == {"a": (UU, (ERR_REASON_BIND_CONFLICT,)), "b": None, "c": (UU, (ERR_REASON_BIND_CONFLICT,))}


def test_dynamic_provisioning_honours_allowed_topologies_and_no_provisioner():
    plugin, _handle = setup(pvc("z", storage_class="zoned"), pvc("static-only", storage_class="wait"))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("z")]))
    assert by_node == {"a": (UU, (ERR_REASON_BIND_CONFLICT,)), "b": (UU, (ERR_REASON_BIND_CONFLICT,)), "c": None}
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("static-only")]))
    assert set(by_node.values()) == {(UU, (ERR_REASON_BIND_CONFLICT,))}


def capacity(name, size, zone, max_size=None, storage_class="dyn"):
    obj = {"metadata": {"name": name, "namespace": "kube-system", "resourceVersion": "1"},
           "storageClassName": storage_class, "capacity": size,
           "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": zone}}}
    if max_size:
        obj["maximumVolumeSize"] = max_size
    return ("csistoragecapacities", obj)


def test_storage_capacity_is_checked_only_for_drivers_that_publish_it():
    objects = (pvc("data", storage_class="dyn", size="5Gi"), capacity("z1", "10Gi", "z1", max_size="4Gi"),
               capacity("z2", "100Gi", "z2"))
    plugin, handle = setup(*objects)
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert set(by_node.values()) == {None}  # no CSIDriver object: capacity is not tracked
    handle.add("csidrivers", {"metadata": {"name": "csi.example.com", "resourceVersion": "1"},
                              "spec": {"storageCapacity": True}})
    state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert by_node == {"a": (UU, (ERR_REASON_NOT_ENOUGH_SPACE,)), "b": (UU, (ERR_REASON_NOT_ENOUGH_SPACE,)), "c": None}
    [(_claim, used)] = state.read(STATE_KEY).by_node["c"].dynamic_provisions
    assert used["metadata"]["name"] == "z2"


def test_a_claim_without_storage_request_needs_no_capacity():
    plugin, handle = setup(pvc("data", storage_class="dyn", size=None))
    handle.add("csidrivers", {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}})
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert set(by_node.values()) == {None}


def test_unmatched_static_claim_falls_back_to_provisioning():
    plugin, _handle = setup(pvc("data", storage_class="dyn", size="1Gi"),
                            pv("pv-a", node="a", size="1Gi", storage_class="dyn"))
    state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert set(by_node.values()) == {None}
    data = state.read(STATE_KEY)
    assert len(data.by_node["a"].static_bindings) == 1 and not data.by_node["a"].dynamic_provisions
    assert not data.by_node["b"].static_bindings and len(data.by_node["b"].dynamic_provisions) == 1


def test_score_prefers_the_fullest_static_fit_and_skips_without_claims():
    plugin, _handle = setup(pvc("data", size="2Gi"), pv("exact", node="a", size="2Gi"),
                            pv("huge", node="b", size="20Gi"))
    state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert plugin.pre_score(state, None, NODES) is None
    # utilization 100% -> 0 points on the default shape {0:10, 100:0}; 10% -> 90.
    assert [plugin.score(state, None, n) for n in NODES] == [0, 90, 0]


def test_score_for_dynamic_provisioning_uses_the_capacity_that_fits():
    plugin, handle = setup(pvc("data", storage_class="dyn", size="5Gi"), capacity("z2", "10Gi", "z2"),
                           capacity("z1", "50Gi", "z1"))
    handle.add("csidrivers", {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}})
    state, _status, _by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert [plugin.score(state, None, n) for n in NODES] == [90, 90, 50]


def test_custom_shape_scales_scores():
    plugin, _handle = setup(pvc("data", size="5Gi"), pv("p", node="a", size="10Gi"),
                            args={"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})
    state, _status, _by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert plugin.score(state, None, NODES[0]) == 50


def reserve_on(plugin, pod, node):
    state, status, by_node = run(plugin, pod)
    assert status is None and by_node[node] is None
    assert plugin.reserve(state, pod, node) is None
    return state


def test_reserve_assumes_the_binding_and_unreserve_restores_it():
    plugin, handle = setup(pvc("one"), pvc("two"), pv("only", node="a"))
    first = make_pod("first", volumes=[claim_volume("one")])
    state = reserve_on(plugin, first, "a")
    assumed = handle.volumes.pv("only")
    assert assumed["spec"]["claimRef"]["name"] == "one"
    assert assumed["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    # The assumed PV is no longer Available to another claim...
    _unused, _status, by_node = run(plugin, make_pod("second", volumes=[claim_volume("two")]))
    assert by_node["a"] == (UU, (ERR_REASON_BIND_CONFLICT,))
    # ...until the first pod's reservation is undone.
    plugin.unreserve(state, first, "a")
    assert "claimRef" not in handle.volumes.pv("only")["spec"]
    _unused, _status, by_node = run(plugin, make_pod("second", volumes=[claim_volume("two")]))
    assert by_node["a"] is None


def test_reserve_with_all_claims_bound_binds_nothing():
    plugin, handle = setup(pvc("data", bound=True, volume_name="pv-a", storage_class="now"),
                           pv("pv-a", node="a", storage_class="now", phase="Bound"))
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "a")
    assert state.read(STATE_KEY).all_bound
    assert plugin.pre_bind(state, pod, "a") is None and handle.client.made("PUT") == []


def pv_controller(handle):
    """Stand-in for kube-controller-manager's PV controller: completes any claim a PV names."""
    original = handle.client.request

    def request(method, path, body=None, params=None):
        written = original(method, path, body, params)
        if "/persistentvolumes/" in path:
            ref = written["spec"]["claimRef"]
            claim = dict(handle.volumes.get("persistentvolumeclaims", f"{ref['namespace']}/{ref['name']}"))
            claim["metadata"] = dict(claim["metadata"], resourceVersion=str(int(written["metadata"]["resourceVersion"]) + 1),
                                     annotations={"pv.kubernetes.io/bind-completed": "yes"})
            claim["spec"] = dict(claim["spec"], volumeName=written["metadata"]["name"])
            handle.add("persistentvolumeclaims", claim)
        return written

    handle.client.request = request


def test_pre_bind_writes_the_claim_ref_and_waits_for_the_pv_controller():
    plugin, handle = setup(pvc("data"), pv("pv-a", node="a"))
    pv_controller(handle)
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "a")
    assert plugin.pre_bind(state, pod, "a") is None
    [(path, written)] = handle.client.made("PUT")
    assert path == "/api/v1/persistentvolumes/pv-a"
    claim_ref = dict(written["spec"]["claimRef"])
    assert claim_ref.pop("resourceVersion").isdigit()
    assert claim_ref == {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                         "name": "data", "uid": "pvc-default-data"}


def test_pre_bind_times_out_when_no_controller_binds():
    plugin, handle = setup(pvc("data"), pv("pv-a", node="a"), args={"bindTimeoutSeconds": 0})
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "a")
    status = plugin.pre_bind(state, pod, "a")
    assert status.code == Code.ERROR and status.message() == "binding volumes: context deadline exceeded"


def test_pre_bind_sets_selected_node_for_provisioning():
    plugin, handle = setup(pvc("data", storage_class="dyn"), args={"bindTimeoutSeconds": 0})
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "b")
    assert handle.volumes.pvc("default", "data")["metadata"]["annotations"][
        "volume.kubernetes.io/selected-node"] == "b"
    plugin.pre_bind(state, pod, "b")
    [(path, written)] = handle.client.made("PUT")
    assert path == "/api/v1/namespaces/default/persistentvolumeclaims/data"
    assert written["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "b"


def test_pre_bind_reports_a_provisioner_that_gave_up():
    plugin, handle = setup(pvc("data", storage_class="dyn"), args={"bindTimeoutSeconds": 5})
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "b")
    original = handle.client.request

    def provisioner_rescheduled(method, path, body=None, params=None):
        written = original(method, path, body, params)
        undone = dict(written, metadata=dict(written["metadata"], annotations={},
                                             resourceVersion=str(int(written["metadata"]["resourceVersion"]) + 1)))
        handle.add("persistentvolumeclaims", undone)
        return written

    handle.client.request = provisioner_rescheduled
    status = plugin.pre_bind(state, pod, "b")
    assert status.code == Code.ERROR and status.message() == 'binding volumes: provisioning failed for PVC "data"'


def test_failed_write_restores_the_assumed_objects():
    from kubesched.client import ApiError
    plugin, handle = setup(pvc("data"), pv("pv-a", node="a"))
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "a")
    handle.client.fail("PUT", ApiError(409, "Conflict", "the object has been modified"))
    status = plugin.pre_bind(state, pod, "a")
    assert status.code == Code.ERROR
    assert "claimRef" not in handle.volumes.pv("pv-a")["spec"]


def test_assumed_version_expires_when_the_informer_sees_a_newer_object():
    plugin, handle = setup(pvc("data"), pv("pv-a", node="a"))
    reserve_on(plugin, make_pod(volumes=[claim_volume("data")]), "a")
    handle.add("persistentvolumes", make_pv("pv-a", node="a"))  # someone else updated it
    assert "claimRef" not in handle.volumes.pv("pv-a")["spec"]


@pytest.mark.parametrize("event, old, new, want", [
    ("claim", None, make_pvc("data"), True),
    ("claim", None, make_pvc("other"), False),
    ("claim", None, make_pvc("data", namespace="elsewhere"), False),
    ("class", None, make_class("x"), True),
    ("class", make_class("x"), make_class("x"), False),
    ("class", make_class("x"), make_class("x", allowed_topologies=[{"matchLabelExpressions": []}]), True),
    ("capacity", {"capacity": "1Gi"}, {"capacity": "2Gi"}, True),
    ("capacity", {"capacity": "2Gi"}, {"capacity": "1Gi"}, False),
    ("capacity", {"capacity": "2Gi"}, {"capacity": "3Gi", "maximumVolumeSize": "1Gi"}, False),
])
def test_queueing_hints(event, old, new, want):
    from kubesched.framework.interface import EventResource
    plugin, _handle = setup()
    resources = {"claim": EventResource.PERSISTENT_VOLUME_CLAIM, "class": EventResource.STORAGE_CLASS,
                 "capacity": EventResource.CSI_STORAGE_CAPACITY}
    [registered] = [e for e in plugin.events_to_register() if e.resource == resources[event]]
    pod = make_pod(volumes=[claim_volume("data")])
    assert registered.hint(pod, old, new) is want


def test_pv_affinity_ignores_match_fields_as_upstream():
    plugin, _handle = setup(pvc("data", bound=True, volume_name="p", storage_class="now"),
                            pv("p", storage_class="now", affinity={"required": {"nodeSelectorTerms": [
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert set(by_node.values()) == {(UU, (ERR_REASON_NODE_CONFLICT,))}


def test_pv_zone_affinity():
    plugin, _handle = setup(pvc("data"), pv("p", affinity=node_affinity("topology.kubernetes.io/zone", "z1")))
    _state, _status, by_node = run(plugin, make_pod(volumes=[claim_volume("data")]))
    assert [n for n, r in by_node.items() if r is None] == ["a", "b"]


def test_pre_bind_gives_up_when_the_scheduler_stops():
    import threading
    import time

    plugin, handle = setup(pvc("data"), pv("pv-a", node="a"))
    handle.stopping = threading.Event()
    pod = make_pod(volumes=[claim_volume("data")])
    state = reserve_on(plugin, pod, "a")
    threading.Timer(0.2, handle.stopping.set).start()
    started = time.monotonic()
    status = plugin.pre_bind(state, pod, "a")  # bindTimeoutSeconds is 600 by default
    assert time.monotonic() - started < 5
    assert status.code == Code.ERROR and status.message() == "binding volumes: context canceled"
