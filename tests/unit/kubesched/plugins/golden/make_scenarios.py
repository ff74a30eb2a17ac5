"""Random scheduling scenarios for the upstream comparison (see README.md here).

Deterministic: the same seed writes the same scenarios.json.
"""

from __future__ import annotations

import json
import random
import sys

HOST, ZONE, REGION = "kubernetes.io/hostname", "topology.kubernetes.io/zone", "region"
NAMESPACES = [("default", {}), ("team-a", {"team": "a"}), ("team-b", {"team": "b"}), ("team-a2", {"team": "a"})]
APPS = ["web", "db", "cache"]
TIERS = ["front", "back"]
IMAGES = ["nginx:1.25", "redis", "gcr.io/big:v1", "registry:5000/app"]
GPU = "example.com/gpu"


def pick(rng, seq, k=None):
    return rng.choice(seq) if k is None else rng.sample(seq, k)


def labels_for(rng):
    labels = {"app": pick(rng, APPS)}
    if rng.random() < 0.6:
        labels["tier"] = pick(rng, TIERS)
    if rng.random() < 0.3:
        labels["rev"] = str(rng.randint(1, 2))
    return labels


def label_selector(rng):
    kind = rng.random()
    if kind < 0.4:
        return {"matchLabels": {"app": pick(rng, APPS)}}
    if kind < 0.7:
        op = pick(rng, ["In", "NotIn", "Exists", "DoesNotExist"])
        expr = {"key": pick(rng, ["app", "tier"]), "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = pick(rng, APPS + TIERS, rng.randint(1, 2))
        return {"matchExpressions": [expr]}
    if kind < 0.8:
        return {}
    return {"matchLabels": {"app": pick(rng, APPS)}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}


def affinity_term(rng):
    term = {"labelSelector": label_selector(rng), "topologyKey": pick(rng, [HOST, ZONE, REGION])}
    r = rng.random()
    if r < 0.15:
        term["namespaces"] = pick(rng, [n for n, _unused in NAMESPACES], rng.randint(1, 2))
    elif r < 0.3:
        term["namespaceSelector"] = pick(rng, [{}, {"matchLabels": {"team": "a"}}])
    return term


def pod_affinity(rng, allow_required=True):
    out = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        section = {}
        if allow_required and rng.random() < 0.3:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = [affinity_term(rng)
                                                                         for _unused in range(rng.randint(1, 2))]
        if rng.random() < 0.4:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": affinity_term(rng)}
                for _unused in range(rng.randint(1, 2))]
        if section:
            out[kind] = section
    return out


