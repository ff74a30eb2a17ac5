"""--loop-only: kubesched's scheduling loop against a replayed watch and a null API client."""

from __future__ import annotations

from tests.bench import report
from tests.bench.loop import LOOP_ONLY, run_loop, unsupported_reason
from tests.bench.workloads import WORKLOADS


def _workload(name: str):
    return next(w for w in WORKLOADS if w.name == name)


def test_the_loop_binds_every_pod_of_a_replayed_workload():
    smoke = _workload("Smoke/20Nodes")
    record = run_loop(smoke, "bench-scheduler", "ns", timeout_s=60)
    assert (record["bound"], record["complete"], record["nodes"], record["pods"]) == (50, True, 20, 50)
    assert record["mode"] == record["qps_profile"] == LOOP_ONLY
    assert record["cpu_ms_per_pod"] > 0 and abs(record["cpu_ms_per_pod"] * 50 / 1000 - record["cpu_s"]) <= 0.006
    assert record["pods_per_s"] > 0 and record["peak_rss_mb"] > 10
    assert record["feature_gates"] == {"OpportunisticBatching": True, "GenericWorkload": False,
                                       "SchedulerAsyncPreemption": True}


def test_the_loop_replays_taints_and_init_pods():
    tainted = _workload("TaintsTolerations/1000Nodes")
    record = run_loop(tainted, "bench-scheduler", "ns", timeout_s=120)
    assert record["complete"], record


def test_workloads_the_replay_cannot_feed_are_named():
    assert unsupported_reason(_workload("SchedulingBasic/5000Nodes_10000Pods")) is None
    assert "steady" in unsupported_reason(_workload("SteadyArrival/500Nodes"))
    assert "preemption" in unsupported_reason(_workload("Preemption/500Nodes"))
    assert "informers" in unsupported_reason(_workload("SchedulingCSIPVs/1000Nodes"))
    assert "informers" in unsupported_reason(_workload("SchedulingWithResourceClaimTemplate/500Nodes"))
    assert "churn" in unsupported_reason(_workload("SchedulingWithMixedChurn/5000Nodes_10000Pods"))
    assert unsupported_reason(_workload("SchedulingDaemonset/15000Nodes")) is None


def test_loop_records_get_their_own_table():
    record = {"workload": "SchedulingBasic/5000Nodes_10000Pods", "mode": LOOP_ONLY, "scheduler": "kubesched", "nodes": 5000,
              "pods": 10000, "bound": 10000, "complete": True, "qps_profile": LOOP_ONLY, "qps": None, "burst": None,
              "pods_per_s": 812.5, "cpu_s": 12.3, "cpu_ms_per_pod": 1.23, "peak_rss_mb": 300.0, "commit": "abc",
              "busy": False, "load": {"start": {"load1": 0.1},
                                      "during": {"min_load1": 0.2, "max_load1": 1.0, "other_cpu_s": 0.1}}}
    table = report.markdown_table({"generated": "now", "host": {"cpus": 2, "memory_gib": 24}, "records": [record]})
    assert "The scheduling loop alone" in table
    assert "| SchedulingBasic/5000Nodes_10000Pods | kubesched | 5,000 | 10,000 | 10,000 | 812.5 | 1.230 | 12.3 | 300 |" in table
    assert "| SchedulingBasic/5000Nodes_10000Pods | None/None" not in table  # not in the API-server table
