"""The demo's GPU workload (S11), run with PYTHONPATH at the repository root:

    python lab/demo_gpu.py up      the fake DRA driver publishes 2 GPUs on each of demo-node-1 and
                                   demo-node-2 (none on demo-node-0, tainted for blue
                                   workloads, which these pods do not tolerate), a DeviceClass, a
                                   ResourceClaimTemplate for one GPU, and a Deployment of 3 pods
                                   that each get a claim from it (namespace demo-gpu), afresh
    python lab/demo_gpu.py wait    until every pod is bound with its claim allocated
    python lab/demo_gpu.py table   each pod, its node and the device its claim got (from the claim's
                                   status.allocation); exit 1 when a pod is not on a node with free
                                   GPUs or two pods share a device
    python lab/demo_gpu.py down    delete the namespace, the ResourceSlices and the DeviceClass

The kubeconfig defaults to $LAB_DIR/admin.kubeconfig, as lab/demo.py's. The resourceclaim
controller of the lab's kube-controller-manager makes each pod's claim from the template;
the scheduler (kubesched or kube-scheduler, as site.yml deployed it) allocates a device.
"""

from __future__ import annotations

import argparse
import sys
import time

from lab.demo import default_kubeconfig, recreate_namespace, remove_namespace
from lab.fake_dra_driver import DRIVER, GROUP, VERSION, apply, delete_all, device_class, gpu_slice
from lab.fake_nodes import core_v1_from_kubeconfig

NAMESPACE = "demo-gpu"
GPU_NODES = ("demo-node-1", "demo-node-2")
GPUS_PER_NODE = 2
REPLICAS = 3
CLASS = "demo-gpu.example.com"
TEMPLATE = "one-gpu"
DEPLOYMENT = "gpu-inference"
DEMO_DRIVER = f"demo.{DRIVER}"  # a driver name of its own: --delete of the tests' driver leaves it alone


def template() -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate", "metadata": {"name": TEMPLATE},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}}


def deployment() -> dict:
    labels = {"app": DEPLOYMENT}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "model", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"claims": [{"name": "gpu"}]}}],
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]}}}}


def clients(kubeconfig: str):
    from kubernetes import client

    core_v1 = core_v1_from_kubeconfig(kubeconfig)
    return core_v1, client.CustomObjectsApi(core_v1.api_client), client.AppsV1Api(core_v1.api_client)


def cmd_up(core_v1, custom, apps_v1) -> int:
    missing = [n for n in GPU_NODES if n not in {node.metadata.name for node in core_v1.list_node().items}]
    if missing:
        print(f"demo-gpu: nodes {', '.join(missing)} do not exist; run 'python lab/demo.py nodes' first",
              file=sys.stderr)
        return 1
    for node in GPU_NODES:
        apply(custom, gpu_slice(node, GPUS_PER_NODE, driver=DEMO_DRIVER, models=("H100",)))
    apply(custom, device_class(CLASS, DEMO_DRIVER))
    recreate_namespace(core_v1, NAMESPACE)
    custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "resourceclaimtemplates", template())
    apps_v1.create_namespaced_deployment(NAMESPACE, deployment())
    print(f"demo-gpu: {GPUS_PER_NODE} GPUs on each of {', '.join(GPU_NODES)}; Deployment {NAMESPACE}/{DEPLOYMENT} "
          f"with {REPLICAS} replicas, one GPU each from ResourceClaimTemplate {TEMPLATE}")
    return 0


def placements(core_v1, custom) -> list[dict]:
    """Per pod of the Deployment: node, phase, claim and its allocated device."""
    claims = {c["metadata"]["name"]: c for c in custom.list_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "resourceclaims")["items"]}
    rows = []
    for pod in sorted(core_v1.list_namespaced_pod(NAMESPACE, label_selector=f"app={DEPLOYMENT}").items,
                      key=lambda p: p.metadata.name):
        if pod.metadata.deletion_timestamp:
            continue
        claim_name = next((s.resource_claim_name for s in (pod.status.resource_claim_statuses or ())
                           if s.name == "gpu"), None)
        allocation = ((claims.get(claim_name) or {}).get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or ()
        rows.append({"pod": pod.metadata.name, "node": pod.spec.node_name or "", "phase": pod.status.phase or "",
                     "claim": claim_name or "", "device": ", ".join(f"{r['pool']}/{r['device']}" for r in results)})
    return rows


def problems(rows: list[dict]) -> list[str]:
    out = []
    if len(rows) != REPLICAS:
        out.append(f"{len(rows)} pods, the Deployment wants {REPLICAS}")
    devices = [r["device"] for r in rows if r["device"]]
    if len(set(devices)) != len(devices):
        out.append("two pods got the same device")
    for r in rows:
        if not r["node"] or not r["device"]:
            out.append(f"{r['pod']} is not bound with an allocated claim yet")
        elif r["node"] not in GPU_NODES or not r["device"].startswith(f"{r['node']}/"):
            out.append(f"{r['pod']} is on {r['node']}, its device {r['device']} is not on that node")
    return out


def cmd_wait(core_v1, custom, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not problems(placements(core_v1, custom)):
            return 0
        time.sleep(1)
    print(f"demo-gpu: not every GPU pod is placed after {timeout:.0f} s; see the table", file=sys.stderr)
    return 1


def cmd_table(core_v1, custom) -> int:
    rows = placements(core_v1, custom)
    header = {"pod": "POD", "node": "NODE", "phase": "PHASE", "claim": "CLAIM", "device": "DEVICE (pool/device)"}
    widths = {k: max(len(header[k]), *(len(r[k]) for r in rows)) if rows else len(header[k]) for k in header}
    for row in [header] + rows:
        print("  ".join(row[k].ljust(widths[k]) for k in header).rstrip())
    found = problems(rows)
    for text in found:
        print(f"! {text}")
    if not found:
        print(f"demo-gpu: {len(rows)} pods on nodes with GPUs, each with a device of its own "
              f"({', '.join(GPU_NODES)} publish {GPUS_PER_NODE} GPUs each)")
    return 1 if found else 0


def cmd_down(core_v1, custom) -> int:
    from kubernetes.client.rest import ApiException

    remove_namespace(core_v1, NAMESPACE)
    removed = delete_all(custom, DEMO_DRIVER)
    try:
        custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", CLASS)
    except ApiException as err:
        if err.status != 404:
            raise
    print(f"demo-gpu: namespace {NAMESPACE} deleted, {removed} ResourceSlices and DeviceClass {CLASS} removed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=default_kubeconfig())
    parser.add_argument("command", choices=("up", "wait", "table", "down"))
    parser.add_argument("--timeout", type=float, default=90, help="for wait: seconds (default 90)")
    args = parser.parse_args(argv)
    core_v1, custom, apps_v1 = clients(args.kubeconfig)
    if args.command == "up":
        return cmd_up(core_v1, custom, apps_v1)
    if args.command == "wait":
        return cmd_wait(core_v1, custom, args.timeout)
    if args.command == "table":
        return cmd_table(core_v1, custom)
    return cmd_down(core_v1, custom)


if __name__ == "__main__":
    sys.exit(main())
