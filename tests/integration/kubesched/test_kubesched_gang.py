"""Gang scheduling (GenericWorkload) side by side: kubesched and the pinned kube-scheduler, both
with --feature-gates=GenericWorkload=true, on the same scenarios against a lab whose API server
has the gate and serves scheduling.k8s.io/v1beta1, with the same outcome asserted of both.

That is the lab KUBESCHED_LAB_KUBECONFIG names when it serves PodGroups (one started with
LAB_FEATURE_GATES=GenericWorkload=true LAB_RUNTIME_CONFIG=scheduling.k8s.io/v1beta1=true);
otherwise, as under `make test`, whose lab has no gate, this module starts a private lab of its
own with them and takes it down afterwards.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubesched_lab import pod_manifest, wait_for

from lab.fake_nodes import DEFAULT_KUBECONFIG
from lab.private_lab import PrivateLab

SCHEDULERS = ("kube-scheduler", "kubesched")
GATE = "--feature-gates=GenericWorkload=true"
GROUP, VERSION, PLURAL = "scheduling.k8s.io", "v1beta1", "podgroups"
RUN_LABEL = "kubesched.io/gang-run"
LAB_GATES = {"LAB_FEATURE_GATES": "GenericWorkload=true", "LAB_RUNTIME_CONFIG": "scheduling.k8s.io/v1beta1=true"}


def _client_for(kubeconfig: str) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)


def _serves_pod_groups(kubeconfig: str) -> bool:
    if not os.path.exists(kubeconfig):
        return False
    api = _client_for(kubeconfig)
    try:
        client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
        return True
    except Exception:  # noqa: BLE001 - not served, or no lab at all: this module starts its own
        return False
    finally:
        api.close()


@pytest.fixture(scope="module")
def lab_kubeconfig(tmp_path_factory):
    """The lab of this module (see the module's docstring)."""
    shared = os.environ.get("KUBESCHED_LAB_KUBECONFIG", DEFAULT_KUBECONFIG)
    if _serves_pod_groups(shared):
        yield shared
        return
    lab = PrivateLab.on_free_ports(str(tmp_path_factory.mktemp("gang-lab")), **LAB_GATES)
    try:
        lab.up()
        yield lab.kubeconfig
    finally:
        lab.down()


@pytest.fixture(scope="module")
def api_client(lab_kubeconfig):
    api = _client_for(lab_kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="module")
def core_v1(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture
def gang_scheduler(run_scheduler, api_client):
    """Factory: gang_scheduler(kind, second_profile="", gate=True) -> the schedulerName of a fresh
    scheduler of that kind, with the GenericWorkload gate on unless gate=False (one profile, or
    two). Fails at once when the lab does not serve PodGroups."""
    try:
        client.CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
    except ApiException as err:
        pytest.fail(f"the lab does not serve {GROUP}/{VERSION} {PLURAL} ({err.status}): lab.sh did not apply "
                    f"{LAB_GATES}", pytrace=False)

    def start(kind: str, second_profile: str = "", gate: bool = True) -> str:
        return run_scheduler(kind, f"gang-{kind[-5:]}-{uuid.uuid4().hex[:6]}", flags=[GATE] if gate else [],
                             more_profiles=[{"schedulerName": second_profile}] if second_profile else [])

    return start


class Gang:
    """One scheduler's copy of a scenario: its nodes (labelled for it alone), its PodGroup and pods."""

    def __init__(self, kind: str, scheduler: str, core_v1, api_client, namespace: str, nodes):
        self.kind, self.scheduler, self.core_v1, self.namespace, self.make_nodes = \
            kind, scheduler, core_v1, namespace, nodes
        self.custom = client.CustomObjectsApi(api_client)
        self.run = f"{kind[-5:]}-{uuid.uuid4().hex[:4]}"
        self.group = f"train-{self.run}"

    def nodes(self, count: int) -> list[str]:
        return self.make_nodes(count, cpu="1", zones=0, labels={RUN_LABEL: self.run},
                               prefix=f"g{self.run}-{uuid.uuid4().hex[:3]}-")

    def pod_group(self, min_count: int, priority_class: str = "", disruption_mode: str = "") -> dict:
        spec: dict = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if disruption_mode:
            spec["disruptionMode"] = {disruption_mode: {}}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": self.group}, "spec": spec})

    def gone(self, name: str) -> bool:
        """Deleted, or being deleted."""
        try:
            return bool(self.read(name)["metadata"].get("deletionTimestamp"))
        except ApiException as err:
            if err.status == 404:
                return True
            raise

    def failed_scheduling(self, names: list[str]) -> list[str]:
        """The distinct FailedScheduling messages of the named pods."""
        events = self.core_v1.list_namespaced_event(self.namespace, field_selector="reason=FailedScheduling")
        return sorted({e.message or e.note or "" for e in events.items if e.involved_object.name in names})

    def preempted_events(self, names: list[str], preemptor_uid: str) -> list[str]:
        """The Preempted events of the named pods, the preemptor's UID written UID."""
        events = self.core_v1.list_namespaced_event(self.namespace, field_selector="reason=Preempted")
        return sorted((e.message or e.note or "").replace(preemptor_uid, "UID") for e in events.items
                      if e.involved_object.name in names)

    def pod(self, name: str, cpu: str = "600m", member: bool = True, claim: str = "", priority_class: str = "") -> str:
        spec = {"schedulerName": self.scheduler, "nodeSelector": {RUN_LABEL: self.run},
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": cpu}}}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if claim:
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        if member:
            spec["schedulingGroup"] = {"podGroupName": self.group}
        full = f"{name}-{self.run}"
        self.core_v1.create_namespaced_pod(self.namespace, pod_manifest(full, **spec), _preload_content=False)
        return full

    def read(self, name: str) -> dict:
        return json.loads(self.core_v1.read_namespaced_pod(name, self.namespace, _preload_content=False).data)

    def node_of(self, name: str) -> str:
        return self.read(name)["spec"].get("nodeName") or ""

    def unschedulable_message(self, name: str) -> str | None:
        cond = next((c for c in self.read(name)["status"].get("conditions") or ()
                     if c["type"] == "PodScheduled" and c["status"] == "False"), None)
        return cond["message"] if cond else None

    def delete(self, name: str) -> None:
        self.core_v1.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0, _preload_content=False)

    def group_condition(self) -> tuple | None:
        pg = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.group)
        cond = next((c for c in (pg.get("status") or {}).get("conditions") or ()
                     if c["type"] == "PodGroupInitiallyScheduled"), None)
        return (cond["status"], cond["reason"], cond["message"]) if cond else None

    def all_rejected(self, members: list[str]) -> dict[str, str] | None:
        messages = {m: self.unschedulable_message(m) for m in members}
        return messages if all(messages.values()) else None


def group_messages(messages: dict[str, str]) -> list[str]:
    """The members' rejection messages, the one member's own fit error reduced to its cause
    (the node count differs: each scheduler's nodes are in the cluster at the same time)."""
    return sorted("fit error: Insufficient cpu" if "Insufficient cpu" in m else m for m in messages.values())


def test_a_gang_of_four_where_three_fit_binds_none_then_all_once_a_node_arrives(
        gang_scheduler, nodes, core_v1, api_client, namespace):
    outcomes = {}
    for kind in SCHEDULERS:
        gang = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
        gang.nodes(3)
        gang.pod_group(4)
        members = [gang.pod(f"w{i}") for i in range(4)]
        plain = gang.pod("plain", cpu="100m", member=False)
        wait_for(lambda g=gang, p=plain: g.node_of(p), 30, what=f"{kind}: the pod of no group bound")
        messages = wait_for(lambda g=gang, ms=members: g.all_rejected(ms), 60, what=f"{kind}: every member rejected")
        time.sleep(2)  # a partial bind would show by now
        bound_while_short = [m for m in members if gang.node_of(m)]
        condition_short = wait_for(gang.group_condition, 30, what=f"{kind}: the PodGroup condition")
        gang.nodes(1)
        arrived = time.monotonic()
        wait_for(lambda g=gang, ms=members: all(g.node_of(m) for m in ms), 60, what=f"{kind}: all four bound")
        outcomes[kind] = {
            "bound while three fit": bound_while_short,
            "messages": group_messages(messages),
            "condition while three fit": condition_short,
            "nodes once four fit": len({gang.node_of(m) for m in members}),
            "condition once four fit": wait_for(lambda g=gang: (g.group_condition() or ("",))[0] == "True"
                                                and g.group_condition(), 30, what=f"{kind}: condition True"),
            "seconds to bind": round(time.monotonic() - arrived, 1),
        }
    print(json.dumps(outcomes, indent=1))
    for outcome in outcomes.values():
        outcome.pop("seconds to bind")
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["bound while three fit"] == []
    assert outcomes["kubesched"]["nodes once four fit"] == 4


def test_a_member_deleted_while_the_group_waits(gang_scheduler, nodes, core_v1, api_client, namespace):
    outcomes = {}
    for kind in SCHEDULERS:
        gang = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
        gang.nodes(3)
        gang.pod_group(4)
        members = [gang.pod(f"w{i}") for i in range(4)]
        rejected = wait_for(lambda g=gang, ms=members: g.all_rejected(ms), 60, what=f"{kind}: every member rejected")
        gang.delete(members.pop())
        gang.nodes(1)  # room for four now, but only three members
        # The group's next try comes when its backoff ends (up to 10 s once it has been tried
        # a few times, and later on a loaded machine); a fixed sleep read the first rejection's
        # messages from kube-scheduler on one run and the retry's from kubesched.

        def retried(g=gang, ms=members, before=rejected):
            return all(g.unschedulable_message(m) not in (None, before[m]) for m in ms)

        wait_for(retried, 60, interval=0.5, what=f"{kind}: the group tried again without its deleted member")
        bound_with_three = [m for m in members if gang.node_of(m)]
        messages_with_three = group_messages({m: gang.unschedulable_message(m) or "" for m in members})
        members.append(gang.pod("replacement"))
        wait_for(lambda g=gang, ms=members: all(g.node_of(m) for m in ms), 60, what=f"{kind}: all four bound")
        outcomes[kind] = {"bound with three members": bound_with_three, "messages with three": messages_with_three,
                          "nodes with the replacement": len({gang.node_of(m) for m in members})}
    print(json.dumps(outcomes, indent=1))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    # The group sat out its backoff when its member went; its next try, with three members,
    # is rejected before any member's PreFilter, and v1.37.1's DynamicResources PodGroupPostFilter
    # then finds no group state: an error, after which PreEnqueue counts three and holds them.
    assert outcomes["kubesched"]["messages with three"] == [
        'error in "DynamicResources" PodGroupPostFilter plugins: not found'] * 3
    assert outcomes["kubesched"]["bound with three members"] == []


def test_two_gangs_competing_for_room_that_fits_one(gang_scheduler, nodes, core_v1, api_client, namespace):
    outcomes = {}
    for kind in SCHEDULERS:
        first = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
        second = Gang(kind, first.scheduler, core_v1, api_client, namespace, nodes)
        second.run = first.run  # the same three nodes, room for three of the four pods
        first.nodes(3)
        first.pod_group(2)
        second.group = f"infer-{first.run}"
        second.pod_group(2)
        members = {first.group: [first.pod(f"a{i}") for i in range(2)],
                   second.group: [second.pod(f"b{i}") for i in range(2)]}
        pods = [p for group in members.values() for p in group]

        def settled(g=first, pods=pods):
            return all(g.node_of(p) or g.unschedulable_message(p) for p in pods)

        wait_for(settled, 60, what=f"{kind}: every pod bound or rejected")
        time.sleep(2)
        outcomes[kind] = sorted(sum(1 for p in group if first.node_of(p)) for group in members.values())
    print(json.dumps(outcomes))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"] == [0, 2]


def test_a_group_split_across_profiles(gang_scheduler, nodes, core_v1, api_client, namespace):
    outcomes = {}
    for kind in SCHEDULERS:
        other = f"other-{kind[-5:]}-{uuid.uuid4().hex[:6]}"
        gang = Gang(kind, gang_scheduler(kind, other), core_v1, api_client, namespace, nodes)
        gang.nodes(2)
        gang.pod_group(2)
        first = gang.pod("w0")
        gang.scheduler, main = other, gang.scheduler
        second = gang.pod("w1")
        messages = wait_for(lambda g=gang, ms=[first, second]: g.all_rejected(ms), 60,
                            what=f"{kind}: both members rejected")
        time.sleep(2)
        condition = wait_for(gang.group_condition, 30, what=f"{kind}: the PodGroup condition")
        outcomes[kind] = {"bound": [m for m in (first, second) if gang.node_of(m)],
                          "messages": sorted(m.replace(main, "MAIN").replace(other, "OTHER")
                                             for m in messages.values()),
                          "condition": [condition[0], condition[1]]}
    print(json.dumps(outcomes, indent=1))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["bound"] == [] and outcomes["kubesched"]["condition"] == ["False", "SchedulerError"]


def test_a_group_whose_members_differ_in_priority(gang_scheduler, nodes, core_v1, api_client, namespace):
    """validatePodGroup: every member must have the PodGroup's priority (0 here, the group names
    no class); one member of a higher class fails the whole group with a SchedulerError."""
    scheduling = client.SchedulingV1Api(api_client)
    high = f"gang-high-{uuid.uuid4().hex[:6]}"
    scheduling.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=high), value=100))
    try:
        outcomes = {}
        for kind in SCHEDULERS:
            gang = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
            gang.nodes(2)
            gang.pod_group(2)
            members = [gang.pod("w0"), gang.pod("w1", priority_class=high)]
            messages = wait_for(lambda g=gang, ms=members: g.all_rejected(ms), 60, what=f"{kind}: both members rejected")
            condition = wait_for(gang.group_condition, 30, what=f"{kind}: the PodGroup condition")
            outcomes[kind] = {"bound": [m for m in members if gang.node_of(m)], "messages": sorted(set(messages.values())),
                              "condition": list(condition)}
        print(json.dumps(outcomes, indent=1))
        assert outcomes["kubesched"] == outcomes["kube-scheduler"]
        assert outcomes["kubesched"] == {
            "bound": [],
            "messages": ["all pods in a single pod group should have the same priority as the pod group's priority, "
                         "got 100 and 0"],
            "condition": ["False", "SchedulerError", "all pods in a single pod group should have the same priority as "
                                                     "the pod group's priority, got 100 and 0"]}
    finally:
        scheduling.delete_priority_class(high)


