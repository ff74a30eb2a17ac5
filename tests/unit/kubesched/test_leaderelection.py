"""Leader election on a Lease with a fake API and a fake clock."""

import copy
import threading

from kubesched.client import ApiError
from kubesched.config.types import LeaderElection
from kubesched.leaderelection import LeaderElector


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class LeaseApi:
    """An in-memory lease endpoint with resourceVersion conflicts, like the API server."""

    timeout = 5.0  # the client's own request timeout (renewDeadline / 2)

    def __init__(self):
        self.lease = None
        self.rv = 0
        self.down = False
        self.calls = []  # (verb, timeout) of every request

    def _check(self):
        if self.down:
            raise ApiError(503, "ServiceUnavailable", "apiserver down")

    def get_lease(self, ns, name, timeout=None):
        self.calls.append(("get", timeout))
        self._check()
        return copy.deepcopy(self.lease)

    def create_lease(self, ns, lease, timeout=None):
        self.calls.append(("create", timeout))
        self._check()
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def update_lease(self, ns, name, lease, timeout=None):
        self.calls.append(("update", timeout))
        self._check()
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


CFG = LeaderElection(lease_duration=15, renew_deadline=10, retry_period=2, resource_name="kube-scheduler",
                     resource_namespace="kube-system")


def elector(api, identity, clock):
    return LeaderElector(api, CFG, identity, on_started_leading=lambda: None, on_stopped_leading=lambda: None,
                         clock=clock, wall=lambda: 1_700_000_000.0 + clock.now)


def test_first_candidate_creates_the_lease_and_the_second_waits():
    api, clock = LeaseApi(), Clock()
    a, b = elector(api, "a_1", clock), elector(api, "b_2", clock)
    assert a.try_acquire_or_renew()
    assert api.lease["spec"]["holderIdentity"] == "a_1"
    assert api.lease["spec"]["leaseDurationSeconds"] == 15
    assert not b.try_acquire_or_renew()
    clock.now = 14
    assert not b.try_acquire_or_renew()  # b first saw the lease at 0; still valid at 14


