"""Watch a leader-elected scheduler while a rollout runs, and report what users would feel.

Polls the Lease every 0.1 s and creates a probe pod every --pod-interval seconds until the
--stop-file appears, deletes each pod once it is bound, then waits for every pod to be bound
and writes a JSON report:

- no_leader_windows: for each change of holder, the time between the old leader's last
  renewal (or its release) and the new leader's acquireTime, from the Lease's own times;
- holders: each holder in the order it held the Lease;
- pods: how many were created and bound, and the longest and median waits from creation to
  the first poll that saw them bound.

Usage: python watch_rollout.py --kubeconfig K --lease kube-system/kube-scheduler \
           --namespace rollout-probe --stop-file F --out report.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime

from kubernetes import client, config

from lab.namespaces import wait_for_default_service_account  # PYTHONPATH: the repository


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def lease_record(coordination, namespace: str, name: str) -> dict | None:
    try:
        lease = coordination.read_namespaced_lease(name, namespace, _preload_content=False)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    spec = json.loads(lease.data).get("spec") or {}
    return {"holder": spec.get("holderIdentity") or "",
            "acquire": parse_time(spec.get("acquireTime")),
            "renew": parse_time(spec.get("renewTime"))}


def probe_pod(name: str, scheduler_name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "rollout-probe"}},
            "spec": {"schedulerName": scheduler_name, "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}}


def leader_gaps(records: list[dict]) -> list[dict]:
    """One entry per change of holder: from the last renewal by the old holder to the new acquire."""
    gaps = []
    last_held = None  # the last record with a holder
    for rec in records:
        if last_held and rec["holder"] and rec["holder"] != last_held["holder"] and rec["acquire"]:
            # A released lease (empty holder) is renewed at release time; the gap starts there.
            released = [r for r in records if not r["holder"] and r["renew"] and r["renew"] >= last_held["renew"]]
            start = min([r["renew"] for r in released] + [last_held["renew"]]) if released else last_held["renew"]
            gaps.append({"from": last_held["holder"], "to": rec["holder"],
                         "seconds": round(max(0.0, rec["acquire"] - start), 3)})
        if rec["holder"]:
            last_held = rec
    return gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--lease", default="kube-system/kube-scheduler")
    parser.add_argument("--namespace", default="rollout-probe")
    parser.add_argument("--scheduler-name", default="default-scheduler")
    parser.add_argument("--pod-interval", type=float, default=0.5)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--bind-timeout", type=float, default=90.0)
    args = parser.parse_args(argv)

    config.load_kube_config(args.kubeconfig)
    core = client.CoreV1Api()
    coordination = client.CoordinationV1Api()
    lease_ns, lease_name = args.lease.split("/", 1)
    try:
        core.create_namespace({"metadata": {"name": args.namespace}})
    except client.ApiException as err:
        if err.status != 409:
            raise
    wait_for_default_service_account(core, args.namespace)

    records: list[dict] = []
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    next_pod = time.time()
    deadline = None
    while True:
        now = time.time()
        rec = lease_record(coordination, lease_ns, lease_name)
        if rec and (not records or rec != records[-1]):
            records.append(rec)
        if deadline is None and os.path.exists(args.stop_file):
            deadline = now + args.bind_timeout
        if deadline is None and now >= next_pod:
            name = f"probe-{len(created):04d}"
            core.create_namespaced_pod(args.namespace, probe_pod(name, args.scheduler_name), _preload_content=False)
            created[name] = time.time()
            next_pod += args.pod_interval
        pods = json.loads(core.list_namespaced_pod(args.namespace, _preload_content=False).data)["items"]
        seen = time.time()
        for pod in pods:
            name = pod["metadata"]["name"]
            if name in created and name not in bound and pod["spec"].get("nodeName"):
                bound[name] = seen
                # A bound probe has served its purpose; removing it keeps the fake nodes'
                # pod capacity free however long the rollout takes.
                core.delete_namespaced_pod(name, args.namespace, grace_period_seconds=0, _preload_content=False)
        if deadline is not None and (len(bound) == len(created) or now > deadline):
            break
        time.sleep(0.1)

    waits = sorted(bound[name] - created[name] for name in bound)
    gaps = leader_gaps(records)
    held = [rec["holder"] for rec in records if rec["holder"]]
    longest_wait = max(bound, key=lambda n: bound[n] - created[n]) if bound else None
    report = {
        "lease": args.lease,
        "leader_changes": len(gaps),
        "no_leader_windows": gaps,
        "longest_no_leader_s": max((g["seconds"] for g in gaps), default=0.0),
        "holders": [holder for i, holder in enumerate(held) if i == 0 or held[i - 1] != holder],
        "pods_created": len(created),
        "pods_bound": len(bound),
        "pods_unbound": sorted(set(created) - set(bound)),
        "longest_wait_s": round(waits[-1], 3) if waits else None,
        "longest_wait_pod": longest_wait,
        "median_wait_s": round(statistics.median(waits), 3) if waits else None,
    }
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(report, out, indent=2)
    print(json.dumps(report))
    return 0 if not report["pods_unbound"] else 1


if __name__ == "__main__":
    sys.exit(main())
