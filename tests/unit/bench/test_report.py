"""What the docs page shows: quiet records only, ratios and targets only between records of one
session and commit, and every figure rendered from the results file."""

from __future__ import annotations

import os
import re

from kubesched import gctuning
from lab.binaries import K8S_VERSION
from tests.bench import cli, load, report, schedulers, workloads
from tests.bench.objects import NodeGroup
from tests.bench.workloads import WORKLOADS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RESULTS = os.path.join(ROOT, "tests", "bench", "results", "latest.json")
PAGE = os.path.join(ROOT, "docs", "performance.md")
HEADLINE = report.HEADLINE


def _record(scheduler: str, busy: bool | None, pods_per_s: float, **fields) -> dict:
    record = {"workload": "SchedulingBasic/500Nodes", "mode": "backlog", "scheduler": scheduler, "nodes": 500,
              "pods": 1000, "bound": 1000, "complete": True, "qps_profile": "unthrottled", "qps": 5000,
              "burst": 5000, "pods_per_s": pods_per_s, "p50_ms": 1, "p99_ms": 2, "startup_s": 1.0,
              "makespan_s": 3.0, "cpu_s": 2.0, "peak_rss_mb": 100.0, "commit": "abc", "session": "S-1"}
    if busy is not None:
        record["busy"] = busy
        record["load"] = {"start": {"load1": 0.12}, "during": {"min_load1": 0.3, "max_load1": 2.1, "other_cpu_s": 0.4}}
    return {**record, **fields}


def _document(records: list[dict]) -> dict:
    return {"generated": "now", "host": {"cpus": 2, "memory_gib": 24}, "sessions": {}, "records": records}


def _rows(table: str) -> dict[str, str]:
    return {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}


def test_the_docs_table_shows_only_quiet_records_and_names_the_rest():
    judged_by_sampling_only = _record("raw-binder", False, 777.7)
    judged_by_sampling_only["load"] = {"start": {"load1": 0.1}, "during": {"max_load1": 0.2, "busy_processes": []}}
    table = report.markdown_table(_document([_record("kubesched", False, 111.1), _record("kube-scheduler", True, 999.9),
                                             judged_by_sampling_only]))
    assert "111.1" in table and "0.3–2.1 / 0.4 s" in table
    assert "999.9" not in table and "777.7" not in table
    assert "Left out: 1 record(s) measured while other processes used the machine" in table
    assert "(SchedulingBasic/500Nodes kube-scheduler unthrottled)" in table
    assert "Left out: 1 record(s) judged only by sampling processes" in table


def test_records_from_different_commits_or_sessions_are_not_compared():
    same = [_record("kubesched", False, 400.0), _record("kube-scheduler", False, 250.0)]
    assert "| SchedulingBasic/500Nodes | 5000/5000 | 1.60 |" in report.markdown_table(_document(same))
    for difference in ({"commit": "def"}, {"session": "S-2"}):
        pair = [same[0], {**same[1], **difference}]
        table = report.markdown_table(_document(pair))
        assert "| SchedulingBasic/500Nodes | 5000/5000 | † |" in table, table
        assert "1.60" not in table


def test_the_targets_are_judged_from_quiet_records_of_one_session():
    quiet = _record("kubesched", False, 0.0)
    records = [
        {**quiet, "workload": HEADLINE, "pods": 10000, "bound": 10000, "pods_per_s": 400.0, "cpu_s": 20.0,
         "main_cpu_s": 10.0},
        {**quiet, "workload": HEADLINE, "scheduler": "kube-scheduler", "pods_per_s": 250.0},
        {**quiet, "workload": HEADLINE, "scheduler": "raw-binder", "pods_per_s": 500.0, "commit": "other"},
        {**quiet, "workload": "SteadyArrival/500Nodes", "pods": 3000, "bound": 2980, "p99_ms": 60},
        {**quiet, "workload": "SteadyArrival/500Nodes", "scheduler": "raw-binder", "p99_ms": 50},
        {**quiet, "workload": "Preemption/500Nodes", "pods_per_s": 9.0},
        {**quiet, "workload": "Preemption/500Nodes", "scheduler": "kube-scheduler", "pods_per_s": 10.0, "busy": True},
    ]
    rows = _rows(report.markdown_table(_document(records)))
    assert rows["SteadyArrival/500Nodes: kubesched binds ≥ 99% of arrivals"].endswith("| 99.3% (2,980 of 3,000) | yes |")
    assert rows["SteadyArrival/500Nodes: kubesched p99 ≤ 1.5× the raw binder's"].endswith(
        "| 1.20× (60 ms against 50 ms) | yes |")
    assert rows[f"{HEADLINE}: kubesched CPU per pod ≤ 1.3 ms"].endswith(
        "| 2.00 ms (all processes); 1.00 ms in the scheduling process | no |")
    assert rows[f"{HEADLINE}: kubesched ≥ 1.0× kube-scheduler"].endswith("| 1.60× (400.0 against 250.0 pods/s) | yes |")
    # The raw binder's record is from another commit: the target is not judged.
    assert rows[f"{HEADLINE}: kubesched ≥ 70% of the raw binder"].endswith("| † not measured in one session | – |")
    # kube-scheduler's Preemption record is busy: no target is judged on it.
    assert not any(key.startswith("Preemption/500Nodes:") for key in rows)