def test_standby_takes_over_an_expired_lease_and_counts_the_transition():
    api, clock = LeaseApi(), Clock()
    a, b = elector(api, "a_1", clock), elector(api, "b_2", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    clock.now = 15.5  # a stopped renewing; b's view is older than leaseDuration
    assert b.try_acquire_or_renew()
    assert api.lease["spec"]["holderIdentity"] == "b_2"
    assert api.lease["spec"]["leaseTransitions"] == 1


def test_renewal_keeps_acquire_time_and_refreshes_renew_time():
    api, clock = LeaseApi(), Clock()
    a = elector(api, "a_1", clock)
    a.try_acquire_or_renew()
    acquired = api.lease["spec"]["acquireTime"]
    clock.now = 2
    assert a.try_acquire_or_renew()
    assert api.lease["spec"]["acquireTime"] == acquired
    assert api.lease["spec"]["renewTime"] != acquired


def test_release_lets_the_standby_in_at_once():
    api, clock = LeaseApi(), Clock()
    a, b = elector(api, "a_1", clock), elector(api, "b_2", clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert api.lease["spec"].get("holderIdentity") is None
    assert api.lease["spec"]["leaseDurationSeconds"] == 1
    assert b.try_acquire_or_renew()  # no waiting for the old lease to expire


def test_leader_that_cannot_renew_stops_before_its_lease_expires():
    api, clock = LeaseApi(), Clock()

    def sleep(event, seconds):
        clock.now += seconds
        return event.is_set()

    lost = threading.Event()
    a = LeaderElector(api, CFG, "a_1", on_started_leading=lambda: None, on_stopped_leading=lost.set,
                      clock=clock, wall=lambda: 1_700_000_000.0 + clock.now, sleep=sleep)
    assert a.acquire()
    a.last_renew = clock.now
    api.down = True
    assert a.renew_loop() is False  # lost
    assert clock.now - 0 <= CFG.renew_deadline + 0.001 < CFG.lease_duration


def test_a_leader_that_finds_another_holding_the_lease_stops_at_once():
    # A leader stopped (SIGSTOP, a debugger, a starved VM) past the Lease's duration comes back
    # to find another instance leading. client-go keeps trying for the rest of the round (up to
    # renewDeadline) and the scheduler binds beside the new leader meanwhile (the soak saw nodes
    # overcommitted so); nothing but an expiry can give the Lease back, so it stops with the
    # first answer that shows another holder.
    api, clock = LeaseApi(), Clock()
    slept = []

    def sleep(event, seconds):
        slept.append(seconds)
        clock.now += seconds
        return event.is_set()

    a = LeaderElector(api, CFG, "a_1", on_started_leading=lambda: None, on_stopped_leading=lambda: None,
                      clock=clock, wall=lambda: 1_700_000_000.0 + clock.now, sleep=sleep)
    b = elector(api, "b_2", clock)
    assert a.acquire()
    assert not b.try_acquire_or_renew()
    clock.now = 30.0  # a is stopped; b sees the Lease expire and takes it
    assert b.try_acquire_or_renew()
    api.calls.clear()
    assert a.renew_loop() is False
    assert clock.now == 30.0 and not slept, "no retrying while another instance leads"
    assert [verb for verb, _timeout in api.calls] == ["get"]  # its own view expired: it reads, and sees b
    assert api.lease["spec"]["holderIdentity"] == "b_2"


def test_livez_watchdog_fails_only_for_a_stale_leader():
    api, clock = LeaseApi(), Clock()
    a = elector(api, "a_1", clock)
    assert a.check_health() is None
    a.leading = True
    a.last_renew = 0
    clock.now = 30
    assert a.check_health() is None
    clock.now = 36  # leaseDuration 15 + 20s tolerance exceeded
    assert "failed election to renew leadership" in a.check_health()


def test_released_leader_does_not_come_back_while_the_new_leader_holds():
    api, clock = LeaseApi(), Clock()
    a, b = elector(api, "a_1", clock), elector(api, "b_2", clock)
    a.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()
    assert api.lease["spec"]["holderIdentity"] == "b_2"


def test_create_race_is_lost_without_error():
    api, clock = LeaseApi(), Clock()
    a, b = elector(api, "a_1", clock), elector(api, "b_2", clock)
    real_get = api.get_lease
    api.get_lease = lambda ns, name, timeout=None: None  # both saw no lease
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # its create gets 409
    api.get_lease = real_get
    assert api.lease["spec"]["holderIdentity"] == "a_1"


def test_the_leader_renews_with_one_write_and_falls_back_to_a_read_on_conflict():
    api, clock = LeaseApi(), Clock()
    a = elector(api, "a_1", clock)
    assert a.try_acquire_or_renew()
    api.calls.clear()
    clock.now = 2
    assert a.try_acquire_or_renew()
    assert [call[0] for call in api.calls] == ["update"]  # client-go's fast path
    # Someone else wrote the Lease (its resourceVersion moved): the optimistic write conflicts,
    # the slow path reads the Lease and, still naming a_1, renews it.
    api.lease["metadata"]["resourceVersion"] = "99"
    api.rv = 99
    api.calls.clear()
    clock.now = 4
    assert a.try_acquire_or_renew()
    assert [call[0] for call in api.calls] == ["update", "get", "update"]
    assert api.lease["spec"]["holderIdentity"] == "a_1"
    # A standby never takes the fast path.
    b = elector(api, "b_2", clock)
    api.calls.clear()
    assert not b.try_acquire_or_renew()
    assert [call[0] for call in api.calls] == ["get"]


def test_a_renewal_round_has_renew_deadline_from_its_start_and_bounds_each_request():
    """As client-go: after a renewal the leader waits retryPeriod, then tries for renewDeadline;
    it gives up retryPeriod + renewDeadline after its last renewal (12 s of the 15 s Lease),
    and no request may outlast the round."""
    api, clock = LeaseApi(), Clock()

    def sleep(event, seconds):
        clock.now += seconds
        return event.is_set()

    renewals = []

    def update(ns, name, lease, timeout=None, real=api.update_lease):
        renewals.append((clock.now, timeout))
        if clock.now >= 3:
            api.down = True
        return real(ns, name, lease, timeout=timeout)

    a = LeaderElector(api, CFG, "a_1", on_started_leading=lambda: None, on_stopped_leading=lambda: None,
                      clock=clock, wall=lambda: 1_700_000_000.0 + clock.now, sleep=sleep)
    assert a.acquire()
    api.update_lease = update
    assert a.renew_loop() is False
    # Renewed at 0 and 2; the write at 4 finds the API down, and the round that began at 4 ends at 14.
    assert [when for when, _timeout in renewals][:3] == [0, 2, 4]
    assert a.last_renew == 2
    assert clock.now == CFG.retry_period + CFG.renew_deadline + a.last_renew < a.last_renew + CFG.lease_duration
    assert all(timeout is not None and timeout <= api.timeout for _when, timeout in renewals)
    assert renewals[-1][1] <= CFG.renew_deadline - (renewals[-1][0] - 4)
