"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

- A candidate tries to acquire every retryPeriod (with jitter); a lease held by someone else
  is respected until leaseDuration has passed since we last saw it change.
- The leader renews every retryPeriod; if it cannot renew within renewDeadline it stops
  leading -- kube-scheduler then exits non-zero -- which is before its lease (leaseDuration,
  longer than renewDeadline) can expire, so two leaders never act at once.
- On a clean stop the leader releases the lease (empty holder, leaseDuration 1s:
  ReleaseOnCancel), so a standby takes over within about one retryPeriod.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Callable

from kubesched import klog, metrics
from kubesched.client import ApiError
from kubesched.config.types import LeaderElection

JITTER_FACTOR = 1.2


def new_identity(hostname: str) -> str:
    """hostname_<uuid>, as kube-scheduler names its candidates."""
    return f"{hostname}_{uuid.uuid4()}"


def _micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client, config: LeaderElection, identity: str, *,
                 on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None],
                 before_release: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 sleep: Callable[[threading.Event, float], bool] | None = None):
        self.client = client
        self.cfg = config
        self.identity = identity
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        # Called on a clean stop before the lease is given up: the caller stops acting as
        # leader first, so nothing is scheduled once another candidate may lead.
        self.before_release = before_release or (lambda: None)
        self.clock = clock
        self.wall = wall
        self._sleep = sleep or (lambda ev, seconds: ev.wait(seconds))
        self.observed_record: dict | None = None
        self.observed_raw: dict | None = None
        self.observed_time = 0.0
        self.last_renew = 0.0
        self.leading = False
        self.stop = threading.Event()

    # -- one attempt (tryAcquireOrRenew) ---------------------------------------------------

    def try_acquire_or_renew(self, timeout: float | None = None) -> bool:
        """One attempt; timeout bounds each request (None: the client's own, renewDeadline/2)."""
        ns, name = self.cfg.resource_namespace, self.cfg.resource_name
        now_wall = self.wall()
        record = {"holderIdentity": self.identity,
                  "leaseDurationSeconds": max(1, int(round(self.cfg.lease_duration))),
                  "acquireTime": _micro(now_wall), "renewTime": _micro(now_wall),
                  "leaseTransitions": 0}
        if self._holds() and self._lease_valid():
            # client-go's fast path: the leader writes over the Lease it last saw, one request
            # instead of a read and a write; a conflict or failure falls back to both.
            updated = dict(self.observed_raw)
            updated["spec"] = {**record, "acquireTime": self.observed_record.get("acquireTime") or record["acquireTime"],
                               "leaseTransitions": self.observed_record.get("leaseTransitions") or 0}
            try:
                self._observe(self.client.update_lease(ns, name, updated, timeout=timeout))
                return True
            except Exception as err:  # noqa: BLE001 - the slow path decides
                if klog.V(2):
                    klog.info("Failed to update lease optimistically, falling back to slow path",
                              lock=f"{ns}/{name}", err=str(err))
        current = self.client.get_lease(ns, name, timeout=timeout)
        if current is None:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": name, "namespace": ns}, "spec": record}
            try:
                created = self.client.create_lease(ns, lease, timeout=timeout)
            except ApiError as err:
                if err.status == 409:
                    return False
                raise
            self._observe(created)
            return True
        spec = current.get("spec") or {}
        if self.observed_record is None or spec != self.observed_record:
            self._observe(current)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and self._lease_valid():
            return False
        if holder == self.identity:
            record["acquireTime"] = spec.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = spec.get("leaseTransitions") or 0
        else:
            record["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
        updated = dict(current)
        updated["spec"] = record
        try:
            result = self.client.update_lease(ns, name, updated, timeout=timeout)
        except ApiError as err:
            if err.status == 409:
                return False
            raise
        self._observe(result)
        return True

    def _holds(self) -> bool:
        """IsLeader as client-go has it: the Lease last seen names us."""
        return self.observed_raw is not None and (self.observed_record or {}).get("holderIdentity") == self.identity

    def _observe(self, lease: dict) -> None:
        self.observed_raw = lease
        self.observed_record = lease.get("spec") or {}
        self.observed_time = self.clock()

    def _lease_valid(self) -> bool:
        duration = (self.observed_record or {}).get("leaseDurationSeconds") or self.cfg.lease_duration
        return self.observed_time + duration > self.clock()

    def is_leader(self) -> bool:
        return self.leading

    # -- the loops -----------------------------------------------------------------------

    def acquire(self) -> bool:
        """Block until we lead (True) or stop is set (False)."""
        klog.info("attempting to acquire leader lease", lease=f"{self.cfg.resource_namespace}/{self.cfg.resource_name}",
                  identity=self.identity)
        while not self.stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    self.last_renew = self.clock()
                    klog.info("successfully acquired lease",
                              lease=f"{self.cfg.resource_namespace}/{self.cfg.resource_name}", identity=self.identity)
                    return True
            except Exception as err:  # noqa: BLE001 - keep trying, as client-go does
                klog.error("error retrieving resource lock", err=str(err))
            wait = self.cfg.retry_period * (1 + random.random() * (JITTER_FACTOR - 1))
            if self._sleep(self.stop, wait):
                break
        return False

    def renew_loop(self) -> bool:
        """Renew until stop (True: clean stop) or a round of renewDeadline passes without
        success (False). As client-go's renew: a round starts retryPeriod after the last
        success and has renewDeadline from its start, each request bounded by what is left;
        the leader so gives up at most retryPeriod + renewDeadline after its last renewal,
        before leaseDuration has passed for the others."""
        while not self.stop.is_set():
            deadline = self.clock() + self.cfg.renew_deadline
            renewed = False
            while not self.stop.is_set() and self.clock() < deadline:
                remaining = deadline - self.clock()
                try:
                    if self.try_acquire_or_renew(timeout=min(remaining, self.client.timeout)):
                        renewed = True
                        break
                except Exception as err:  # noqa: BLE001
                    klog.error("error renewing lease", err=str(err))
                holder = (self.observed_record or {}).get("holderIdentity") or ""
                if holder and holder != self.identity:
                    # Another instance holds it: this process was stopped or starved past the
                    # Lease's duration. client-go retries until the round's deadline, scheduling
                    # beside the new leader meanwhile; nothing can give the Lease back, so stop now.
                    klog.error("lost the lease to another instance",
                               lease=f"{self.cfg.resource_namespace}/{self.cfg.resource_name}", holder=holder)
                    return False
                if self._sleep(self.stop, min(self.cfg.retry_period, max(0.0, deadline - self.clock()))):
                    return True
            if self.stop.is_set():
                return True
            if not renewed:
                klog.error("failed to renew lease", lease=f"{self.cfg.resource_namespace}/{self.cfg.resource_name}",
                           err="timed out waiting for the condition")
                return False
            self.last_renew = self.clock()
            if self._sleep(self.stop, self.cfg.retry_period):
                return True
        return True

    def run(self) -> bool:
        """Acquire, lead, renew. Returns True on a clean stop, False when leadership was lost."""
        metrics.leader_election_master_status.labels(self.cfg.resource_name).set(0)
        if not self.acquire():
            return True
        self.leading = True
        metrics.leader_election_master_status.labels(self.cfg.resource_name).set(1)
        threading.Thread(target=self.on_started_leading, name="leading", daemon=True).start()
        clean = self.renew_loop()
        self.leading = False
        metrics.leader_election_master_status.labels(self.cfg.resource_name).set(0)
        if clean:
            self.before_release()
            self.release()
        self.on_stopped_leading()
        return clean

    def release(self) -> bool:
        """Give the lease up so a standby need not wait for it to expire (ReleaseOnCancel)."""
        if self.observed_raw is None or (self.observed_record or {}).get("holderIdentity") != self.identity:
            return False
        now = _micro(self.wall())
        released = dict(self.observed_raw)
        released["spec"] = {"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                            "leaseTransitions": (self.observed_record or {}).get("leaseTransitions") or 0}
        try:
            self._observe(self.client.update_lease(self.cfg.resource_namespace, self.cfg.resource_name, released))
            klog.info("released leader lease", lease=f"{self.cfg.resource_namespace}/{self.cfg.resource_name}")
            return True
        except Exception as err:  # noqa: BLE001
            klog.error("Failed to release lock", err=str(err))
            return False

    def check_health(self, max_tolerable_expired_lease: float = 20.0) -> str | None:
        """The /livez watchdog: None when healthy, else why (leader that stopped renewing)."""
        if not self.leading:
            return None
        overdue = self.clock() - self.last_renew
        if overdue > self.cfg.lease_duration + max_tolerable_expired_lease:
            return f"failed election to renew leadership on lease {self.cfg.resource_name}"
        return None