def test_with_the_schedulers_gate_off_a_group_is_scheduled_pod_by_pod(
        gang_scheduler, nodes, core_v1, api_client, namespace):
    outcomes = {}
    for kind in SCHEDULERS:
        gang = Gang(kind, gang_scheduler(kind, gate=False), core_v1, api_client, namespace, nodes)
        gang.nodes(3)
        gang.pod_group(4)
        members = [gang.pod(f"w{i}") for i in range(4)]

        def settled(g=gang, ms=members):
            return all(g.node_of(m) or g.unschedulable_message(m) for m in ms)

        wait_for(settled, 60, what=f"{kind}: every pod bound or rejected")
        outcomes[kind] = {"bound": sum(1 for m in members if gang.node_of(m)),
                          "condition": gang.group_condition()}
    print(json.dumps(outcomes))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"] == {"bound": 3, "condition": None}


def test_a_gang_with_wait_for_first_consumer_claims_binds_no_volume_until_all_fit(
        gang_scheduler, nodes, core_v1, api_client, namespace):
    from test_kubesched_volumes import Storage, claim, claim_phase

    storage = Storage(api_client, core_v1)
    outcomes = {}
    try:
        for kind in SCHEDULERS:
            gang = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
            first_node, second_node = gang.nodes(2)
            local = storage.storage_class()  # WaitForFirstConsumer, no provisioner
            storage.local_volume(local, first_node)
            gang.pod_group(2)
            claims = [f"data{i}-{gang.run}" for i in range(2)]
            for name in claims:
                core_v1.create_namespaced_persistent_volume_claim(namespace, claim(name, local), _preload_content=False)
            members = [gang.pod(f"w{i}", cpu="100m", claim=c) for i, c in enumerate(claims)]
            wait_for(lambda g=gang, ms=members: g.all_rejected(ms), 60, what=f"{kind}: both members rejected")
            time.sleep(2)
            bound_with_one_volume = [m for m in members if gang.node_of(m)]
            phases_with_one_volume = [claim_phase(core_v1, namespace, c) for c in claims]
            storage.local_volume(local, second_node)
            wait_for(lambda g=gang, ms=members: all(g.node_of(m) for m in ms), 90, what=f"{kind}: both bound")
            wait_for(lambda cs=claims: all(claim_phase(core_v1, namespace, c) == "Bound" for c in cs), 60,
                     what=f"{kind}: both claims bound")
            outcomes[kind] = {"bound with one volume": bound_with_one_volume,
                              "claims with one volume": phases_with_one_volume,
                              "nodes with two": len({gang.node_of(m) for m in members})}
    finally:
        storage.cleanup()
    print(json.dumps(outcomes, indent=1))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"] == {"bound with one volume": [], "claims with one volume": ["Pending", "Pending"],
                                     "nodes with two": 2}


