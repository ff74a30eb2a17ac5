"""What the informers keep of a pod or node: everything scheduling reads, nothing else."""

import copy
import sys
import threading

from kubesched_fakes import FakeClient

from kubesched.backend.informer import Informer
from kubesched.backend.trim import trim_metadata, trim_node, trim_pod
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.node_declared_features import required_features

MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:spec": {"f:containers": {}}}}]


def full_pod() -> dict:
    """A pod as a real cluster returns it: defaulted fields, kubelet status, managedFields."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                     "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "web"}, "annotations": {"team": "blue"},
                     "ownerReferences": [{"kind": "StatefulSet", "name": "web", "uid": "s-1", "controller": True}],
                     "managedFields": MANAGED_FIELDS},
        "spec": {
            "schedulerName": "my-scheduler", "priority": 100, "nodeName": "n1",
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
            "hostNetwork": True, "hostUsers": False, "activeDeadlineSeconds": 60,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}],
            "overhead": {"cpu": "10m"},
            "initContainers": [
                {"name": "proxy", "image": "envoy:1.30", "restartPolicy": "Always",
                 "ports": [{"containerPort": 9901, "hostPort": 9901, "protocol": "TCP"}],
                 "resources": {"requests": {"cpu": "50m"}}, "env": [{"name": "A", "value": "1"}]},
                {"name": "migrate", "image": "tools:2", "command": ["migrate"], "resources": {"requests": {"cpu": "2"}},
                 "restartPolicyRules": [{"action": "RestartAllContainers"}]},
            ],
            "containers": [
                {"name": "web", "image": "web:1.0", "imagePullPolicy": "IfNotPresent",
                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                 "ports": [{"containerPort": 8080, "hostPort": 80, "hostIP": "10.0.0.1"}],
                 "env": [{"name": "LONG", "value": "x" * 500}], "args": ["--serve"],
                 "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                 "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                  {"name": "logs", "mountPath": "/logs", "bindMountOptions": ["rbind"]}],
                 "terminationMessagePath": "/dev/termination-log"},
            ],
        },
        "status": {
            "phase": "Running", "nominatedNodeName": "n2", "startTime": "2026-01-01T00:00:05Z", "qosClass": "Burstable",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
            "podIP": "10.1.0.4", "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0}],
        },
    }


def pod_view(pod: PodInfo) -> dict:
    """Every value a plugin, the queue or the cache takes from a PodInfo."""
    view = {slot: getattr(pod, slot) for slot in PodInfo.__slots__ if slot not in ("raw", "plugin_cache", "tolerations")}
    view["tolerations"] = [repr(t) for t in pod.tolerations]
    return view


def test_trimmed_pod_gives_the_same_pod_info_and_plugin_inputs():
    original = full_pod()
    trimmed = trim_pod(copy.deepcopy(original))
    assert pod_view(PodInfo(trimmed)) == pod_view(PodInfo(original))
    assert required_features(PodInfo(trimmed)) == required_features(PodInfo(original)) == frozenset(
        {"RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"})
    # Read directly from the raw object by plugins and the scheduler: kept whole.
    for key in ("volumes", "overhead", "affinity", "topologySpreadConstraints", "activeDeadlineSeconds"):
        assert trimmed["spec"][key] == original["spec"][key]
    assert trimmed["metadata"]["ownerReferences"] == original["metadata"]["ownerReferences"]
    assert trimmed["metadata"]["annotations"] == original["metadata"]["annotations"]
    assert trimmed["status"]["conditions"] == original["status"]["conditions"]


def test_trimmed_pod_drops_what_nothing_reads():
    trimmed = trim_pod(full_pod())
    assert "managedFields" not in trimmed["metadata"]
    web = trimmed["spec"]["containers"][0]
    assert sorted(web) == ["image", "name", "ports", "resources", "volumeMounts"]
    assert web["volumeMounts"] == [{"name": "logs", "mountPath": "/logs", "bindMountOptions": ["rbind"]}]
    assert sorted(trimmed["spec"]["initContainers"][1]) == ["image", "name", "resources", "restartPolicyRules"]
    assert sorted(trimmed["status"]) == ["conditions", "nominatedNodeName", "phase", "startTime"]


def test_an_image_change_still_shows_as_a_spec_change():
    old, new = full_pod(), full_pod()
    new["spec"]["containers"][0]["image"] = "web:1.1"
    assert trim_pod(old)["spec"] != trim_pod(new)["spec"]


def test_trimmed_node_keeps_what_the_node_info_reads():
    node = {"metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"x": "y"}, "managedFields": MANAGED_FIELDS},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "unschedulable": True},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "capacity": {"cpu": "4"},
                       "images": [{"names": ["web:1.0"], "sizeBytes": 1000}], "declaredFeatures": ["F"],
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.37.1"}, "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    original, trimmed = NodeInfo(copy.deepcopy(node)), NodeInfo(trim_node(node))
    for slot in ("name", "labels", "taints", "unschedulable", "declared_features"):
        assert getattr(trimmed, slot) == getattr(original, slot)
    assert trimmed.allocatable == original.allocatable
    assert {k: v.size for k, v in trimmed.image_states.items()} == {k: v.size for k, v in original.image_states.items()}
    assert sorted(node["status"]) == ["allocatable", "capacity", "conditions", "declaredFeatures", "images"]
    assert "managedFields" not in node["metadata"] and node["metadata"]["annotations"] == {"x": "y"}


def test_informer_stores_and_reports_transformed_objects():
    stop = threading.Event()

    modified = full_pod()
    modified["metadata"]["resourceVersion"] = "43"
    client = FakeClient(listings=[{"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                   "items": [full_pod()]}],
                        watches=[[{"type": "MODIFIED", "object": modified}]], stop=stop)
    seen = []
    informer = Informer(client, "/api/v1/pods", name="pods", on_add=seen.append,
                        on_update=lambda old, new: seen.append(new), on_delete=seen.append, transform=trim_pod)
    informer.stop = stop
    informer.run()
    assert len(seen) == 2
    for obj in seen + informer.list():
        assert "managedFields" not in obj["metadata"] and "qosClass" not in obj["status"]
    assert informer.list()[0]["kind"] == "Pod"


def test_generic_informers_drop_only_managed_fields():
    pdb = {"metadata": {"name": "p", "managedFields": MANAGED_FIELDS}, "status": {"disruptionsAllowed": 1}}
    assert trim_metadata(pdb) == {"metadata": {"name": "p"}, "status": {"disruptionsAllowed": 1}}


def test_informers_keep_one_copy_of_a_string_that_pods_repeat():
    from kubesched import jsoncodec
    from kubesched.backend.trim import intern_strings

    body = jsoncodec.dumps({"metadata": {"name": "p", "namespace": "bench-" + "x" * 40},
                            "spec": {"containers": [{"image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}]}],
                                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]}})
    first, second = jsoncodec.loads(body), jsoncodec.loads(body)
    assert first["spec"]["containers"][0]["image"] is not second["spec"]["containers"][0]["image"]
    expected = jsoncodec.loads(body)
    assert intern_strings(first) is first and intern_strings(second) == expected == first
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
    assert first["spec"]["containers"][0]["image"] is second["spec"]["containers"][0]["image"]
    assert first["spec"]["tolerations"][0]["key"] is second["spec"]["tolerations"][0]["key"]
    assert first["spec"]["containers"][0]["ports"][0]["containerPort"] == 80


def test_interning_uses_sys_intern_only_where_its_strings_are_freed(monkeypatch):
    from kubesched.backend import trim

    # CPython frees them, except 3.12.0 to 3.12.5 (python/cpython#113993)
    immortal = (3, 12, 0) <= sys.version_info[:3] < (3, 12, 6)
    assert trim.sys_intern_frees_strings() is not immortal
    assert (trim._intern is trim.share) is immortal  # (ansible's module_utils wrap sys.intern when imported)
    # CPython 3.12.0-3.12.5: every interned string is immortal, reported as a refcount of
    # 2**32 - 1 (2**30 - 1 on 32-bit builds).
    for immortal_refcount in (2**32 - 1, 2**30 - 1):
        monkeypatch.setattr(trim.sys, "getrefcount", lambda _obj, n=immortal_refcount: n)
        assert trim.sys_intern_frees_strings() is False


def test_the_shared_table_shares_equal_strings_and_never_grows_past_its_bound(monkeypatch):
    from kubesched.backend import trim

    monkeypatch.setattr(trim, "SHARED_MAX", 100)
    monkeypatch.setattr(trim, "_shared", {})
    first = trim.share("".join(("bench-", "x" * 40)))
    assert trim.share("".join(("bench-", "x" * 40))) is first
    for n in range(1000):  # a UID per pod
        trim.share(f"uid-{n}")
        assert len(trim._shared) <= 100
    annotation = "x" * 129  # too long to share: never held by the table
    assert trim.share(annotation) is annotation and annotation not in trim._shared
    # the table was emptied on the way: the string is shared again from its next use
    again = trim.share("".join(("bench-", "x" * 40)))
    assert trim.share("".join(("bench-", "x" * 40))) is again


def test_the_informer_store_holds_interned_objects():
    from kubesched import jsoncodec

    informer = Informer(None, "/api/v1/pods", name="pods", on_add=lambda obj: None,
                        on_update=lambda old, new: None, on_delete=lambda obj: None)
    body = jsoncodec.dumps({"metadata": {"name": "p", "namespace": "n", "uid": "u", "resourceVersion": "1"},
                            "spec": {"schedulerName": "scheduler-" + "y" * 40}})
    informer.apply_event("ADDED", jsoncodec.loads(body), "1")
    again = jsoncodec.loads(body)
    again["metadata"]["name"] = "q"
    informer.apply_event("ADDED", again, "2")
    assert informer.get("n/p")["spec"]["schedulerName"] is informer.get("n/q")["spec"]["schedulerName"]
