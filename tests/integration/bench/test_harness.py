"""The benchmark harness end to end on a tiny workload against the lab: it must bind every
pod and write sane records, the table and the plot. Speed is not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from lab.cluster import Cluster
from tests.bench.measure import percentile
from tests.bench.objects import BENCH_LABEL
from tests.bench.report import TABLE_BEGIN, TABLE_END, merge_results
from tests.bench.workloads import select

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEDULERS = ("raw-binder", "kube-scheduler", "kubesched")


@pytest.fixture(scope="module")
def smoke_run(lab_kubeconfig, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    paths = {"results": out / "latest.json", "docs": out / "performance.md", "plot": out / "throughput.png"}
    command = [sys.executable, "-m", "tests.bench", "--workload", "Smoke", "--kubeconfig", lab_kubeconfig,
               "--scheduler", ",".join(SCHEDULERS), "--workdir", str(out / "work"), "--run-timeout", "120",
               # make test shares the machine with its other stages: measure anyway, marked busy.
               "--allow-busy"]
    for option, path in paths.items():
        command += [f"--{option}", str(path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"bench failed:\n{result.stdout}\n{result.stderr}"
    with open(paths["results"]) as handle:
        return json.load(handle), paths, result.stderr


def test_every_scheduler_and_qps_profile_gets_one_complete_record(smoke_run):
    document, _unused, _unused = smoke_run
    runs = sorted((r["scheduler"], r["qps_profile"]) for r in document["records"])
    assert runs == sorted((s, p) for s in SCHEDULERS for p in ("default", "unthrottled"))
    for record in document["records"]:
        assert record["workload"] == "Smoke/20Nodes"
        assert (record["nodes"], record["pods"], record["bound"]) == (20, 50, 50), record
        assert record["complete"] is True and "failure" not in record


def test_record_figures_are_sane(smoke_run):
    document, _unused, _unused = smoke_run
    for record in document["records"]:
        assert (record["qps"], record["burst"]) == ((50, 100) if record["qps_profile"] == "default" else (5000, 5000))
        assert record["pods_per_s"] > 0
        assert 0 <= record["startup_s"] <= record["p50_ms"] / 1000 + 0.01
        # makespan_s is rounded to 10 ms, the latencies to 1 ms.
        assert record["p50_ms"] <= record["p99_ms"] <= record["makespan_s"] * 1000 + 10
        assert record["cpu_s"] > 0, f"{record['scheduler']} used no CPU: was its process measured?"
        assert 1 < record["peak_rss_mb"] < 4096
        assert len(record["commit"]) >= 7
        datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ")
        assert record["busy"] is True, "--allow-busy marks every record busy"
        assert record["load"]["start"]["load1"] >= 0 and record["load"]["during"]["max_load1"] > 0
    assert document["host"]["cpus"] >= 1


def test_table_and_plot_are_written(smoke_run):
    document, paths, _unused = smoke_run
    text = paths["docs"].read_text()
    assert TABLE_BEGIN in text and TABLE_END in text
    # Busy records stay out of the table, each named in the note below it.
    assert f"Left out: {len(document['records'])} record(s)" in text
    for record in document["records"]:
        assert f"| {record['workload']} | {record['qps']}/{record['burst']} | {record['scheduler']} |" not in text
        assert f"{record['workload']} {record['scheduler']} {record['qps_profile']}" in text
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_is_shown(smoke_run):
    _unused, _unused, stderr = smoke_run
    assert "[1/6] Smoke/20Nodes" in stderr and "50/50 bound" in stderr


def test_cluster_is_left_clean(smoke_run, lab_kubeconfig):
    cluster = Cluster(lab_kubeconfig)
    assert cluster.list_names("/api/v1/nodes", {"labelSelector": f"{BENCH_LABEL}=true"}) == []
    assert cluster.list_names("/api/v1/pods", {"labelSelector": f"{BENCH_LABEL}=true"}) == []


def test_a_dra_workload_runs_twice_on_one_api_server_and_leaves_nothing(lab_kubeconfig, tmp_path):
    """The objects a DRA workload's pods need (a DeviceClass, ResourceSlices, a template) and
    the claims made from them are labelled and removed, before a run and after: a second
    run on the same API server must not meet the first one's (it failed with 409 Conflict)."""
    from tests.bench.cli import NAMESPACE

    for attempt in (1, 2):
        out = tmp_path / f"run-{attempt}"
        command = [sys.executable, "-m", "tests.bench", "--workload", "DRASmoke", "--kubeconfig", lab_kubeconfig,
                   "--scheduler", "kubesched", "--workdir", str(out / "work"), "--run-timeout", "120", "--allow-busy",
                   "--results", str(out / "latest.json"), "--docs", str(out / "performance.md"),
                   "--plot", str(out / "throughput.png")]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
        assert result.returncode == 0, f"run {attempt} failed:\n{result.stdout}\n{result.stderr}"
        (record,) = json.loads((out / "latest.json").read_text())["records"]
        assert (record["workload"], record["bound"], record["complete"]) == ("DRASmoke/10Nodes", 40, True), record
    cluster = Cluster(lab_kubeconfig)
    selector = {"labelSelector": f"{BENCH_LABEL}=true"}
    for path in ("/apis/resource.k8s.io/v1/deviceclasses", "/apis/resource.k8s.io/v1/resourceslices",
                 "/apis/resource.k8s.io/v1/resourceclaimtemplates", "/api/v1/nodes"):
        assert cluster.list_names(path, selector) == [], path
    assert NAMESPACE not in cluster.list_names("/api/v1/namespaces")