def node_selector_requirement(rng):
    op = pick(rng, ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    key = "rank" if op in ("Gt", "Lt") else pick(rng, ["color", ZONE, "disk", "rank"])
    expr = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = pick(rng, ["blue", "red", "zone-0", "zone-1", "ssd"], rng.randint(1, 2))
    elif op in ("Gt", "Lt"):
        expr["values"] = [str(rng.randint(0, 10))]
    return expr


def node_term(rng):
    term = {"matchExpressions": [node_selector_requirement(rng) for _unused in range(rng.randint(1, 2))]}
    if rng.random() < 0.15:
        term["matchFields"] = [{"key": "metadata.name", "operator": pick(rng, ["In", "NotIn"]),
                                "values": [f"node-{rng.randint(0, 5)}"]}]
    return term


def taints(rng):
    out = []
    for _unused in range(rng.choice([0, 0, 0, 1, 2])):
        out.append({"key": pick(rng, ["dedicated", "spot", "gpu"]), "value": pick(rng, ["", "x", "y"]),
                    "effect": pick(rng, ["NoSchedule", "PreferNoSchedule", "NoExecute", "PreferNoSchedule"])})
    return out


def tolerations(rng):
    out = []
    for _unused in range(rng.choice([0, 0, 1, 2])):
        t = {"operator": pick(rng, ["Equal", "Exists", ""])}
        if rng.random() < 0.85:
            t["key"] = pick(rng, ["dedicated", "spot", "gpu"])
        if t["operator"] != "Exists":
            t["value"] = pick(rng, ["", "x", "y"])
        if rng.random() < 0.7:
            t["effect"] = pick(rng, ["NoSchedule", "PreferNoSchedule", "NoExecute"])
        out.append({k: v for k, v in t.items() if v != "" or k == "value"})
    return out


def containers(rng, name):
    out = []
    for i in range(rng.randint(1, 3)):
        c = {"name": f"{name}-c{i}", "image": pick(rng, IMAGES)}
        reqs = {}
        if rng.random() < 0.7:
            reqs["cpu"] = pick(rng, ["100m", "250m", "500m", "1", "1500m"])
        if rng.random() < 0.7:
            reqs["memory"] = pick(rng, ["64Mi", "256Mi", "1Gi", "0"])
        if reqs:
            c["resources"] = {"requests": reqs}
        if rng.random() < 0.1:
            c["ports"] = [{"containerPort": 80, "hostPort": pick(rng, [80, 8080]),
                           "protocol": pick(rng, ["TCP", "UDP"])}]
        out.append(c)
    return out


def spread_constraints(rng, labels):
    out = []
    for key in pick(rng, [HOST, ZONE, REGION], rng.randint(1, 2)):
        c = {"maxSkew": rng.randint(1, 3), "topologyKey": key,
             "whenUnsatisfiable": pick(rng, ["DoNotSchedule", "ScheduleAnyway"]), "labelSelector": label_selector(rng)}
        if rng.random() < 0.3:
            c["minDomains"] = rng.randint(1, 4)
            c["whenUnsatisfiable"] = "DoNotSchedule"
        if rng.random() < 0.2:
            c["nodeAffinityPolicy"] = pick(rng, ["Honor", "Ignore"])
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = pick(rng, ["Honor", "Ignore"])
        if rng.random() < 0.2 and "rev" in labels:
            c["matchLabelKeys"] = ["rev"]
        out.append(c)
    return out


def with_resource_variety(rng, spec, name):
    """Init and sidecar containers, overhead, pod-level requests, extended resources."""
    if rng.random() < 0.2:
        init = containers(rng, f"{name}-init")
        for c in init:
            if rng.random() < 0.5:
                c["restartPolicy"] = "Always"
            c.pop("ports", None)
        spec["initContainers"] = init
    if rng.random() < 0.1:
        spec["overhead"] = {"cpu": "50m", "memory": "32Mi"}
    if rng.random() < 0.1:
        spec["resources"] = {"requests": {pick(rng, ["cpu", "memory"]): pick(rng, ["300m", "2"])}}
        if "memory" in spec["resources"]["requests"]:
            spec["resources"]["requests"]["memory"] = "512Mi"
    if rng.random() < 0.15:
        c = spec["containers"][0]
        c.setdefault("resources", {}).setdefault("requests", {})[pick(rng, [GPU, "hugepages-2Mi"])] = \
            pick(rng, ["1", "2"]) if rng.random() < 0.5 else "2Mi"


def pod(rng, name, node_name=None, incoming=False, owners=()):
    labels = labels_for(rng)
    spec = {"containers": containers(rng, name)}
    with_resource_variety(rng, spec, name)
    if node_name:
        spec["nodeName"] = node_name
    if rng.random() < 0.4:
        spec["tolerations"] = tolerations(rng)
    aff = pod_affinity(rng, allow_required=True) if rng.random() < 0.6 else {}
    if incoming and rng.random() < 0.5:
        node_aff = {}
        if rng.random() < 0.6:
            node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [node_term(rng) for _unused in range(rng.randint(1, 2))]}
        if rng.random() < 0.6:
            node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "preference": node_term(rng)} for _unused in range(rng.randint(1, 3))]
        if node_aff:
            aff["nodeAffinity"] = node_aff
    if aff:
        spec["affinity"] = aff
    if incoming and rng.random() < 0.3:
        spec["nodeSelector"] = {pick(rng, ["color", "disk"]): pick(rng, ["blue", "ssd"])}
    if incoming and rng.random() < 0.5:
        spec["topologySpreadConstraints"] = spread_constraints(rng, labels)
    ns = pick(rng, [n for n, _unused in NAMESPACES]) if rng.random() < 0.3 else "default"
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels}
    owned = [o for o in owners if o["namespace"] == ns]
    if owned and rng.random() < 0.5:
        owner = pick(rng, owned)
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["name"],
                                    "uid": f"uid-{owner['name']}", "controller": True}]
        meta["labels"] = dict(owner["labels"], **labels)
    if not incoming and rng.random() < 0.05:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {}}


