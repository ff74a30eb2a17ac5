"""A fake DRA driver for the lab: publishes ResourceSlices (resource.k8s.io/v1) for chosen
nodes, as a driver's kubelet plugin would. No kubelet plugin runs: scheduling ends at the
allocation written to the claim and the binding.

Each node gets one pool (named after the node) of GPUs with model, index, pcieRoot and
driverVersion attributes and a memory capacity; with --partitionable, one more pool per node
offers a GPU whole or as two halves through shared counters. A DeviceClass selecting the
driver's devices is created too (--class-name; --extended-resource maps it to an extended
resource name). ``shared_gpu_slice`` offers GPUs that several claims share by memory
(allowMultipleAllocations with a request policy); ``binding_conditions`` makes devices that
are ready for a pod only once the driver says so, which ``report_device_conditions`` does in
the claim's status.devices.

    .venv/bin/python -m lab.fake_dra_driver --nodes node-0,node-1 --gpus 8 --partitionable
    .venv/bin/python -m lab.fake_dra_driver --delete
"""

from __future__ import annotations

import argparse
import os
import sys

DRIVER = "gpu.example.com"
GROUP, VERSION = "resource.k8s.io", "v1"
DEFAULT_KUBECONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  ".lab", "admin.kubeconfig")
MODELS = ("A100", "H100")


def gpu_slice(node: str, gpus: int = 8, driver: str = DRIVER, memory: str = "40Gi", pcie_roots: int = 2,
              models: tuple[str, ...] = MODELS, taints: dict[int, dict] | None = None) -> dict:
    """One slice with every GPU of node: gpu-0..gpu-N-1, the first half on pci0, the rest on pci1."""
    devices = []
    for i in range(gpus):
        device = {"name": f"gpu-{i}",
                  "attributes": {"model": {"string": models[i % len(models)]}, "index": {"int": i},
                                 "pcieRoot": {"string": f"pci{i * pcie_roots // gpus}"},
                                 "driverVersion": {"version": "1.2.3"}},
                  "capacity": {"memory": {"value": memory}}}
        if taints and i in taints:
            device["taints"] = [taints[i]]
        devices.append(device)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}", "labels": {"kubesched.io/fake-dra-driver": driver}},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def shared_gpu_slice(node: str, gpus: int = 1, driver: str = DRIVER, memory: str = "40Gi",
                     step: str = "4Gi") -> dict:
    """GPUs several claims can share (DRAConsumableCapacity): each allocation takes the memory
    its request asks for, rounded up to a multiple of step (4Gi when it asks for none)."""
    body = gpu_slice(node, gpus, driver, memory)
    for device in body["spec"]["devices"]:
        device["allowMultipleAllocations"] = True
        device["capacity"]["memory"]["requestPolicy"] = {"default": step,
                                                         "validRange": {"min": step, "step": step, "max": memory}}
    return body


def binding_conditions(body: dict, ready: str = "example.com/attached", failed: str = "example.com/attach-failed") -> dict:
    """The slice's devices become usable by a pod only once the driver reports condition
    ready True in the claim (DRADeviceBindingConditions); failed True means it never will."""
    for device in body["spec"]["devices"]:
        device["bindingConditions"] = [ready]
        device["bindingFailureConditions"] = [failed]
    return body


def report_device_conditions(api, namespace: str, claim_name: str, conditions: list[dict]) -> dict:
    """What a driver does once it prepared (or failed to prepare) the claim's devices: one
    status.devices entry per allocated device, with the given conditions."""
    claim = api.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim_name)
    results = claim["status"]["allocation"]["devices"]["results"]
    stamped = [{"lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Fake", "message": "", **c}
               for c in conditions]
    claim["status"]["devices"] = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                                   **({"shareID": r["shareID"]} if r.get("shareID") else {}),
                                   "conditions": stamped} for r in results]
    return api.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, "resourceclaims", claim_name, claim)