def test_the_reading_of_the_records_is_generated_from_them():
    quiet = _record("kubesched", False, 0.0)
    records = [{**quiet, "workload": "TopologySpreading/1000Nodes", "pods_per_s": 300.0},
               {**quiet, "workload": "TopologySpreading/1000Nodes", "scheduler": "kube-scheduler", "pods_per_s": 200.0},
               {**quiet, "workload": "Preemption/500Nodes", "pods_per_s": 20.0, "startup_s": 18.6,
                "bind_rate_per_s": 400.0},
               {**quiet, "workload": "Preemption/500Nodes", "scheduler": "kube-scheduler", "pods_per_s": 25.0,
                "startup_s": 15.5, "bind_rate_per_s": 350.0}]
    table = report.markdown_table(_document(records))
    assert "- kubesched binds faster than kube-scheduler on 1 of the 2 workloads both were measured on in one " \
           "session; it trails on Preemption/500Nodes (0.80×)." in table
    assert "kubesched binds its first pod 18.6 s after it starts, kube-scheduler after 15.5 s" in table


def test_upstream_workloads_are_read_against_kube_scheduler_and_upstreams_threshold():
    upstream = next(w for w in WORKLOADS if w.name == "SchedulingWithMixedChurn/5000Nodes_10000Pods")
    quiet = _record("kubesched", False, 0.0, workload=upstream.name)
    records = [{**quiet, "scheduling_throughput": 355.0},
               {**quiet, "scheduler": "kube-scheduler", "scheduling_throughput": 284.0},
               {**quiet, "scheduler": "raw-binder", "scheduling_throughput": 710.0}]
    table = report.markdown_table(_document(records))
    assert f"| {upstream.name} | 710 | 355.0 | 284.0 | 710.0 | 1.25 | 0.50 | 0.40 |" in table.splitlines()
    # A run too short for upstream's figure has none; a pair from two sessions is not compared.
    records[1]["scheduling_throughput"] = None
    assert f"| {upstream.name} | 710 | 355.0 | – | 710.0 | – | 0.50 | – |" in \
        report.markdown_table(_document(records)).splitlines()
    records[1].update(scheduling_throughput=284.0, session="S-2")
    assert f"| {upstream.name} | 710 | 355.0 | 284.0 | 710.0 | † | 0.50 | 0.40 |" in \
        report.markdown_table(_document(records)).splitlines()


def test_merging_keeps_the_sessions_its_records_name_and_drops_retired_workloads(tmp_path):
    path = str(tmp_path / "latest.json")
    retired = _record("kubesched", False, 1.0, workload="SchedulingBasic/5000Nodes", session="S-0")
    report.merge_results(path, [retired, _record("kubesched", False, 2.0)], {"id": "S-1", "seconds": 60})
    document = report.merge_results(path, [_record("raw-binder", False, 3.0, session="S-2")], {"id": "S-2"})
    assert [(r["scheduler"], r["session"]) for r in document["records"]] == [("kubesched", "S-1"), ("raw-binder", "S-2")]
    assert sorted(document["sessions"]) == ["S-1", "S-2"]


def test_the_estimate_uses_the_last_durations_and_else_the_workloads_size():
    workload = next(w for w in WORKLOADS if w.name == "SchedulingBasic/500Nodes")
    runs = [(workload, "kubesched", "unthrottled"), (workload, "kube-scheduler", "unthrottled")]
    records = [_record("kubesched", False, 1.0, prepare_s=40.0, run_s=10.0),
               _record("kube-scheduler", False, 1.0, prepare_s=8.0)]
    # built once (the longest preparation), restored once (the shortest), each run its own duration
    assert report.estimate_seconds(runs, records) == 40.0 + 10.0 + 8.0 + 3.0 + 5
    fresh = report.estimate_seconds(runs, [])
    assert fresh == (500 / report.NODES_CREATED_PER_S + 1000 / report.PODS_CREATED_PER_S + report.RESTORE_S
                     + 2 * (10 + 1000 / report.PODS_BOUND_PER_S))


def _generated_blocks(text: str) -> list[str]:
    return re.findall(r"<!-- BEGIN GENERATED .*?<!-- END GENERATED \w+ -->", text, flags=re.S)


def test_the_committed_page_is_what_the_committed_results_render():
    with open(PAGE) as handle:
        page = handle.read()
    document = report.read_results(RESULTS)
    assert sorted(block.split(" ")[3] for block in _generated_blocks(page)) == sorted(report.BLOCKS)
    assert report.render_page(page, document) == page, (
        "docs/performance.md differs from what tests/bench/results/latest.json renders: a figure was edited by hand, "
        "or report.py changed; run 'python -m tests.bench --report'")


