"""S11, Dynamic Resource Allocation: each scenario runs twice on the real lab, once with the
pinned kube-scheduler and once with kubesched, on node sets of its own (the fake DRA driver
publishes 8-GPU ResourceSlices for them), and both runs must agree: which node each pod got,
which devices each claim got (the allocator's choice is deterministic), and the
FailedScheduling message of each pod that stays pending.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
import yaml
from kubesched_lab import API_VERSION, free_port, wait_for

from lab.fake_dra_driver import (
    DRIVER,
    binding_conditions,
    device_class,
    gpu_slice,
    partitionable_slices,
    report_device_conditions,
    shared_gpu_slice,
)

KUBE_SCHEDULER = os.path.expanduser("~/.cache/kubesched/v1.37.1/bin/kube-scheduler")
GROUP, VERSION = "resource.k8s.io", "v1"
SCHEDULERS = ("kube-scheduler", "kubesched")


@pytest.fixture
def dra(api_client):
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture
def both_schedulers(run_kubesched, lab_kubeconfig, tmp_path):
    """schedulerName per kind: kube-scheduler and kubesched, each with the default profile."""
    tag = uuid.uuid4().hex[:5]
    names = {kind: f"dra-{kind}-{tag}" for kind in SCHEDULERS}
    run_kubesched({"profiles": [{"schedulerName": names["kubesched"]}]})
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": lab_kubeconfig}, "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": names["kube-scheduler"]}]}))
    log = open(tmp_path / "kube-scheduler.log", "w")
    proc = subprocess.Popen([KUBE_SCHEDULER, "--config", str(config), "--secure-port", str(free_port()),
                             "--bind-address", "127.0.0.1", "-v=2"], stdout=log, stderr=subprocess.STDOUT)
    yield names
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


class Run:
    """One scheduler's run of a scenario: its nodes, slices, class, namespace and pods."""

    def __init__(self, kind, scheduler_name, core_v1, dra, nodes, namespace_name):
        self.kind, self.scheduler_name = kind, scheduler_name
        self.core_v1, self.dra = core_v1, dra
        self.tag = uuid.uuid4().hex[:4]
        self.nodes_factory = nodes
        self.namespace = namespace_name
        self.node_prefix = f"{'ks' if kind == 'kubesched' else 'up'}{self.tag}-"
        self.node_names: list[str] = []
        self.slices: list[str] = []
        self.classes: list[str] = []
        self.claims: list[str] = []
        core_v1.create_namespace({"metadata": {"name": namespace_name, "labels": {"kubesched.io/test": "true"}}},
                                 _preload_content=False)

    def node(self, role: str) -> str:
        return f"{self.node_prefix}{role}-0"

    def make_nodes(self, *roles: str) -> None:
        for role in roles:
            self.node_names += self.nodes_factory(1, prefix=f"{self.node_prefix}{role}-", zones=0)

    def remove_nodes(self) -> None:
        """The next run must see only its own nodes and pods: node counts are part of every
        message, and a pod this run left pending would take the next run's devices."""
        from lab.fake_nodes import delete_nodes

        self.core_v1.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
        wait_for(lambda: not self.core_v1.list_namespaced_pod(self.namespace).items, 30, 0.2,
                 f"{self.kind}'s pods to go")
        delete_nodes(self.core_v1, self.node_names)
        wait_for(lambda: not set(self.node_names) & {n.metadata.name for n in self.core_v1.list_node().items},
                 30, 0.2, f"{self.kind}'s nodes to go")

    def publish(self, role: str, gpus: int = 8, **kwargs) -> None:
        body = gpu_slice(self.node(role), gpus, **kwargs)
        self._create_cluster("resourceslices", body)
        self.slices.append(body["metadata"]["name"])

    def publish_body(self, body: dict) -> None:
        self._create_cluster("resourceslices", body)
        self.slices.append(body["metadata"]["name"])

    def publish_partitionable(self, role: str) -> None:
        for body in partitionable_slices(self.node(role)):
            self._create_cluster("resourceslices", body)
            self.slices.append(body["metadata"]["name"])

    def gpu_class(self, *selectors: str, extended_resource: str = "") -> str:
        body = device_class(f"gpu-{self.tag}.{DRIVER}", DRIVER, extended_resource, selectors=selectors)
        self._create_cluster("deviceclasses", body)
        self.classes.append(body["metadata"]["name"])
        return body["metadata"]["name"]

    def _create_cluster(self, plural: str, body: dict) -> None:
        self.dra.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def claim(self, name: str, *requests: dict, constraints: list | None = None) -> None:
        devices: dict = {"requests": list(requests)}
        if constraints:
            devices["constraints"] = constraints
        self.dra.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": devices}})
        self.claims.append(name)

    def delete_claim(self, name: str) -> None:
        self._drop_finalizers(name)
        self.dra.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", name)

    def _drop_finalizers(self, name: str) -> None:
        from kubernetes.client.rest import ApiException

        try:
            self.dra.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", name,
                                                    {"metadata": {"finalizers": None}})
        except ApiException as err:
            if err.status != 404:
                raise

    def pod(self, name: str, *claims: str, templates: tuple[str, ...] = (), requests: dict | None = None,
            **spec) -> None:
        resources: dict = {}
        if claims or templates:
            resources["claims"] = [{"name": c} for c in claims + templates]
        if requests:
            resources["requests"] = resources["limits"] = requests
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"schedulerName": self.scheduler_name, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                         **({"resources": resources} if resources else {})}],
                         "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]
                         + [{"name": t, "resourceClaimTemplateName": t} for t in templates], **spec}}
        self.core_v1.create_namespaced_pod(self.namespace, body, _preload_content=False)

    def template(self, name: str, *requests: dict) -> None:
        self.dra.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaimtemplates", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}})

    def generated_claim(self, pod: str, pod_claim: str, timeout: float = 30.0) -> str:
        """The name of the claim the resourceclaim controller made for the pod's template."""
        def made():
            obj = json.loads(self.core_v1.read_namespaced_pod(pod, self.namespace, _preload_content=False).data)
            for status in (obj.get("status") or {}).get("resourceClaimStatuses") or ():
                if status.get("name") == pod_claim and status.get("resourceClaimName"):
                    return status["resourceClaimName"]
            return None
        name = wait_for(made, timeout, 0.2, f"the resourceclaim controller to make {pod}'s claim")
        self.claims.append(name)
        return name

    def extended_claim(self, pod: str, timeout: float = 30.0) -> tuple[str, list]:
        def recorded():
            obj = json.loads(self.core_v1.read_namespaced_pod(pod, self.namespace, _preload_content=False).data)
            return (obj.get("status") or {}).get("extendedResourceClaimStatus")
        status = wait_for(recorded, timeout, 0.2, f"{self.kind} to record {pod}'s extended resource claim")
        self.claims.append(status["resourceClaimName"])
        return status["resourceClaimName"], status["requestMappings"]

    def outcome(self, name: str, timeout: float = 40.0) -> dict:
        """{"node": role or "", "message": FailedScheduling text or ""} once decided."""
        def decided():
            pod = json.loads(self.core_v1.read_namespaced_pod(name, self.namespace, _preload_content=False).data)
            node = pod["spec"].get("nodeName") or ""
            cond = next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), {})
            if node:
                return {"node": node[len(self.node_prefix):].rsplit("-", 1)[0], "message": ""}
            if cond.get("status") == "False":
                return {"node": "", "message": cond.get("message", "")}
            return None
        return wait_for(decided, timeout, 0.2, f"{self.kind} to decide pod {name}")

    def pending_without_decision(self, name: str, seconds: float = 4.0) -> bool:
        """True when the pod stays unbound for seconds (PreEnqueue holds it: no condition)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pod = json.loads(self.core_v1.read_namespaced_pod(name, self.namespace, _preload_content=False).data)
            if pod["spec"].get("nodeName"):
                return False
            time.sleep(0.3)
        return True

    def devices(self, claim: str, timeout: float = 20.0) -> list[str]:
        """The claim's allocated devices as pool-role/device, once the allocation is written."""
        def allocated():
            obj = self.dra.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", claim)
            allocation = (obj.get("status") or {}).get("allocation")
            if not allocation:
                return None
            return [f"{r['pool'][len(self.node_prefix):].rsplit('-', 1)[0]}/{r['device']}:{r['request']}"
                    for r in allocation["devices"]["results"]]
        return wait_for(allocated, timeout, 0.2, f"{self.kind} to allocate claim {claim}")

    def allocation(self, claim: str) -> dict | None:
        obj = self.dra.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", claim)
        return (obj.get("status") or {}).get("allocation")

    def pod_waiting_on_binding_conditions(self) -> dict:
        """Pod p with claim c for the one GPU of node "gpu", whose binding conditions the driver
        has not reported yet; returns the allocation once PreBind wrote it."""
        self.make_nodes("gpu")
        self.publish_body(binding_conditions(gpu_slice(self.node("gpu"), 1)))
        self.claim("c", gpu_request(self.gpu_class()))
        self.pod("p", "c")
        return wait_for(lambda: self.allocation("c"), 30, 0.2, f"{self.kind} to write the allocation in PreBind")

    def event_messages(self, pod: str, reason: str) -> list[str]:
        events = self.core_v1.list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={pod}")
        return sorted({e.message for e in events.items if e.reason == reason})

    def reserved_for(self, claim: str) -> list[str]:
        obj = self.dra.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "resourceclaims", claim)
        return sorted(r["name"] for r in (obj.get("status") or {}).get("reservedFor") or ())

    def cleanup(self) -> None:
        from kubernetes.client.rest import ApiException

        if os.environ.get("DRA_KEEP"):
            return

        for name in self.claims:
            self._drop_finalizers(name)
        for plural, names in (("resourceslices", self.slices), ("deviceclasses", self.classes)):
            for name in names:
                try:
                    self.dra.delete_cluster_custom_object(GROUP, VERSION, plural, name)
                except ApiException as err:
                    if err.status != 404:
                        raise
        self.core_v1.delete_namespace(self.namespace, _preload_content=False)