def partitionable_slices(node: str, driver: str = DRIVER, memory_gi: int = 80) -> list[dict]:
    """A GPU of memory_gi offered whole ("big") or as two halves ("half-0", "half-1"): a slice
    with the shared counters and a slice with the devices consuming them."""
    pool = {"name": f"{node}-partitions", "generation": 1, "resourceSliceCount": 2}
    labels = {"kubesched.io/fake-dra-driver": driver}

    def consumes(gi: int) -> list[dict]:
        return [{"counterSet": "gpu-memory", "counters": {"memory": {"value": f"{gi}Gi"}}}]

    def device(name: str, gi: int, size: str) -> dict:
        return {"name": name, "attributes": {"model": {"string": "H100"}, "size": {"string": size},
                                             "pcieRoot": {"string": "pci9"}},
                "capacity": {"memory": {"value": f"{gi}Gi"}}, "consumesCounters": consumes(gi)}

    return [
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
         "metadata": {"name": f"{node}-{driver}-counters", "labels": labels},
         "spec": {"driver": driver, "nodeName": node, "pool": dict(pool),
                  "sharedCounters": [{"name": "gpu-memory",
                                      "counters": {"memory": {"value": f"{memory_gi}Gi"}}}]}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
         "metadata": {"name": f"{node}-{driver}-partitions", "labels": labels},
         "spec": {"driver": driver, "nodeName": node, "pool": dict(pool),
                  "devices": [device("big", memory_gi, "whole"), device("half-0", memory_gi // 2, "half"),
                              device("half-1", memory_gi // 2, "half")]}},
    ]


def device_class(name: str = DRIVER, driver: str = DRIVER, extended_resource: str = "",
                 selectors: tuple[str, ...] = ()) -> dict:
    exprs = (f'device.driver == "{driver}"',) + tuple(selectors)
    spec: dict = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def custom_objects_from_kubeconfig(path: str = DEFAULT_KUBECONFIG):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=configuration)
    return client.CustomObjectsApi(client.ApiClient(configuration))


def apply(api, body: dict) -> None:
    """Create body (a cluster-scoped resource.k8s.io/v1 object), replacing one of the same name."""
    from kubernetes.client.rest import ApiException

    plural = {"ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses"}[body["kind"]]
    try:
        api.create_cluster_custom_object(GROUP, VERSION, plural, body)
    except ApiException as err:
        if err.status != 409:
            raise
        current = api.get_cluster_custom_object(GROUP, VERSION, plural, body["metadata"]["name"])
        body = {**body, "metadata": {**body["metadata"],
                                     "resourceVersion": current["metadata"]["resourceVersion"]}}
        api.replace_cluster_custom_object(GROUP, VERSION, plural, body["metadata"]["name"], body)


def publish(api, nodes: list[str], gpus: int = 8, partitionable: bool = False, driver: str = DRIVER) -> int:
    count = 0
    for node in nodes:
        for body in [gpu_slice(node, gpus, driver)] + (partitionable_slices(node, driver) if partitionable else []):
            apply(api, body)
            count += 1
    return count


def delete_all(api, driver: str = DRIVER) -> int:
    slices = api.list_cluster_custom_object(GROUP, VERSION, "resourceslices",
                                            label_selector=f"kubesched.io/fake-dra-driver={driver}")
    for item in slices.get("items") or ():
        api.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", item["metadata"]["name"])
    return len(slices.get("items") or ())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG)
    parser.add_argument("--nodes", default="", help="comma-separated node names")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--partitionable", action="store_true", help="also one partitionable GPU per node")
    parser.add_argument("--driver", default=DRIVER)
    parser.add_argument("--class-name", default=DRIVER, help="the DeviceClass to create ('' for none)")
    parser.add_argument("--extended-resource", default="", help="extendedResourceName of the DeviceClass")
    parser.add_argument("--delete", action="store_true", help="delete this driver's ResourceSlices instead")
    args = parser.parse_args(argv)
    api = custom_objects_from_kubeconfig(args.kubeconfig)
    if args.delete:
        print(f"deleted {delete_all(api, args.driver)} ResourceSlices of {args.driver}")
        return 0
    nodes = [n for n in args.nodes.split(",") if n]
    if not nodes:
        parser.error("--nodes is required: name the nodes whose devices this driver publishes")
    if args.class_name:
        apply(api, device_class(args.class_name, args.driver, args.extended_resource))
    print(f"published {publish(api, nodes, args.gpus, args.partitionable, args.driver)} ResourceSlices "
          f"for {len(nodes)} node(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