def node(rng, i):
    labels = {HOST: f"node-{i}"}
    if rng.random() < 0.9:
        labels[ZONE] = f"zone-{rng.randint(0, 2)}"
    if rng.random() < 0.7:
        labels[REGION] = f"r{rng.randint(0, 1)}"
    for key, values in (("color", ["blue", "red"]), ("disk", ["ssd", "hdd"]), ("rank", ["1", "5", "9", "x"])):
        if rng.random() < 0.5:
            labels[key] = pick(rng, values)
    status = {"allocatable": {"cpu": pick(rng, ["2", "4", "8", "3500m"]), "memory": pick(rng, ["4Gi", "8Gi", "16Gi"]),
                              "pods": str(pick(rng, [5, 110]))}}
    if rng.random() < 0.3:
        status["allocatable"][GPU] = pick(rng, ["1", "4"])
    if rng.random() < 0.2:
        status["allocatable"]["hugepages-2Mi"] = pick(rng, ["2Mi", "8Mi"])
    if rng.random() < 0.5:
        status["images"] = [{"names": [pick(rng, ["nginx:1.25", "redis:latest", "gcr.io/big:v1"])],
                             "sizeBytes": pick(rng, [30, 200, 900]) * 1024 * 1024}
                            for _unused in range(rng.randint(1, 2))]
    status["capacity"] = dict(status["allocatable"])
    spec = {}
    t = taints(rng)
    if t:
        spec["taints"] = t
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    return {"metadata": {"name": f"node-{i}", "labels": labels}, "spec": spec, "status": status}


