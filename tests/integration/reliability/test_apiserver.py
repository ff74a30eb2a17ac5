"""The API server restarts (with real 410s) or every connection is reset, mid-drain."""

from tests.reliability.apiserver import run_reset, run_restart


def _assert_carried_on(m):
    assert m["same_process"], m
    assert m["all_bound"] and m["pods_lost"] == 0, m
    assert m["double_binds"] == 0 and m["repeated_scheduled_events"] == 0, m
    assert m["cache_assumed_pods_after"] == 0, m


def test_apiserver_restart_with_compacted_etcd_is_survived_and_every_pod_bound(private_lab, cluster, workdir):
    m = run_restart(private_lab, cluster, workdir, pods=200)
    _assert_carried_on(m)
    assert m["bound_at_outage"] < m["pods"], "the outage must come while pods are still pending"
    assert m["watch_expired_relists"] > 0, "resumed watches must have met 410 Gone and relisted"


def test_connection_resets_are_survived_and_every_pod_bound(private_lab, cluster, workdir):
    m = run_reset(private_lab, cluster, workdir, pods=200)
    _assert_carried_on(m)
    assert m["connections_reset"] > 0 and m["watch_retries"] > 0, m
