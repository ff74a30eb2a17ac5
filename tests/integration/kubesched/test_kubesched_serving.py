"""HTTPS endpoints (/healthz, /livez, /readyz, /metrics with client-CA); explain has test_kubesched_explain.py."""

import ssl
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from kubesched_lab import node_of, pod_manifest, wait_for, write_unreachable_kubeconfig

from kubesched.client import load_client_certificate, load_kubeconfig


def test_health_and_metrics_endpoints(run_kubesched, nodes, core_v1, namespace):
    nodes(1)
    name = f"kubesched-it-{uuid.uuid4().hex[:6]}"
    sched = run_kubesched({"profiles": [{"schedulerName": name}]})
    for path in ("/healthz", "/livez", "/readyz"):
        assert sched.get(path) == (200, "ok")
    code, verbose = sched.get("/livez?verbose")
    assert code == 200 and "[+]leaderElection ok" in verbose
    core_v1.create_namespaced_pod(namespace, pod_manifest("m", schedulerName=name), _preload_content=False)
    wait_for(lambda: node_of(core_v1, namespace, "m"), 15, what="m bound")
    wait_for(lambda: sched.metric("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": name}),
             5, what="the scheduled attempt metric")
    _unused, text = sched.get("/metrics")
    for metric in ("scheduler_pending_pods{queue=\"active\"}", "scheduler_scheduling_attempt_duration_seconds_bucket",
                   "scheduler_pod_scheduling_sli_duration_seconds_bucket",
                   "scheduler_framework_extension_point_duration_seconds_bucket", "scheduler_queue_incoming_pods_total",
                   "scheduler_preemption_attempts_total"):
        assert metric in text, metric


def test_metrics_need_a_client_certificate_signed_by_the_client_ca(run_kubesched, lab_kubeconfig):
    """Anonymous is forbidden /metrics; the lab admin's certificate (system:masters) is allowed.

    test_kubesched_secure_port.py covers identities with and without an RBAC grant."""
    creds = load_kubeconfig(lab_kubeconfig)
    ca = str(Path(lab_kubeconfig).parent / "ca.crt")  # the lab the tests run on, shared or private
    sched = run_kubesched({}, "--client-ca-file", ca, "--authentication-skip-lookup")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"https://127.0.0.1:{sched.port}/metrics", context=context, timeout=5)
    assert refused.value.code == 403
    with urllib.request.urlopen(f"https://127.0.0.1:{sched.port}/healthz", context=context, timeout=5) as resp:
        assert resp.status == 200
    load_client_certificate(context, creds)
    with urllib.request.urlopen(f"https://127.0.0.1:{sched.port}/metrics", context=context, timeout=5) as resp:
        assert resp.status == 200 and b"scheduler_pending_pods" in resp.read()


def test_readyz_is_false_until_caches_sync(run_kubesched, tmp_path):
    """Through a kubeconfig whose server never answers, kubesched serves but is never ready."""
    unreachable = write_unreachable_kubeconfig(tmp_path / "kc")
    sched = run_kubesched({"clientConnection": {"kubeconfig": unreachable}}, wait_ready=False)

    def answered():
        try:
            return sched.get("/readyz")
        except (OSError, urllib.error.URLError):
            return None

    code, text = wait_for(answered, 15, what="/readyz to answer")
    assert code == 500 and "failed" in text
    assert sched.get("/livez")[0] == 200