def workloads(rng) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Services, ReplicaSets and StatefulSets whose selectors system default spreading uses."""
    services, replicasets, statefulsets = [], [], []
    for i in range(rng.randint(0, 2)):
        services.append({"metadata": {"name": f"svc{i}", "namespace": pick(rng, ["default", "team-a"])},
                         "spec": {"selector": {"app": pick(rng, APPS)}}})
    owners = []
    for i in range(rng.randint(0, 2)):
        kind = pick(rng, ["ReplicaSet", "StatefulSet"])
        ns = pick(rng, ["default", "team-a"])
        labels = {"owner": f"w{i}"}
        obj = {"metadata": {"name": f"w{i}", "namespace": ns},
               "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}}
        (replicasets if kind == "ReplicaSet" else statefulsets).append(obj)
        owners.append({"apiVersion": "apps/v1", "kind": kind, "name": f"w{i}", "namespace": ns, "labels": labels})
    return services, replicasets, statefulsets, owners


def scenario(seed: int) -> dict:
    rng = random.Random(seed)
    nodes = [node(rng, i) for i in range(rng.randint(2, 6))]
    services, replicasets, statefulsets, owners = workloads(rng)
    existing = []
    for j in range(rng.randint(0, 12)):
        existing.append(pod(rng, f"e{j}", node_name=f"node-{rng.randrange(len(nodes))}", owners=owners))
    return {"name": f"seed-{seed}", "nodes": nodes, "existing": existing,
            "namespaces": [{"metadata": {"name": n, "labels": lab}} for n, lab in NAMESPACES],
            "services": services, "replicasets": replicasets, "statefulsets": statefulsets,
            "pod": pod(rng, "incoming", incoming=True, owners=owners)}


def preemption_scenario(seed: int) -> dict:
    """Full nodes, lower-priority pods (some under PDBs), and a pod that must preempt."""
    rng = random.Random(1_000_000 + seed)
    nodes = []
    for i in range(rng.randint(2, 5)):
        n = node(rng, i)
        n["spec"].pop("unschedulable", None)
        n["spec"]["taints"] = [t for t in n["spec"].get("taints", ()) if t["effect"] == "PreferNoSchedule"]
        n["status"]["allocatable"].update({"cpu": pick(rng, ["2", "3", "4"]), "memory": "8Gi", "pods": "110"})
        nodes.append(n)
    existing = []
    start = 0
    for i, n in enumerate(nodes):
        for j in range(rng.randint(1, 4)):
            start += rng.randint(1, 100)
            labels = {"app": pick(rng, APPS)}
            spec = {"nodeName": n["metadata"]["name"], "priority": rng.choice([0, 1, 1, 2, 3, 50]),
                    "containers": [{"name": "c", "image": "nginx:1.25", "resources": {"requests": {
                        "cpu": pick(rng, ["500m", "1", "1500m"]), "memory": pick(rng, ["256Mi", "1Gi"])}}}]}
            # At most one holder of a host port per node: two could never have been scheduled
            # there, and upstream's NodeInfo (a set, not a count) frees the port when either leaves.
            if rng.random() < 0.15 and not any(p["spec"]["nodeName"] == n["metadata"]["name"] and
                                               p["spec"]["containers"][0].get("ports") for p in existing):
                spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]
            if rng.random() < 0.15:
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}]}}
            existing.append({"metadata": {"name": f"v{i}-{j}", "namespace": "default", "uid": f"uid-v{i}-{j}",
                                          "labels": labels},
                             "spec": spec,
                             "status": {"startTime": f"2026-01-01T00:{start // 60 % 60:02d}:{start % 60:02d}Z"}})
    pdbs = []
    for k in range(rng.randint(0, 2)):
        pdbs.append({"metadata": {"name": f"pdb{k}", "namespace": "default"},
                     "spec": {"selector": {"matchLabels": {"app": pick(rng, APPS)}}},
                     "status": {"disruptionsAllowed": rng.randint(0, 1)}})
    spec = {"priority": rng.choice([2, 10, 100]), "containers": [{"name": "c", "image": "nginx:1.25", "resources": {
        "requests": {"cpu": pick(rng, ["1", "1500m", "2", "3"]), "memory": "512Mi"}}}]}
    labels = {"app": pick(rng, APPS)}
    if rng.random() < 0.2:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]
    if rng.random() < 0.2:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": pick(rng, APPS)}}, "topologyKey": HOST}]}}
    if rng.random() < 0.2:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": labels}}]
    incoming = {"metadata": {"name": "preemptor", "namespace": "default", "uid": "uid-preemptor", "labels": labels},
                "spec": spec, "status": {}}
    return {"name": f"preempt-{seed}", "nodes": nodes, "existing": existing, "pdbs": pdbs, "pod": incoming,
            "namespaces": [{"metadata": {"name": n, "labels": lab}} for n, lab in NAMESPACES]}


DRA_DRIVERS = ["gpu.example.com", "nic.example.com"]
DRA_MODELS = ["A100", "H100", "T4"]


def dra_device(rng, driver, i):
    attrs = {"model": {"string": rng.choice(DRA_MODELS)}, "index": {"int": i},
             "pcieRoot": {"string": f"pci{rng.randrange(2)}"},
             "driverVersion": {"version": rng.choice(["1.2.3", "2.0.0", "1.10.0-rc.1"])}}
    if rng.random() < 0.2:
        attrs[f"{driver}/healthy"] = {"bool": rng.random() < 0.8}
    device = {"name": f"dev-{i}", "attributes": attrs,
              "capacity": {"memory": {"value": rng.choice(["16Gi", "40Gi", "80Gi", "81920Mi"])}}}
    if rng.random() < 0.15:
        device["taints"] = [{"key": "example.com/unhealthy", "value": rng.choice(["true", "maybe"]),
                             "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}]
    return device


def dra_slices(rng, node_name):
    slices = []
    for driver in DRA_DRIVERS[:rng.randint(1, 2)]:
        pool = {"name": f"{node_name}-{driver.split('.')[0]}", "generation": 1, "resourceSliceCount": 1}
        kind = rng.random()
        if kind < 0.2:  # partitionable: a counter slice and a device slice in one pool
            pool["resourceSliceCount"] = 2
            total = rng.choice([40, 80])
            slices.append({"metadata": {"name": f"{pool['name']}-counters"},
                           "spec": {"driver": driver, "nodeName": node_name, "pool": dict(pool),
                                    "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": f"{total}Gi"}}}]}})
            devices = []
            for i, size in enumerate([total, total // 2, total // 2, total // 4, total // 4]):
                d = dra_device(rng, driver, i)
                d["capacity"] = {"memory": {"value": f"{size}Gi"}}
                d["consumesCounters"] = [{"counterSet": "mem", "counters": {"memory": {"value": f"{size}Gi"}}}]
                devices.append(d)
            slices.append({"metadata": {"name": f"{pool['name']}-devices"},
                           "spec": {"driver": driver, "nodeName": node_name, "pool": dict(pool), "devices": devices}})
            continue
        devices = [dra_device(rng, driver, i) for i in range(rng.randint(1, 6))]
        if kind < 0.25 and len(devices) > 1:
            devices[-1]["name"] = devices[0]["name"]  # a broken driver: duplicate device names
        if kind > 0.95:
            pool["resourceSliceCount"] = 2  # the second slice is not published yet
        slices.append({"metadata": {"name": f"{pool['name']}-0"},
                       "spec": {"driver": driver, "nodeName": node_name, "pool": pool, "devices": devices}})
    return slices


def dra_selector(rng, driver):
    if rng.random() < 0.08:
        return f'device.attributes["{driver}"].healthy'  # a runtime error where the attribute is missing
    return rng.choice([
        f'device.attributes["{driver}"].model == "{rng.choice(DRA_MODELS)}"',
        f'device.capacity["{driver}"].memory.compareTo(quantity("{rng.choice(["20Gi", "40Gi", "64Gi"])}")) >= 0',
        f'device.attributes["{driver}"].driverVersion.isGreaterThan(semver("1.5.0"))',
        f'device.attributes["{driver}"].index % 2 == {rng.randrange(2)}',
        f'device.attributes["{driver}"].?healthy.orValue(true)',
        f'device.attributes["{driver}"].model.startsWith("A") || device.attributes["{driver}"].pcieRoot == "pci1"',
        f'"{driver}" in device.attributes && device.attributes["{driver}"].index < 4',
    ])


def dra_request(rng, name, driver):
    exactly = {"deviceClassName": f"{driver}-{rng.choice(['any', 'big'])}", "allocationMode": "ExactCount",
               "count": rng.choice([1, 1, 1, 2, 3])}
    if rng.random() < 0.1:
        exactly = {"deviceClassName": exactly["deviceClassName"], "allocationMode": "All"}
    if rng.random() < 0.4:
        exactly["selectors"] = [{"cel": {"expression": dra_selector(rng, driver)}}]
    if rng.random() < 0.2:
        exactly["tolerations"] = [{"key": "example.com/unhealthy", "operator": rng.choice(["Exists", "Equal"]),
                                   "value": "true", "effect": rng.choice(["NoSchedule", "NoExecute", ""])}]
    if rng.random() < 0.05:
        exactly["adminAccess"] = True
    if rng.random() < 0.2:
        subs = []
        for j in range(rng.randint(2, 3)):
            sub = {"name": f"s{j}", "deviceClassName": f"{driver}-any", "allocationMode": "ExactCount",
                   "count": rng.choice([1, 2, 4])}
            if rng.random() < 0.5:
                sub["selectors"] = [{"cel": {"expression": dra_selector(rng, driver)}}]
            subs.append(sub)
        return {"name": name, "firstAvailable": subs}
    return {"name": name, "exactly": exactly}


def dra_scenario(seed: int) -> dict:
    """Nodes with ResourceSlices, DeviceClasses, devices already allocated and the claims of
    one pod, for upstream's structured allocator (upstream_runner dra)."""
    rng = random.Random(seed)
    nodes = [{"metadata": {"name": f"node-{i}", "labels": {HOST: f"node-{i}", "rack": f"r{i % 2}"}}}
             for i in range(rng.randint(1, 3))]
    slices = [s for n in nodes for s in dra_slices(rng, n["metadata"]["name"])]
    if rng.random() < 0.3:  # network-attached devices: for every node, or for the nodes of one rack
        where = rng.choice([{"allNodes": True}, {"nodeSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r0"]}]}]}}])
        slices.append({"metadata": {"name": "fabric-0"},
                       "spec": {"driver": "nic.example.com", **where,
                                "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                                "devices": [dra_device(rng, "nic.example.com", 10 + i) for i in range(3)]}})
    classes = []
    for driver in DRA_DRIVERS:
        classes.append({"metadata": {"name": f"{driver}-any"},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                                 "config": [{"opaque": {"driver": driver, "parameters": {"class": "any"}}}]}})
        classes.append({"metadata": {"name": f"{driver}-big"}, "spec": {"selectors": [
            {"cel": {"expression": f'device.driver == "{driver}"'}},
            {"cel": {"expression": f'device.capacity["{driver}"].memory.compareTo(quantity("40Gi")) >= 0'}}]}})
    all_devices = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                   for s in slices for d in s["spec"].get("devices") or ()]
    allocated = sorted({d for d in all_devices if rng.random() < 0.15})
    claims = []
    for c in range(rng.randint(1, 2)):
        driver = rng.choice(DRA_DRIVERS)
        requests = [dra_request(rng, f"req-{r}", driver) for r in range(rng.randint(1, 2))]
        devices = {"requests": requests}
        if rng.random() < 0.35:
            devices["constraints"] = [{rng.choice(["matchAttribute", "distinctAttribute"]):
                                       rng.choice([f"{driver}/pcieRoot", f"{driver}/model"])}]
        if rng.random() < 0.3:
            devices["config"] = [{"requests": [requests[0]["name"]],
                                  "opaque": {"driver": driver, "parameters": {"claim": c}}}]
        claims.append({"metadata": {"name": f"claim-{c}", "namespace": "default", "uid": f"uid-{seed}-{c}"},
                       "spec": {"devices": devices}})
    scenario = {"name": f"dra-{seed}", "nodes": nodes, "slices": slices, "classes": classes, "claims": claims,
                "allocated": [list(d) for d in allocated], "shared": []}
    dra_consumable_capacity_and_binding_conditions(random.Random(seed + 1_000_000), scenario)
    return scenario


DRA_MEMORY_REQUESTS = ["1Gi", "5Gi", "10Gi", "30Gi", "50Gi", "1500Mi"]


def dra_consumable_capacity_and_binding_conditions(rng, scenario):
    """DRAConsumableCapacity and DRADeviceBindingConditions (both on by default in v1.37), drawn
    from their own random stream so the rest of each scenario stays as it was: devices shared by
    several claims (allowMultipleAllocations) with request policies, shares already allocated,
    capacity requests, and devices with binding conditions."""
    allocated = {tuple(d) for d in scenario["allocated"]}
    for s in scenario["slices"]:
        spec = s["spec"]
        for device in spec.get("devices") or ():
            device_id = (spec["driver"], spec["pool"]["name"], device["name"])
            if rng.random() < 0.3:
                device["allowMultipleAllocations"] = True
                allocated.discard(device_id)  # a shared device is never held whole
                memory = device["capacity"]["memory"]
                total = parse_gi(memory["value"])
                policy = rng.random()
                if policy < 0.35:
                    memory["requestPolicy"] = {"default": "4Gi", "validRange": {"min": "4Gi", "step": "4Gi",
                                                                                **({"max": f"{total // 2}Gi"}
                                                                                   if rng.random() < 0.5 else {})}}
                elif policy < 0.7:
                    values = [v for v in (8, 16, 32, 40) if v <= total]
                    memory["requestPolicy"] = {"default": f"{values[0]}Gi", "validValues": [f"{v}Gi" for v in values]}
                if rng.random() < 0.3:
                    device["capacity"]["bandwidth"] = {"value": "100", "requestPolicy": {
                        "default": "10", "validRange": {"min": "10", "step": "10"}}}
                if rng.random() < 0.3:
                    consumed = {"memory": rng.choice(["8Gi", "16Gi", "32Gi"])}
                    if "bandwidth" in device["capacity"] and rng.random() < 0.5:
                        consumed["bandwidth"] = "50"
                    scenario["shared"].append({"device": list(device_id), "consumedCapacity": consumed})
            if rng.random() < 0.1:
                device["bindingConditions"] = ["example.com/attached"]
                device["bindingFailureConditions"] = ["example.com/failed"]  # the API requires both
    scenario["allocated"] = [list(d) for d in sorted(allocated)]
    for claim in scenario["claims"]:
        for request in claim["spec"]["devices"]["requests"]:
            for target in [request.get("exactly")] + list(request.get("firstAvailable") or ()):
                if target is None or rng.random() >= 0.35:
                    continue
                requests = {"memory": rng.choice(DRA_MEMORY_REQUESTS)}
                if rng.random() < 0.25:
                    requests["bandwidth"] = rng.choice(["15", "40"])
                target["capacity"] = {"requests": requests}
            if request.get("exactly") is not None and rng.random() < 0.03:
                # Past the runtime cost limit (CELSelectorExpressionMaxCost) in cel-go and cel-cpp alike.
                request["exactly"]["selectors"] = [{"cel": {"expression": DRA_EXPENSIVE_SELECTOR}}]


# 100^3 loop iterations: about 4,000,000 cel-go cost units, and past cel-cpp's 10,000 iterations.
DRA_EXPENSIVE_SELECTOR = ("cel.bind(l, [" + ", ".join(str(i) for i in range(100)) + "], "
                          "l.all(a, l.all(b, l.all(c, a + b + c >= 0))))")


def parse_gi(value):
    return int(value[:-2]) if value.endswith("Gi") else int(value[:-2]) // 1024


# --- volumes: VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions ----------------

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
GA_ZONE = "topology.kubernetes.io/zone"
SIZES = ["500Mi", "1Gi", "2Gi", "5Gi", "10Gi"]
CSI_DRIVER, CAPACITY_DRIVER = "csi.example.com", "cap.example.com"
STORAGE_CLASSES = [
    {"metadata": {"name": "wait"}, "provisioner": "kubernetes.io/no-provisioner",
     "volumeBindingMode": "WaitForFirstConsumer"},
    {"metadata": {"name": "now"}, "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"},
    {"metadata": {"name": "dyn"}, "provisioner": CSI_DRIVER, "volumeBindingMode": "WaitForFirstConsumer"},
    {"metadata": {"name": "dyn-zoned"}, "provisioner": CSI_DRIVER, "volumeBindingMode": "WaitForFirstConsumer",
     "allowedTopologies": [{"matchLabelExpressions": [{"key": GA_ZONE, "values": ["z1"]}]}]},
    {"metadata": {"name": "dyn-cap"}, "provisioner": CAPACITY_DRIVER, "volumeBindingMode": "WaitForFirstConsumer"},
]


def _volume_node_labels(rng, name):
    labels = {HOST: name}
    kind = rng.random()
    if kind < 0.5:
        labels[GA_ZONE] = pick(rng, ["z1", "z2"])
    elif kind < 0.7:
        labels[BETA_ZONE] = pick(rng, ["z1", "z2"])
    if rng.random() < 0.3:
        labels[REGION] = "r1"
    return labels


def _pv(rng, name, nodes, storage_class, claim=None):
    spec = {"capacity": {"storage": pick(rng, SIZES)}, "storageClassName": storage_class,
            "accessModes": [pick(rng, ["ReadWriteOnce", "ReadWriteOnce", "ReadOnlyMany", "ReadWriteOncePod"])],
            "csi": {"driver": CSI_DRIVER, "volumeHandle": f"h-{name}"}}
    placement = rng.random()
    if placement < 0.5:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [pick(rng, nodes)["metadata"]["name"]]}]}]}}
    elif placement < 0.75:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": GA_ZONE, "operator": "In", "values": [pick(rng, ["z1", "z2"])]}]}]}}
    if rng.random() < 0.1:
        spec["volumeMode"] = "Block"
    labels = {}
    if rng.random() < 0.3:
        labels[pick(rng, [GA_ZONE, BETA_ZONE])] = pick(rng, ["z1", "z2", "z1__z2"])
    if rng.random() < 0.3:
        labels["tier"] = pick(rng, ["fast", "slow"])
    phase = "Available"
    if claim is not None:
        meta = claim["metadata"]
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
                            "uid": meta["uid"]}
        phase = "Bound"
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": labels},
            "spec": spec, "status": {"phase": phase}}