@pytest.fixture
def runs(both_schedulers, core_v1, dra, nodes, request):
    """run(kind) for each scheduler kind, cleaned up afterwards."""
    made: list[Run] = []
    tag = uuid.uuid4().hex[:5]

    def make(kind: str) -> Run:
        run = Run(kind, both_schedulers[kind], core_v1, dra, nodes,
                  f"t-dra-{request.node.name[5:25].lower().replace('_', '-').strip('-')}-{kind[:6]}-{tag}")
        made.append(run)
        return run

    yield make
    for run in made:
        run.cleanup()


def agree(runs, scenario) -> dict:
    """Run scenario(run) -> result with each scheduler, one after the other on node sets of
    their own; assert both gave the same; return it."""
    results = {}
    for kind in SCHEDULERS:
        run = runs(kind)
        results[kind] = scenario(run)
        run.remove_nodes()
    assert results["kubesched"] == results["kube-scheduler"], json.dumps(results, indent=1)
    return results["kubesched"]


def gpu_request(cls: str, name: str = "gpu", count: int = 1, **extra) -> dict:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count,
                                      **extra}}


def test_one_gpu_by_class_lands_where_the_driver_published_devices(runs):
    def scenario(run):
        run.make_nodes("plain", "gpu")
        run.publish("gpu")
        run.claim("one", gpu_request(run.gpu_class()))
        run.pod("p", "one")
        return {"p": run.outcome("p"), "devices": run.devices("one")}

    assert agree(runs, scenario) == {"p": {"node": "gpu", "message": ""}, "devices": ["gpu/gpu-0:gpu"]}


