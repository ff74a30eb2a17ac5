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

    def __init__(self):
        self.lease = None
        self.rv = 0
        self.down = False

    def _check(self):
        if self.down:
            raise ApiError(503, "ServiceUnavailable", "apiserver down")

    def get_lease(self, ns, name):
        self._check()
        return copy.deepcopy(self.lease)

    def create_lease(self, ns, lease):
        self._check()
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def update_lease(self, ns, name, lease):
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
    api.get_lease = lambda ns, name: None  # both saw no lease
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # its create gets 409
    api.get_lease = real_get
    assert api.lease["spec"]["holderIdentity"] == "a_1"