def _pvc(rng, name, storage_class, owner=None):
    spec = {"accessModes": [pick(rng, ["ReadWriteOnce", "ReadWriteOnce", "ReadWriteOncePod"])],
            "storageClassName": storage_class, "resources": {"requests": {"storage": pick(rng, SIZES[:4])}}}
    if rng.random() < 0.15:
        spec["selector"] = {"matchLabels": {"tier": "fast"}}
    meta = {"name": name, "namespace": "default", "uid": f"uid-pvc-{name}", "resourceVersion": "1"}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["name"], "uid": owner["uid"],
                                    "controller": True}]
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def _bind(pvc, pv):
    pvc["spec"]["volumeName"] = pv["metadata"]["name"]
    pvc["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    pvc["status"]["phase"] = "Bound"


def volume_scenario(seed: int) -> dict:
    rng = random.Random(seed * 7919 + 13)
    nodes = [{"metadata": {"name": f"n{i}", "labels": _volume_node_labels(rng, f"n{i}")},
              "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}} for i in range(rng.randint(3, 6))]
    pvs, pvcs, existing = [], [], []
    for k in range(rng.randint(2, 8)):
        pvs.append(_pv(rng, f"pv{k}", nodes, pick(rng, ["wait", "wait", "now", "dyn"])))
    # Claims already in use by pods on the nodes: CSI volumes counted against attach limits.
    for i, node in enumerate(nodes):
        for j in range(rng.randint(0, 2)):
            claim = _pvc(rng, f"used-{i}-{j}", "wait")
            pv = _pv(rng, f"pv-used-{i}-{j}", [node], "wait", claim)
            _bind(claim, pv)
            pvs.append(pv)
            pvcs.append(claim)
            existing.append({"metadata": {"name": f"e{i}-{j}", "namespace": "default", "uid": f"uid-e{i}-{j}"},
                             "spec": {"nodeName": node["metadata"]["name"], "containers": [{"name": "c"}],
                                      "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}]}})
    pod_meta = {"name": "incoming", "uid": "uid-incoming"}
    volumes = []
    for k in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.2 and pvcs:  # share a claim an existing pod uses (ReadWriteOncePod conflicts)
            volumes.append({"name": f"v{k}", "persistentVolumeClaim": {"claimName": pick(rng, pvcs)["metadata"]["name"]}})
            continue
        if kind < 0.3:
            name = f"incoming-v{k}"
            if rng.random() < 0.8:
                pvcs.append(_pvc(rng, name, pick(rng, ["wait", "dyn"]), owner=pod_meta if rng.random() < 0.9 else
                                 {"name": "other", "uid": "uid-other"}))
            volumes.append({"name": f"v{k}", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
            continue
        name = f"c{k}"
        storage_class = pick(rng, ["wait", "wait", "wait", "dyn", "dyn-zoned", "dyn-cap", "now"])
        claim = _pvc(rng, name, storage_class)
        if (storage_class == "now" and rng.random() < 0.6) or rng.random() < 0.15:
            storage_class = claim["spec"]["storageClassName"] = pick(rng, ["now", "wait"])
            pv = _pv(rng, f"pv-{name}", nodes, storage_class, claim)
            _bind(claim, pv)
            if rng.random() < 0.9:
                pvs.append(pv)  # else the claim is bound to a PV that no longer exists
        elif storage_class.startswith("dyn") and rng.random() < 0.2:
            claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": pick(rng, nodes)["metadata"]["name"]}
        pvcs.append(claim)
        volumes.append({"name": f"v{k}", "persistentVolumeClaim": {"claimName": name}})
    csinodes = []
    for node in nodes:
        if rng.random() < 0.8:
            driver = {"name": CSI_DRIVER, "nodeID": node["metadata"]["name"]}
            if rng.random() < 0.7:
                driver["allocatable"] = {"count": rng.randint(1, 4)}
            csinodes.append({"metadata": {"name": node["metadata"]["name"]}, "spec": {"drivers": [driver]}})
    capacities = [{"metadata": {"name": f"cap-{zone}", "namespace": "default"}, "storageClassName": "dyn-cap",
                   "nodeTopology": {"matchLabels": {GA_ZONE: zone}}, "capacity": pick(rng, ["1Gi", "4Gi", "20Gi"]),
                   **({"maximumVolumeSize": "2Gi"} if rng.random() < 0.3 else {})} for zone in ("z1", "z2")]
    incoming = {"metadata": {"name": "incoming", "namespace": "default", "uid": "uid-incoming"},
                "spec": {"containers": [{"name": "c"}], "volumes": volumes}}
    return {"name": f"volumes-{seed}", "nodes": nodes, "existing": existing, "pod": incoming, "pvs": pvs,
            "pvcs": pvcs, "storageClasses": STORAGE_CLASSES, "csiNodes": csinodes,
            "csiDrivers": [{"metadata": {"name": CAPACITY_DRIVER}, "spec": {"storageCapacity": True}}],
            "csiStorageCapacities": capacities}


def _gang_pod_group(rng, name, min_count=None):
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"schedulingPolicy": policy}}


def _gang_member(name, group, node=""):
    spec = {"containers": [{"name": "c", "image": "pause"}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": spec}


def gang_scenario(seed: int) -> dict:
    """GangScheduling alone: a PodGroup (gang, basic or missing), the pods of the group the
    scheduler knows (some bound), one pod asked about (of the group, of another or of none),
    PlacementFeasible over some (remaining, scheduled) and the QueueingHints over some events."""
    rng = random.Random(seed)
    kind = rng.choice(["gang", "gang", "gang", "basic", "missing"])
    min_count = rng.randint(1, 6)
    group = _gang_pod_group(rng, "train", min_count if kind == "gang" else None) if kind != "missing" else None
    members = [_gang_member(f"m{i}", "train", "n1" if rng.random() < 0.3 else "") for i in range(rng.randint(0, 7))]
    target_group = rng.choice(["train", "train", "train", "other", ""])
    pod = _gang_member("asked", target_group)
    if target_group == "train":
        members.append(pod)
    progress = [[rng.randint(0, 6), rng.randint(0, 6)] for _pair in range(4)]
    events = []
    for _event in range(4):
        event = rng.choice(["UnscheduledPodAdd", "AssignedPodAdd", "PodGroupAdd", "PodGroupUpdate"])
        other = rng.choice(["train", "train", "other", ""])
        if event.endswith("PodAdd"):
            new = _gang_member(f"new-{len(events)}", other, "n1" if event == "AssignedPodAdd" else "")
            events.append({"event": event, "new": new})
        elif event == "PodGroupAdd":
            events.append({"event": event, "new": _gang_pod_group(rng, other or "train", rng.randint(1, 6))})
        else:
            old_count = rng.randint(1, 6)
            new_count = max(1, old_count + rng.choice([-1, 0, 1]))
            events.append({"event": event,
                           "old": _gang_pod_group(rng, other or "train", None if rng.random() < 0.2 else old_count),
                           "new": _gang_pod_group(rng, other or "train", None if rng.random() < 0.2 else new_count)})
    return {"name": f"gang-{seed}", "podGroup": group, "members": members, "pod": pod, "progress": progress,
            "events": events}


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "plugins"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    make = {"preemption": preemption_scenario, "dra": dra_scenario, "volumes": volume_scenario,
            "gang": gang_scenario}.get(kind, scenario)
    json.dump([make(seed) for seed in range(count)], sys.stdout, indent=None, separators=(",", ":"))