def test_one_gpu_from_a_claim_template(runs):
    # The lab's kube-controller-manager runs the resourceclaim controller that makes the claim.
    def scenario(run):
        run.make_nodes("plain", "gpu")
        run.publish("gpu")
        run.template("one-gpu", gpu_request(run.gpu_class()))
        run.pod("p", templates=("one-gpu",))
        claim = run.generated_claim("p", "one-gpu")
        return {"p": run.outcome("p"), "devices": run.devices(claim), "claim": claim.startswith("p-one-gpu-")}

    assert agree(runs, scenario) == {"p": {"node": "gpu", "message": ""}, "devices": ["gpu/gpu-0:gpu"],
                                     "claim": True}


def test_extended_resource_backed_by_dra(runs):
    def scenario(run):
        run.make_nodes("plain", "gpu")
        run.publish("gpu", gpus=2)
        resource = f"gpu-{run.tag}.example.com/gpu"
        run.gpu_class(extended_resource=resource)
        run.pod("p", requests={resource: "2"})
        out = {"p": run.outcome("p")}
        claim, mappings = run.extended_claim("p")
        out["claim"] = claim.startswith("p-extended-resources-")
        out["mappings"] = [{**m, "resourceName": m["resourceName"].replace(run.tag, "TAG")} for m in mappings]
        out["devices"] = run.devices(claim)
        run.pod("q", requests={resource: "1"})
        out["q"] = run.outcome("q")
        return out

    result = agree(runs, scenario)
    assert result["devices"] == ["gpu/gpu-0:container-0-request-0", "gpu/gpu-1:container-0-request-0"]
    assert result["q"]["node"] == ""


