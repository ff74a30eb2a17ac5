"""soak.json, its plot and its section of docs/reliability.md, from a run's result."""

from tests.reliability.soak import results
from tests.reliability.soak.run import stale_nominations, verdicts


def run(scheduler, overcommitted=0, busy=False):
    series = [{"t": t, "pending": 3, "binds": 10 * t, "load1": 1.0,
               "instances": {"0": {"pid": 1, "rss_mb": 150.0, "threads": 30, "fds": 40, "processes": 3,
                                   "leader": True}}} for t in range(5, 400, 5)]
    return {"scheduler": scheduler, "plan_digest": "abc", "busy": busy,
            "settings": {"seed": 27, "minutes": 5, "rate": 10, "nodes": 40},
            "arrivals_planned": {"bare": 100}, "arrivals_made": {"bare": 100}, "binds": 99, "series": series,
            "faults": [{"kind": "leader_sigkill", "began": 60.0, "ended": 70.0, "ok": True},
                       {"kind": "ca_rotation", "began": 90.0, "ended": 95.0, "ok": True,
                        "serving": {"instances": {"0": 1.5}}, "client_ca": {"instances": {"0": 2.0}}}],
            "handovers": [{"gap_s": 7.0, "within": True}], "unplanned_exits": [],
            "bind_latency_s": {"bare": {"p50": 0.3, "p99": 2.0}}, "races": {"bound_to_missing_node": 0},
            "violation_counts": {"overcommitted": overcommitted} if overcommitted else {},
            "lost": {"offered": 0, "bound_by_fresh_instance": [], "still_pending": []}, "stale_nominations": [],
            "memory": [{"flat": True, "growth": {"rss_mb": 0.01, "threads": 0.0, "fds": 0.0}}],
            "cache": {"0": {"dumped": True, "differences": 0}}, "settle_s": 3.0}


def test_a_run_is_recorded_plotted_and_rendered_beside_the_other(tmp_path):
    path, plot = tmp_path / "soak.json", tmp_path / "soak.png"
    results.record(run("kube-scheduler", overcommitted=2), "c0ffee", path)
    data = results.record(run("kubesched", busy=True), "c0ffee", path)
    assert list(data["runs"]) == ["kube-scheduler", "kubesched"]
    results.plot(data, plot)
    assert plot.stat().st_size > 10_000
    text = "\n".join(results.section(path))
    assert "| | kubesched | kube-scheduler |" in text  # kubesched first, whatever the order of the runs
    assert "**Measured on a busy machine (kubesched)" in text
    row = next(line for line in text.splitlines() if line.startswith("| no pod placed where it did not fit"))
    assert row.count("held") == 1 and row.count("**broke**") == 1
    assert "leader_sigkill" in text and "served the new certificate / took the new CA: 0: 1.5 / 2.0" in text
    assert all(held for _name, held, _detail in verdicts(run("kubesched")))


def test_without_results_the_section_says_how_to_make_them(tmp_path):
    text = "\n".join(results.section(tmp_path / "missing.json"))
    assert "No soak has been committed yet: `make soak`" in text and "How the soak is made" in text


def test_a_hand_over_the_lease_watch_did_not_see_whole_is_the_harness_failing_not_the_scheduler():
    def judged(**handover):
        checks = {name: held for name, held, _detail in verdicts({**run("kubesched"), "handovers": [handover]})}
        return (checks["no leader gap longer than the Lease allows"],
                next(held for name, held in checks.items() if name.startswith("the harness saw every hand-over")))

    assert judged(gap_s=7.0, within=True) == (True, True)
    assert judged(gap_s=30.0, within=False) == (False, True)
    assert judged(gap_s=126.0, within=None) == (True, False)


def test_a_harness_that_stopped_sampling_is_reported():
    result = run("kubesched")
    result["series"] = [s for s in result["series"] if not 100 <= s["t"] <= 200]
    detail = next(d for name, held, d in verdicts(result) if name.startswith("the harness saw") and not held)
    assert "longest time between samples 110 s" in detail


def test_a_preemptor_waiting_for_its_victims_to_go_is_not_a_stale_nomination():
    def pod(name, priority=0, node="", nominated="", terminating=False):
        return {"metadata": {"name": name, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if terminating else {})},
                "spec": {"priority": priority, **({"nodeName": node} if node else {})},
                "status": {"nominatedNodeName": nominated} if nominated else {}}

    pods = [pod("victim", 0, node="n1", terminating=True), pod("waits", 100, nominated="n1"),
            pod("stale", 100, nominated="n2"), pod("same-priority", 0, nominated="n1"), pod("plain")]
    assert stale_nominations(pods) == ["stale", "same-priority"]


def test_a_device_held_for_a_pod_that_is_gone_breaks_every_pod_that_can_fit_is_bound():
    def judged(devices):
        return next((held, detail) for name, held, detail in verdicts({**run("kubesched"), "devices": devices})
                    if name.startswith("every pod that can fit is bound"))

    held, detail = judged({"devices": 8, "allocated": 8, "free": 0, "held_for_no_pod": []})
    assert held and "8 published, 8 allocated, 0 free, held for no pod: none" in detail
    held, detail = judged({"devices": 8, "allocated": 8, "free": 0, "held_for_no_pod": ["soak/dra-1-gpu-x"]})
    assert not held and "held for no pod: ['soak/dra-1-gpu-x']" in detail
