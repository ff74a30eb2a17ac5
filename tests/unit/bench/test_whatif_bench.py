"""The what-if at scale in `make bench`: which selections run it, a real (small) run's record,
and that its record is kept, tabled apart and judged against issue 24's bounds."""

from __future__ import annotations

from tests.bench import cli, report
from tests.bench.micro import whatif as whatif_bench
from tests.bench.workloads import WHATIF_MODE, WHATIF_WORKLOAD


def _record(wall_s: float, peak_rss_mb: float) -> dict:
    return {"workload": WHATIF_WORKLOAD, "mode": WHATIF_MODE, "scheduler": "kubesched", "qps_profile": WHATIF_MODE,
            "nodes": 5000, "pods": 10020, "running": 10000, "pending": 20, "replaced": 10000, "moved": 9986,
            "wall_s": wall_s, "cpu_s": wall_s - 1, "peak_rss_mb": peak_rss_mb, "complete": True, "commit": "abc",
            "session": "S-1", "busy": False,
            "load": {"start": {"load1": 0.1}, "during": {"min_load1": 0.2, "max_load1": 1.0, "other_cpu_s": 0.1}}}


def test_the_whatif_runs_with_every_workload_or_when_named_and_never_in_the_other_modes():
    every = cli.parse_args([])
    assert every.whatif and every.workloads
    alone = cli.parse_args(["--workload", "WhatIf"])
    assert alone.whatif and alone.workloads == []
    assert cli.parse_args(["--workload", WHATIF_WORKLOAD]).whatif
    beside = cli.parse_args(["--workload", "WhatIf,SchedulingBasic/500Nodes"])
    assert beside.whatif and [w.name for w in beside.workloads] == ["SchedulingBasic/500Nodes"]
    assert not cli.parse_args(["--workload", "SchedulingBasic/500Nodes"]).whatif
    for argv in (["--quick"], ["--loop-only"], ["--profile"], ["--scheduler", "kube-scheduler"]):
        assert not cli.parse_args(argv).whatif, argv


def test_a_small_whatif_run_records_every_pod_re_placed():
    record = whatif_bench.run(nodes=30, running=60, pending=3)
    assert record["workload"] == "WhatIf/30Nodes_60Pods" and record["mode"] == WHATIF_MODE
    assert (record["replaced"], record["pending"], record["complete"]) == (60, 3, True)
    # LeastAllocated spreads the 60 pods, MostAllocated packs them: most land elsewhere.
    assert 30 <= record["moved"] <= 60
    assert record["wall_s"] > 0 and record["cpu_s"] > 0 and record["peak_rss_mb"] > 0


def test_whatif_records_are_kept_tabled_apart_and_judged(tmp_path):
    results = str(tmp_path / "latest.json")
    document = report.merge_results(results, [_record(24.5, 800.0)])
    assert [r["workload"] for r in document["records"]] == [WHATIF_WORKLOAD]
    table = report.markdown_table(document)
    assert f"| {WHATIF_WORKLOAD} | S1 | 5,000 | 10,000 | 20 | 9,986 | 24.5 | 23.5 | 800 |" in table
    assert f"| {WHATIF_WORKLOAD}: a what-if within 30 s on one core | 24.5 s wall, 23.5 s CPU | yes |" in table
    assert f"| {WHATIF_WORKLOAD}: a what-if within 1,024 MB | 800 MB peak RSS | yes |" in table
    slow = report.markdown_table(report.merge_results(results, [_record(41.0, 1500.0)]))
    assert f"| {WHATIF_WORKLOAD}: a what-if within 30 s on one core | 41.0 s wall, 40.0 s CPU | no |" in slow
    assert "a what-if within 1,024 MB | 1,500 MB peak RSS | no |" in slow
    assert "| WhatIf/5000Nodes_10000Pods | None/None" not in slow  # not in the API-server table