def test_two_gpus_on_the_same_pcie_root(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=4)  # gpu-0, gpu-1 on pci0; gpu-2, gpu-3 on pci1
        cls = run.gpu_class()
        run.claim("first", gpu_request(cls))
        run.pod("first", "first")
        first = run.outcome("first")
        run.claim("pair", gpu_request(cls, count=2), constraints=[{"matchAttribute": f"{DRIVER}/pcieRoot"}])
        run.pod("pair", "pair")
        return {"first": first, "first-devices": run.devices("first"), "pair": run.outcome("pair"),
                "pair-devices": run.devices("pair")}

    assert agree(runs, scenario)["pair-devices"] == ["gpu/gpu-2:gpu", "gpu/gpu-3:gpu"]


def test_prioritized_list_falls_back_to_the_smaller_device(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=2, models=("A100",), memory="40Gi")
        cls = run.gpu_class()
        run.claim("fallback", {"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1, "selectors": [
                {"cel": {"expression": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0'}}]},
            {"name": "small", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}]})
        run.pod("p", "fallback")
        return {"p": run.outcome("p"), "devices": run.devices("fallback")}

    assert agree(runs, scenario)["devices"] == ["gpu/gpu-0:gpu/small"]


def test_prioritized_list_scores_the_node_with_the_first_choice_higher(runs):
    def scenario(run):
        run.make_nodes("small", "big")
        run.publish("small", gpus=2, models=("T4",), memory="16Gi")
        run.publish("big", gpus=2, models=("H100",), memory="80Gi")
        cls = run.gpu_class()
        run.claim("prefer-big", {"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1, "selectors": [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}]},
            {"name": "any", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}]})
        run.pod("p", "prefer-big")
        return {"p": run.outcome("p"), "devices": run.devices("prefer-big")}

    assert agree(runs, scenario) == {"p": {"node": "big", "message": ""}, "devices": ["big/gpu-0:gpu/big"]}