def dra_gang_outcomes(gang_scheduler, nodes, core_v1, api_client, tag: str, scenario) -> dict:
    """{scheduler: scenario(run, group)} for each scheduler, on its own nodes a and b, namespace and
    device class (test_kubesched_dra.Run), with a PodGroup of minCount 2 named group."""
    from test_kubesched_dra import Run

    dra = client.CustomObjectsApi(api_client)
    outcomes, runs = {}, []
    try:
        for kind in SCHEDULERS:
            run = Run(kind, gang_scheduler(kind), core_v1, dra, nodes, f"t-{tag}-{kind[:6]}-{uuid.uuid4().hex[:5]}")
            runs.append(run)
            run.make_nodes("a", "b")
            group = f"train-{run.tag}"
            dra.create_namespaced_custom_object(GROUP, VERSION, run.namespace, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": group},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
            outcomes[kind] = scenario(run, group)
            run.remove_nodes()
    finally:
        for run in runs:
            run.cleanup()
    print(json.dumps(outcomes, indent=1))
    return outcomes


def both_members_bound(run) -> None:
    wait_for(lambda: all(run.outcome(f"w{i}")["node"] for i in range(2)), 90, what=f"{run.kind}: both members bound")


def test_a_gang_whose_members_claim_devices_allocates_none_until_all_fit(
        gang_scheduler, nodes, core_v1, api_client):
    from test_kubesched_dra import gpu_request

    def scenario(run, group):
        run.publish("a", gpus=1)
        gpu = run.gpu_class()
        for i in range(2):
            run.claim(f"gpu{i}", gpu_request(gpu))
            run.pod(f"w{i}", f"gpu{i}", schedulingGroup={"podGroupName": group})
        first = {f"w{i}": run.outcome(f"w{i}") for i in range(2)}
        time.sleep(2)
        allocated_with_one = [c for c in ("gpu0", "gpu1") if run.allocation(c)]
        run.publish("b", gpus=1)
        both_members_bound(run)
        return {"bound with one device": sorted(p for p, o in first.items() if o["node"]),
                "allocated with one device": allocated_with_one,
                "nodes with two": sorted(run.outcome(f"w{i}")["node"] for i in range(2)),
                "devices with two": sorted(d for c in ("gpu0", "gpu1") for d in run.devices(c))}

    outcomes = dra_gang_outcomes(gang_scheduler, nodes, core_v1, api_client, "gang-dra", scenario)
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["bound with one device"] == [] and outcomes["kubesched"]["allocated with one device"] == []
    assert outcomes["kubesched"]["nodes with two"] == ["a", "b"]


def test_a_gang_whose_member_holds_a_claim_allocated_where_it_cannot_run_gets_it_deallocated(
        gang_scheduler, nodes, core_v1, api_client):
    """w0's claim was allocated (by an earlier attempt, say) to node a's GPU, but w0 may only run
    on b: the group fails, its PodGroupPostFilter deallocates the claim, and the next attempt
    places both members, w0 with a GPU of b."""
    from test_kubesched_dra import DRIVER, gpu_request
    from test_kubesched_dra import VERSION as DRA_VERSION

    def scenario(run, group):
        run.publish("a", gpus=1)
        run.publish("b", gpus=2)
        gpu = run.gpu_class()
        for i in range(2):
            run.claim(f"gpu{i}", gpu_request(gpu))
        allocation = {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": run.node("a"), "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [run.node("a")]}]}]}}
        run.dra.patch_namespaced_custom_object_status("resource.k8s.io", DRA_VERSION, run.namespace, "resourceclaims",
                                                      "gpu0", {"status": {"allocation": allocation}})
        run.pod("w0", "gpu0", schedulingGroup={"podGroupName": group},
                nodeSelector={"kubernetes.io/hostname": run.node("b")})
        run.pod("w1", "gpu1", schedulingGroup={"podGroupName": group})
        both_members_bound(run)
        return {"w0": run.outcome("w0")["node"], "gpu0": run.devices("gpu0")}

    outcomes = dra_gang_outcomes(gang_scheduler, nodes, core_v1, api_client, "gang-dealloc", scenario)
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["w0"] == "b" and outcomes["kubesched"]["gpu0"][0].startswith("b/")