def _prose(page: str) -> str:
    """The hand-written text of the page: no generated block, code span or command example."""
    for block in _generated_blocks(page):
        page = page.replace(block, "")
    page = re.sub(r"`[^`]*`", "", page)
    page = re.sub(r"^ {4}.*$", "", page, flags=re.M)
    page = re.sub(r"^\d+\. ", "", page, flags=re.M)  # numbered lists
    for name in sorted((w.name for w in WORKLOADS), key=len, reverse=True):
        page = page.replace(name, "")
    return " ".join(page.split())


def _workload(name: str):
    return next(w for w in WORKLOADS if w.name == name)


# The figures the hand-written text may state: settings of the code and of upstream's
# templates, never a measurement. What the text says -> whether the code still says it.
SETTINGS_IN_PROSE = {
    "at most 0.5 per core": lambda: load.MAX_LOAD_PER_CORE == 0.5,
    "a tenth of a core": lambda: load.MAX_OTHER_CORES == 0.10,
    "a quarter of a core": lambda: load.MAX_OTHER_BURST_CORES == 0.25,
    "twice by default": lambda: cli.parse_args([]).busy_retries == 2,
    "every two seconds": lambda: True,  # the earlier check's interval, history
    "16 in flight": lambda: schedulers.BINDER_CONCURRENCY == 16,
    "qps 50, burst 100": lambda: schedulers.QPS_PROFILES["default"] == (50, 100),
    "is 5000/5000": lambda: schedulers.QPS_PROFILES["unthrottled"] == (5000, 5000),
    "at 100 per second for 30 seconds": lambda: (
        _workload("SteadyArrival/500Nodes").rate_per_s, _workload("SteadyArrival/500Nodes").pods) == (100, 3000),
    "100m cpu, 500Mi, port 80": lambda: workloads.pod_manifest("p", "s")["spec"]["containers"][0] == {
        "name": "pause", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}],
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m", "memory": "500Mi"}}},
    "4 cpu, 32Gi, 110 pods": lambda: (NodeGroup(1).cpu, NodeGroup(1).memory, NodeGroup(1).pods) == ("4", "32Gi", 110),
    "(with three zones)": lambda: NodeGroup(1).zones == 3,
    "a 20-node, 50-pod workload": lambda: (_workload("Smoke/20Nodes").node_count, _workload("Smoke/20Nodes").pods) == (20, 50),
    "v1.37.1": lambda: K8S_VERSION == "v1.37.1",
    "v1.37's defaults": lambda: K8S_VERSION.startswith("v1.37."),
    "after 50 s": lambda: True,  # kube-controller-manager's node-monitor-grace-period, upstream's default
    "1-minute load average": lambda: True,  # the name of /proc/loadavg's first figure
    "exit status 2": lambda: True,  # cli.main's refusal, pinned by tests/unit/bench/test_load.py
    "exits 1": lambda: True,  # cli.main when a run stays disturbed
    "after 20,000 allocations instead of 700": lambda: gctuning.GEN0_THRESHOLD == 20_000,
    "when a count is 0": lambda: True,  # logic, not a figure
}


def test_the_hand_written_text_states_no_measured_figure():
    with open(PAGE) as handle:
        prose = _prose(handle.read())
    for text, holds in SETTINGS_IN_PROSE.items():
        assert text in prose, f"{text!r} is no longer on the page: drop it from SETTINGS_IN_PROSE"
        assert holds(), f"the page says {text!r}, the code no longer does"
        prose = prose.replace(text, "")
    figures = re.findall(r"(?<![\w/.-])\d[\d,.]*(?:\s*(?:%|ms|s|MB|GiB|×|x|pods/s|minutes|cores?))?", prose)
    assert figures == [], (figures, "figures typed by hand in docs/performance.md: generate them from the results "
                           "(tests/bench/report.py), or, for a setting of the code, add them to SETTINGS_IN_PROSE")


def test_the_session_length_comes_from_the_last_full_session():
    every = [w.name for w in WORKLOADS if not w.smoke]
    sessions = {"2026-01-01T00:00:00Z-1": {"id": "2026-01-01T00:00:00Z-1", "seconds": 5400, "workloads": every,
                                           "schedulers": ["kubesched", "kube-scheduler", "raw-binder"]},
                "2026-01-02T00:00:00Z-2": {"id": "2026-01-02T00:00:00Z-2", "seconds": 60, "workloads": every[:1],
                                           "schedulers": ["kubesched", "kube-scheduler", "raw-binder"]}}
    document = {**_document([]), "sessions": sessions}
    assert "took 90 minutes in the last session that ran one (started 2026-01-01T00:00:00Z, 2 cores)" in \
        report.session_block(document)
    assert "No full `make bench` is in the results file yet" in report.session_block(_document([]))