def test_partitionable_gpu_gives_two_halves_then_nothing(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish_partitionable("gpu")
        cls = run.gpu_class(f'device.attributes["{DRIVER}"].?size.orValue("") == "half"')
        out = {}
        for name in ("h1", "h2", "h3"):
            run.claim(name, gpu_request(cls))
            run.pod(name, name)
            out[name] = run.outcome(name)
        out["devices"] = run.devices("h1") + run.devices("h2")
        return out

    result = agree(runs, scenario)
    assert result["h3"]["node"] == "" and "cannot allocate all claims" in result["h3"]["message"]


def test_shared_claim_is_used_by_two_pods_on_one_node(runs):
    def scenario(run):
        run.make_nodes("a", "b")
        run.publish("a")
        run.publish("b")
        run.claim("shared", gpu_request(run.gpu_class()))
        run.pod("p1", "shared")
        first = run.outcome("p1")
        run.pod("p2", "shared")
        second = run.outcome("p2")
        wait_for(lambda: len(run.reserved_for("shared")) == 2, 20, 0.2, "both pods in reservedFor")
        return {"same-node": first["node"] == second["node"] != "", "reserved": run.reserved_for("shared"),
                "devices": len(run.devices("shared"))}

    assert agree(runs, scenario) == {"same-node": True, "reserved": ["p1", "p2"], "devices": 1}


def test_claim_no_node_can_satisfy_leaves_the_pod_pending_with_upstreams_reason(runs):
    def scenario(run):
        run.make_nodes("a", "b")
        run.publish("a", gpus=2)
        run.publish("b", gpus=2)
        run.claim("three", gpu_request(run.gpu_class(), count=3))
        run.pod("p", "three")
        return run.outcome("p")

    result = agree(runs, scenario)
    assert result["node"] == "" and result["message"].startswith("0/2 nodes are available: 2 cannot allocate all claims")


def test_tainted_device_is_used_only_with_a_toleration(runs):
    taint = {"key": "example.com/ecc-errors", "value": "true", "effect": "NoSchedule"}

    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=2, taints={0: taint})
        cls = run.gpu_class()
        out = {}
        run.claim("plain", gpu_request(cls))
        run.pod("plain", "plain")
        out["plain"], out["plain-devices"] = run.outcome("plain"), run.devices("plain")
        run.claim("blocked", gpu_request(cls))
        run.pod("blocked", "blocked")
        out["blocked"] = run.outcome("blocked")
        run.claim("tolerating", gpu_request(cls, tolerations=[{"key": "example.com/ecc-errors", "operator": "Exists"}]))
        run.pod("tolerating", "tolerating")
        out["tolerating"], out["tolerating-devices"] = run.outcome("tolerating"), run.devices("tolerating")
        return out

    result = agree(runs, scenario)
    assert result["plain-devices"] == ["gpu/gpu-1:gpu"] and result["tolerating-devices"] == ["gpu/gpu-0:gpu"]
    assert result["blocked"]["node"] == ""


