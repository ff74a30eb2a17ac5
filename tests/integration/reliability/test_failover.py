"""Leader failover under load: three instances, the leader signalled mid-drain."""

import signal

from tests.reliability.failover import Durations, run_variant

DURATIONS = Durations(lease=6.0, renew=4.0, retry=1.0)
SLACK = 2.0  # seconds for a loaded 2-CPU machine; the bounds come from the configured durations
# The leader is signalled once a tenth of the pods is bound, leaving several seconds of work:
# with fewer left, a fast leader bound them all before the signal landed and no binding
# after the takeover could be measured.
PODS = 600
KILL_FRACTION = 0.1


def _assert_clean_drain(m):
    assert m["pods_lost"] == 0 and m["all_bound"], m
    assert m["double_binds"] == 0 and m["pods_with_repeated_scheduled_event"] == 0, m
    assert m["max_concurrent_leaders"] <= 1, m
    assert m["binds_by_old_leader_after_handover"] == 0, m
    assert m["survivors_alive"], m


def test_sigkill_of_the_leader_a_standby_takes_over_after_the_lease_expires(cluster, workdir):
    m = run_variant(cluster, workdir, signal.SIGKILL, pods=PODS, kill_fraction=KILL_FRACTION, durations=DURATIONS)
    assert m["takeover_s"] is not None, m
    # A standby must wait for the lease to run out, and takes it at most one jittered retry
    # after its last observed renewal plus one more retry.
    assert DURATIONS.lease - DURATIONS.jittered_retry <= m["takeover_s"] <= DURATIONS.kill_bound() + SLACK, m
    assert m["first_bind_after_takeover_s"] is not None, m
    _assert_clean_drain(m)


def test_sigterm_of_the_leader_releases_the_lease_and_a_standby_takes_over_at_once(cluster, workdir):
    m = run_variant(cluster, workdir, signal.SIGTERM, pods=PODS, kill_fraction=KILL_FRACTION, durations=DURATIONS)
    assert m["signalled_exit_code"] == 0, m
    assert m["release_s"] is not None, m
    assert m["takeover_s"] is not None and m["takeover_s"] <= DURATIONS.term_bound() + SLACK, m
    # Well before the lease could have expired: the release, not the expiry, handed it over.
    assert m["takeover_s"] < DURATIONS.lease, m
    _assert_clean_drain(m)