@pytest.fixture
def priority_classes(api_client):
    """(low, high): two PriorityClasses, 10 and 100, removed afterwards."""
    scheduling = client.SchedulingV1Api(api_client)
    names = (f"gang-low-{uuid.uuid4().hex[:6]}", f"gang-high-{uuid.uuid4().hex[:6]}")
    for name, value in zip(names, (10, 100)):
        scheduling.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value))
    yield names
    for name in names:
        scheduling.delete_priority_class(name)


def test_a_gang_of_higher_priority_preempts_the_fewest_pods_it_needs(
        gang_scheduler, nodes, core_v1, api_client, namespace, priority_classes):
    """PodGroupPostFilter (workload-aware preemption): three nodes full of pods of lower
    priority, a gang of two that needs two whole nodes. Both schedulers evict two pods, leave
    the third, and bind the gang where the victims were."""
    low, high = priority_classes
    outcomes = {}
    for kind in SCHEDULERS:
        gang = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
        gang.nodes(3)
        victims = [gang.pod(f"low{i}", member=False, priority_class=low) for i in range(3)]
        wait_for(lambda g=gang, vs=victims: all(g.node_of(v) for v in vs), 60, what=f"{kind}: the low pods bound")
        where = {v: gang.node_of(v) for v in victims}
        group = gang.pod_group(2, priority_class=high)
        members = [gang.pod(f"w{i}", priority_class=high) for i in range(2)]
        wait_for(lambda g=gang, ms=members: all(g.node_of(m) for m in ms), 90, what=f"{kind}: both members bound")
        evicted = [v for v in victims if gang.gone(v)]
        events = wait_for(lambda g=gang, ev=evicted, uid=group["metadata"]["uid"]:
                          len(g.preempted_events(ev, uid)) >= len(ev) and g.preempted_events(ev, uid), 30,
                          what=f"{kind}: the Preempted events")
        outcomes[kind] = {
            "victims": len(evicted),
            "members on the victims' nodes": sorted(gang.node_of(m) for m in members) == sorted(where[v] for v in evicted),
            "events": events,
            "condition": (gang.group_condition() or ("",))[:2],
            # a is tried first and fails alone; b, never tried, carries the group's status as it
            # was before the preemption (upstream's completePodGroupAlgorithmResult).
            "members' messages": sorted({"fit error: Insufficient cpu" if "Insufficient cpu" in m else m
                                         for m in gang.failed_scheduling(members)}),
        }
    print(json.dumps(outcomes, indent=1))
    assert outcomes["kubesched"] == outcomes["kube-scheduler"]
    assert outcomes["kubesched"]["victims"] == 2 and outcomes["kubesched"]["members on the victims' nodes"]
    assert outcomes["kubesched"]["events"] == ["Preempted by podgroup UID on node cluster"] * 2
    assert outcomes["kubesched"]["members' messages"] == [
        "fit error: Insufficient cpu", "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"]