def test_device_taint_rule_keeps_pods_off_the_devices_it_selects(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=2)
        rule = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceTaintRule",
                "metadata": {"name": f"maintenance-{run.tag}"},
                "spec": {"deviceSelector": {"driver": DRIVER, "pool": run.node("gpu"), "device": "gpu-0"},
                         "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}}}
        run.dra.create_cluster_custom_object(GROUP, VERSION, "devicetaintrules", rule)
        try:
            time.sleep(2)  # both schedulers' rule informers see the rule before the pods arrive
            cls = run.gpu_class()
            out = {}
            for name in ("first", "second"):
                run.claim(name, gpu_request(cls))
                run.pod(name, name)
                out[name] = run.outcome(name)
            out["first-devices"] = run.devices("first")
            return out
        finally:
            run.dra.delete_cluster_custom_object(GROUP, VERSION, "devicetaintrules", rule["metadata"]["name"])

    result = agree(runs, scenario)
    assert result["first-devices"] == ["gpu/gpu-1:gpu"]
    assert result["second"]["message"].startswith("0/1 nodes are available: 1 cannot allocate all claims")


def test_pod_whose_claim_is_deleted_while_it_waits(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=1)
        cls = run.gpu_class()
        run.claim("wish", gpu_request(cls, count=2))
        run.pod("p", "wish")
        out = {"waiting": run.outcome("p")}
        run.delete_claim("wish")
        wait_for(lambda: "wish" not in [c["metadata"]["name"] for c in run.dra.list_namespaced_custom_object(
            GROUP, VERSION, run.namespace, "resourceclaims")["items"]], 20, 0.2, "claim deleted")
        out["held-without-claim"] = run.pending_without_decision("p")
        # Held by PreEnqueue: no new scheduling attempt, so the reason shown is still the last one.
        out["held-message"] = run.outcome("p")["message"]
        run.claim("wish", gpu_request(cls))
        node = wait_for(lambda: json.loads(run.core_v1.read_namespaced_pod("p", run.namespace,
                                                                           _preload_content=False).data)
                        ["spec"].get("nodeName"), 60, 0.3, "the pod bound once its claim came back")
        out["after-recreate"] = node[len(run.node_prefix):].rsplit("-", 1)[0]
        out["devices"] = run.devices("wish")
        return out

    result = agree(runs, scenario)
    assert result["held-without-claim"] is True and result["after-recreate"] == "gpu"
    assert result["held-message"] == result["waiting"]["message"]


def test_claim_for_a_device_class_that_does_not_exist(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=1)
        run.claim("ghost", gpu_request("no-such-class.example.com"))
        run.pod("p", "ghost")
        return run.outcome("p")

    result = agree(runs, scenario)
    assert "request gpu: device class no-such-class.example.com does not exist" in result["message"]


def test_selector_on_a_missing_attribute_is_reported_not_crashed(runs):
    def scenario(run):
        run.make_nodes("gpu")
        run.publish("gpu", gpus=1)
        run.claim("odd", gpu_request(run.gpu_class(), selectors=[
            {"cel": {"expression": f'device.attributes["{DRIVER}"].firmware == "2.0"'}}]))
        run.pod("p", "odd")
        out = run.outcome("p")
        obj = run.dra.get_namespaced_custom_object(GROUP, VERSION, run.namespace, "resourceclaims", "odd")
        out["allocated"] = bool((obj.get("status") or {}).get("allocation"))
        message = out["message"].replace(run.node("gpu"), "NODE").replace(run.namespace, "NS")
        return {"node": out["node"], "message": message, "allocated": out["allocated"]}

    result = agree(runs, scenario)
    assert result == {"node": "", "allocated": False, "message": (
        'running "DynamicResources" filter plugin: claim NS/odd: selector #0 on device gpu.example.com/NODE/gpu-0: '
        "CEL runtime error: no such key: firmware. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields")}


def test_malformed_cel_selector_is_refused_by_the_api_server(dra):
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as err:
        dra.create_cluster_custom_object(GROUP, VERSION, "deviceclasses",
                                         device_class(f"broken-{uuid.uuid4().hex[:4]}", DRIVER,
                                                      selectors=("device.driver ==",)))
    assert err.value.status == 422


def test_broken_resource_slice_makes_its_pool_invalid(runs):
    def scenario(run):
        run.make_nodes("gpu")
        first = gpu_slice(run.node("gpu"), 2)
        second = gpu_slice(run.node("gpu"), 2)
        second["metadata"]["name"] += "-dup"
        for body in (first, second):
            body["spec"]["pool"]["resourceSliceCount"] = 2
            run._create_cluster("resourceslices", body)
            run.slices.append(body["metadata"]["name"])
        run.claim("c", gpu_request(run.gpu_class()))
        run.pod("p", "c")
        out = run.outcome("p")
        obj = run.dra.get_namespaced_custom_object(GROUP, VERSION, run.namespace, "resourceclaims", "c")
        out["allocated"] = bool((obj.get("status") or {}).get("allocation"))
        return out

    result = agree(runs, scenario)
    assert result["node"] == "" and not result["allocated"]
    assert "invalid resource pools were encountered" in result["message"]


def test_gpu_shared_by_memory_until_it_is_full(runs):
    """DRAConsumableCapacity: one GPU that allows multiple allocations, 40Gi in 4Gi steps."""
    def scenario(run):
        run.make_nodes("gpu")
        run.publish_body(shared_gpu_slice(run.node("gpu")))
        cls = run.gpu_class()
        out = {}
        for name, memory in (("a", "10Gi"), ("b", "20Gi"), ("c", "10Gi")):
            run.claim(name, gpu_request(cls, capacity={"requests": {"memory": memory}}))
            run.pod(name, name)
            out[name] = run.outcome(name)
        for name in ("a", "b"):
            (result,) = run.allocation(name)["devices"]["results"]
            out[f"{name}-device"] = result["device"]
            out[f"{name}-consumed"] = result["consumedCapacity"]
            out[f"{name}-share"] = bool(result.get("shareID"))
        return out

    result = agree(runs, scenario)
    assert result["a-device"] == result["b-device"] == "gpu-0" and result["a-share"] and result["b-share"]
    assert (result["a-consumed"], result["b-consumed"]) == ({"memory": "12Gi"}, {"memory": "20Gi"})
    assert result["c"]["node"] == "" and "cannot allocate all claims" in result["c"]["message"]


def test_device_with_binding_conditions_binds_once_the_driver_reports_it_ready(runs):
    """DRADeviceBindingConditions: PreBind writes the allocation, then waits for the driver."""
    def scenario(run):
        allocation = run.pod_waiting_on_binding_conditions()
        out = {"unbound-while-waiting": run.pending_without_decision("p", 3.0),
               "conditions": allocation["devices"]["results"][0].get("bindingConditions")}
        report_device_conditions(run.dra, run.namespace, "c", [{"type": "example.com/attached", "status": "True"}])
        out["p"] = run.outcome("p", timeout=30)
        out["events"] = [m.replace(run.node("gpu"), "NODE") for m in run.event_messages("p", "BindingConditionsPending")]
        return out

    assert agree(runs, scenario) == {"unbound-while-waiting": True, "conditions": ["example.com/attached"],
                                     "p": {"node": "gpu", "message": ""},
                                     "events": ["waiting for binding conditions for device on node NODE"]}


def test_binding_failure_condition_fails_the_binding_and_frees_the_device(runs):
    def scenario(run):
        first = run.pod_waiting_on_binding_conditions()
        report_device_conditions(run.dra, run.namespace, "c", [
            {"type": "example.com/attach-failed", "status": "True", "reason": "NoLink", "message": "cable out"}])

        def failed_then_freed():
            messages = [m for m in run.event_messages("p", "FailedScheduling") if "device binding failed" in m]
            allocation = run.allocation("c")
            freed = allocation is None or allocation.get("allocationTimestamp") != first.get("allocationTimestamp") \
                or not run.reserved_for("c")
            return messages if messages and freed else None
        messages = wait_for(failed_then_freed, 40, 0.3, f"{run.kind} to fail PreBind and let the claim go")
        return {"messages": [m.replace(run.namespace, "NS") for m in messages],
                "bound": bool(json.loads(run.core_v1.read_namespaced_pod("p", run.namespace, _preload_content=False)
                                         .data)["spec"].get("nodeName"))}

    result = agree(runs, scenario)
    assert result["bound"] is False
    assert result["messages"] == ['running PreBind plugin "DynamicResources": device binding failed: claim=c, '
                                  'reason=NoLink, message="cable out"']


def test_explain_allocates_the_pods_claim_on_every_node(core_v1, dra, nodes, kubesched_cli, tmp_path,
                                                        lab_kubeconfig):
    """`kubesched explain` lists the DRA objects with the nodes and pods (the informers'
    load): the node with the driver's GPUs is feasible, the node without is rejected by
    DynamicResources, and the claim is not reported missing."""
    unserved = f"explain-{uuid.uuid4().hex[:6]}"  # no scheduler serves it: the pod stays pending
    run = Run("kubesched", unserved, core_v1, dra, nodes, f"t-dra-explain-{uuid.uuid4().hex[:5]}")
    try:
        run.make_nodes("plain", "gpu")
        run.publish("gpu")
        run.claim("one", gpu_request(run.gpu_class()))
        run.pod("p", "one")
        config = tmp_path / "explain.yaml"
        config.write_text(yaml.safe_dump({"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
                                          "clientConnection": {"kubeconfig": lab_kubeconfig},
                                          "profiles": [{"schedulerName": unserved}]}))
        code, out, err = kubesched_cli("explain", f"{run.namespace}/p", "--config", str(config))
        assert code == 0 and "Scores of feasible nodes" in out, (err, out)
        nodes_table, scores_table = out.split("Scores of feasible nodes")
        rows = {line.split()[0]: line for line in nodes_table.splitlines() if line.startswith(run.node_prefix)}
        assert rows[run.node("gpu")].split()[1] == "feasible", out
        plain = rows[run.node("plain")]
        assert "DynamicResources" in plain and "cannot allocate all claims" in plain, out
        assert "not found" not in out and run.node("gpu") in scores_table and run.node("plain") not in scores_table
    finally:
        run.remove_nodes()
        run.cleanup()