def test_a_gang_workload_runs_both_schedulers_with_its_gates_on_the_benchs_own_gated_lab(tmp_path):
    """GangSmoke: PodGroups on an API server the bench starts with GenericWorkload and
    scheduling.k8s.io/v1beta1, both schedulers with the gate; every gang bound whole."""
    command = [sys.executable, "-m", "tests.bench", "--workload", "GangSmoke", "--scheduler", "kubesched",
               "--scheduler", "kube-scheduler", "--workdir", str(tmp_path / "work"), "--run-timeout", "120",
               "--allow-busy", "--results", str(tmp_path / "latest.json"), "--docs", str(tmp_path / "performance.md"),
               "--plot", str(tmp_path / "throughput.png")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    records = json.loads((tmp_path / "latest.json").read_text())["records"]
    assert sorted((r["scheduler"], r["workload"], r["bound"], r["complete"]) for r in records) == [
        ("kube-scheduler", "GangSmoke/10Nodes_3Gangs", 9, True), ("kubesched", "GangSmoke/10Nodes_3Gangs", 9, True)]


def test_a_partial_run_replaces_only_its_own_records(tmp_path):
    path = str(tmp_path / "latest.json")
    old = {"workload": "Smoke/20Nodes", "scheduler": "raw-binder", "qps_profile": "default", "pods_per_s": 1}
    kept = dict(old, scheduler="kube-scheduler")
    merge_results(path, [old, kept])
    document = merge_results(path, [dict(old, pods_per_s=2)])
    assert sorted((r["scheduler"], r["pods_per_s"]) for r in document["records"]) == [
        ("kube-scheduler", 1), ("raw-binder", 2)]


def test_workload_selection():
    assert [w.name for w in select(["SchedulingBasic"], quick=False)] == [
        "SchedulingBasic/500Nodes", "SchedulingBasic/5000Nodes_10000Pods", "SchedulingBasic/15000Nodes",
        "SchedulingBasic/5000Nodes_50000Pods"]
    assert [w.name for w in select(None, quick=True)] == ["SchedulingBasic/500Nodes"]
    assert "Smoke/20Nodes" not in [w.name for w in select(None, quick=False)]
    with pytest.raises(ValueError, match="unknown workload 'Nope'"):
        select(["Nope"], quick=False)


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50.0, 99.0, 100.0)
    assert percentile([3.0], 0.99) == 3.0