def test_a_victim_group_whose_disruption_mode_is_all_is_preempted_whole(
        gang_scheduler, nodes, core_v1, api_client, namespace, priority_classes):
    """Two nodes run a low-priority gang with disruptionMode All, the third a pod of high
    priority; one high-priority pod needs one node, as a group of one (PodGroupPostFilter) or
    as a pod of no group (PostFilter). Upstream evicts the whole low gang, both pods, either
    way, and so must kubesched; with the default (Single) mode both evict one pod."""
    low, high = priority_classes
    outcomes: dict = {}
    for mode in ("all", ""):
        for preemptor_kind in ("group", "pod"):
            for kind in SCHEDULERS:
                batch = Gang(kind, gang_scheduler(kind), core_v1, api_client, namespace, nodes)
                batch.nodes(3)
                batch.pod_group(2, priority_class=low, disruption_mode=mode)
                victims = [batch.pod(f"b{i}", priority_class=low) for i in range(2)]
                wait_for(lambda g=batch, vs=victims: all(g.node_of(v) for v in vs), 60,
                         what=f"{kind}: the low gang bound")
                same = batch.pod("same", member=False, priority_class=high)
                wait_for(lambda g=batch, p=same: g.node_of(p), 60, what=f"{kind}: the high pod bound")
                preemptor = Gang(kind, batch.scheduler, core_v1, api_client, namespace, nodes)
                preemptor.run = batch.run  # the same three nodes
                preemptor.group = f"one-{batch.run}"
                if preemptor_kind == "group":
                    preemptor.pod_group(1, priority_class=high)
                pod = preemptor.pod("w0", priority_class=high, member=preemptor_kind == "group")
                wait_for(lambda g=preemptor, m=pod: g.node_of(m), 90, what=f"{kind}: the preemptor bound")
                outcomes[f"{kind} {mode or 'single'} {preemptor_kind}"] = {
                    "victims": len([v for v in victims if batch.gone(v)]), "high pod untouched": not batch.gone(same)}
    print(json.dumps(outcomes, indent=1))
    for mode, victims in (("all", 2), ("single", 1)):
        for preemptor_kind in ("group", "pod"):
            assert outcomes[f"kubesched {mode} {preemptor_kind}"] == outcomes[f"kube-scheduler {mode} {preemptor_kind}"] \
                == {"victims": victims, "high pod untouched": True}, (mode, preemptor_kind)
