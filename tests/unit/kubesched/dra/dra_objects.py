"""Builders of resource.k8s.io/v1 objects for the DRA unit tests."""

from __future__ import annotations

DRIVER = "gpu.example.com"


def gpu_slice(node: str, count: int = 8, *, models=("A100",), roots: int = 2, pool: str | None = None,
              taints: dict | None = None, memory: str = "40Gi", name: str | None = None,
              generation: int = 1, slice_count: int = 1) -> dict:
    devices = []
    for i in range(count):
        device = {"name": f"gpu-{i}",
                  "attributes": {"model": {"string": models[i % len(models)]}, "index": {"int": i},
                                 "pcieRoot": {"string": f"pci{i * roots // count}"},
                                 "driverVersion": {"version": "1.2.3"}},
                  "capacity": {"memory": {"value": memory}}}
        if taints and i in taints:
            device["taints"] = [taints[i]]
        devices.append(device)
    return {"metadata": {"name": name or f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": slice_count},
                     "devices": devices}}


def partitionable_slices(node: str) -> list[dict]:
    """One GPU with 40Gi of memory, offered whole or as two 20Gi halves: a slice with the
    shared counters and a slice with the devices that consume them (v1 keeps them apart)."""
    def consumes(mem: str) -> list:
        return [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": mem}}}]
    pool = {"name": f"{node}-part", "generation": 1, "resourceSliceCount": 2}
    counters = {"metadata": {"name": f"{node}-counters"},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                         "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]}}
    devices = {"metadata": {"name": f"{node}-partitions"},
               "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                        "devices": [
                            {"name": "whole", "attributes": {"size": {"string": "whole"}},
                             "capacity": {"memory": {"value": "40Gi"}}, "consumesCounters": consumes("40Gi")},
                            {"name": "half-0", "attributes": {"size": {"string": "half"}},
                             "capacity": {"memory": {"value": "20Gi"}}, "consumesCounters": consumes("20Gi")},
                            {"name": "half-1", "attributes": {"size": {"string": "half"}},
                             "capacity": {"memory": {"value": "20Gi"}}, "consumesCounters": consumes("20Gi")},
                        ]}}
    return [counters, devices]


def device_class(name: str = "gpu.example.com", *selectors: str, config: list | None = None) -> dict:
    exprs = selectors or (f'device.driver == "{DRIVER}"',)
    spec: dict = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def request(name: str = "gpu", cls: str = "gpu.example.com", count: int = 1, mode: str = "ExactCount",
            selectors: tuple = (), **extra) -> dict:
    exactly = {"deviceClassName": cls, "allocationMode": mode, **extra}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim(name: str = "claim", *requests: dict, constraints: list | None = None, config: list | None = None,
          namespace: str = "default", uid: str | None = None) -> dict:
    devices: dict = {"requests": list(requests) or [request()]}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                         "resourceVersion": "1"},
            "spec": {"devices": devices}}
