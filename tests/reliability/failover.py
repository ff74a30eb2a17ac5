"""Suite 1: leader failover under load.

Three kubesched instances with leader election share one Lease and one schedulerName. A
backlog of pods is created before any of them starts, so the leader drains it at full
speed; when a fraction is bound the leader is signalled:

- SIGKILL: nothing is released, a standby must wait for the lease to expire. Target:
  a new holder within leaseDuration + retryPeriod.
- SIGTERM: the leader stops scheduling, then releases the lease (ReleaseOnCancel). Target:
  a new holder within about one retryPeriod.

Every pod must end up bound exactly once: PodWatch counts nodeName changes per pod, the
Scheduled events are counted per pod, and each instance's log is read for refused binds
(the API server's refusal is what stops a would-be double bind).
"""

from __future__ import annotations

import datetime
import signal
import threading
import time
import uuid
from dataclasses import dataclass

from lab.cluster import Cluster
from lab.pod_watch import PodWatch, node_of
from tests.reliability.instances import KubeschedInstance, scheduler_config, start_instance, wait_until
from tests.reliability.pods import RELIABILITY_LABELS, create_pods
from tests.reliability.result import SuiteResult


@dataclass
class Durations:
    lease: float = 6.0
    renew: float = 4.0
    retry: float = 1.0

    @property
    def jittered_retry(self) -> float:
        return self.retry * 1.2  # client-go's JitterFactor

    def kill_target(self) -> float:
        return self.lease + self.retry

    def kill_bound(self) -> float:
        """The worst case client-go allows: the standby saw the last renewal up to one jittered
        retry after the kill, the lease then runs out, and its next try is one jittered retry
        later. Tests assert this (plus scheduling slack), never the target."""
        return self.lease + 2 * self.jittered_retry

    def term_target(self) -> float:
        return self.retry

    def term_bound(self) -> float:
        return 2 * self.jittered_retry


class LeaseMonitor:
    """Watches the Lease's holder and polls every instance's leader gauge; records when each
    holder first appeared and the most instances that ever claimed leadership at once.

    A watch, not polling: a standby can take a released Lease within milliseconds, and a
    poll would then miss the empty holder that marks the release."""

    def __init__(self, cluster: Cluster, lease: str, instances: list[KubeschedInstance], interval: float = 0.05):
        self.cluster = cluster
        self.lease = lease
        self.instances = instances
        self.interval = interval
        self.history: list[tuple[float, str]] = []  # (monotonic time, holder) at each change
        self.wall: dict[float, float] = {}  # monotonic time of a change -> time.time() then
        self.max_concurrent_leaders = 0
        # The Lease's own times, as its holders wrote them (one clock: every instance runs on
        # this host): each holder's last renewTime, and the acquireTime it took the Lease with.
        self.last_renew: dict[str, datetime.datetime] = {}
        self.acquired: dict[str, datetime.datetime] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lease-monitor", daemon=True)
        self.gauge_thread = threading.Thread(target=self._gauges, name="leader-gauges", daemon=True)

    def start(self) -> "LeaseMonitor":
        self.thread.start()
        self.gauge_thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.gauge_thread.join(5)

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        last: str | None = None
        resource_version: str | None = None
        while not self.stop.is_set():
            stream = watch.Watch()
            try:
                # Short watches resumed from the last resourceVersion: no change is lost
                # between them, and close() is noticed within a few seconds.
                for event in stream.stream(self.cluster.coordination.list_namespaced_lease, "kube-system",
                                           field_selector=f"metadata.name={self.lease}",
                                           resource_version=resource_version, timeout_seconds=2):
                    lease = event["object"]
                    resource_version = lease.metadata.resource_version
                    holder = (lease.spec.holder_identity or "") if lease.spec else ""
                    if event["type"] != "DELETED" and holder and lease.spec.renew_time:
                        self.last_renew[holder] = lease.spec.renew_time
                        if lease.spec.acquire_time and holder not in self.acquired:
                            self.acquired[holder] = lease.spec.acquire_time
                    if event["type"] != "DELETED" and holder != last:
                        now = time.monotonic()
                        self.history.append((now, holder))
                        self.wall[now] = time.time()
                        last = holder
                    if self.stop.is_set():
                        stream.stop()
                        break
            except ApiException as err:
                if err.status == 410:  # too old: list again from now
                    resource_version = None
                self.stop.wait(self.interval)
            except Exception:  # noqa: BLE001 - an API outage is not a holder change; watch again
                self.stop.wait(self.interval)

    def _gauges(self) -> None:
        while not self.stop.is_set():
            leaders = sum(1 for inst in self.instances if inst.alive() and inst.is_leader())
            self.max_concurrent_leaders = max(self.max_concurrent_leaders, leaders)
            self.stop.wait(0.2)

    def holder(self) -> str:
        return self.history[-1][1] if self.history else ""

    def gap(self, old: str, new: str) -> float | None:
        """Seconds from the old holder's last renewal to the new holder's acquisition, from the
        Lease's own timestamps: what a standby must wait (leaseDuration at least), unaffected by
        how late a loaded machine delivered the watch events."""
        if old not in self.last_renew or new not in self.acquired:
            return None
        return round((self.acquired[new] - self.last_renew[old]).total_seconds(), 3)

    def first_change_after(self, moment: float, exclude: str, *, released: bool = False) -> float | None:
        """When a holder other than ``exclude`` appeared after moment (empty holder when released)."""
        for at, holder in self.history:
            if at > moment and holder != exclude and (holder == "") == released:
                return at
        return None


def _leader(instances: list[KubeschedInstance]) -> KubeschedInstance | None:
    leaders = [inst for inst in instances if inst.alive() and inst.is_leader()]
    return leaders[0] if len(leaders) == 1 else None


def run_variant(cluster: Cluster, workdir: str, sig: int, *, pods: int = 2000, kill_fraction: float = 0.3,
                durations: Durations | None = None, drain_timeout: float = 600.0, qps: float = 200.0) -> dict:
    """One failover run; returns its measurements (times in seconds, counts). qps (the burst
    too) bounds how fast the leader binds, so that work is left when the signal lands."""
    durations = durations or Durations()
    label = signal.Signals(sig).name.lower()
    scheduler_name = f"rel-failover-{label}-{uuid.uuid4().hex[:6]}"
    namespace = cluster.create_namespace(f"failover-{label}", RELIABILITY_LABELS)
    create_pods(cluster, namespace, pods, scheduler_name)
    watch = PodWatch(cluster.core, namespace).start()
    wait_until(lambda: len(watch.node) >= pods, 60)
    config = scheduler_config(cluster.kubeconfig, scheduler_name, lease_name=scheduler_name,
                              lease_duration=durations.lease, renew_deadline=durations.renew,
                              retry_period=durations.retry, qps=qps, burst=max(1, int(qps)))
    instances = [start_instance(config, workdir, f"{label}-{i}") for i in range(3)]
    monitor = LeaseMonitor(cluster, scheduler_name, instances).start()
    out: dict = {"signal": signal.Signals(sig).name, "pods": pods, "namespace": namespace,
                 "lease_duration_s": durations.lease, "renew_deadline_s": durations.renew,
                 "retry_period_s": durations.retry}
    try:
        for inst in instances:
            inst.wait_ready()
        leader = wait_until(lambda: _leader(instances), 30)
        if leader is None:
            raise RuntimeError("no single leader among the three instances within 30 s")
        old_holder = wait_until(monitor.holder, 10) or ""
        if not watch.wait_bound(int(pods * kill_fraction), drain_timeout):
            raise RuntimeError(f"the leader bound only {watch.bound()}/{pods} pods in {drain_timeout:.0f} s")
        bound_before = watch.bound()
        started = watch.first_bound_after(0.0)  # the leader binds from the moment it leads
        out["bound_when_signalled"] = bound_before
        out["rate_before_pods_per_s"] = round(bound_before / max(1e-3, time.monotonic() - started), 1)
        signalled = time.monotonic()
        signalled_wall = time.time()
        leader.send(sig)
        out["signalled_instance"] = leader.name
        new_holder_at = wait_until(lambda: monitor.first_change_after(signalled, old_holder),
                                   durations.lease * 4 + 10, interval=0.02)
        if sig == signal.SIGTERM:
            released_at = monitor.first_change_after(signalled, old_holder, released=True)
            out["release_s"] = round(released_at - signalled, 3) if released_at else None
            out["signalled_exit_code"] = leader.wait_exit(30)
        new_holder = next((holder for at, holder in monitor.history if at == new_holder_at), "")
        # The takeover is the new holder's acquireTime, as it wrote it; when the watch delivered
        # it is later by however long a loaded machine took (that time only when it is missing).
        acquired = monitor.acquired.get(new_holder) if new_holder_at else None
        if acquired is not None:
            out["takeover_s"] = round(acquired.timestamp() - signalled_wall, 3)
        else:
            out["takeover_s"] = round(new_holder_at - signalled, 3) if new_holder_at else None
        out["lease_gap_s"] = monitor.gap(old_holder, new_holder) if new_holder_at else None
        if new_holder_at is not None:
            # The old leader must not bind once the lease is someone else's: its log says when it did.
            leader.wait_exit(30)
            handover = acquired.timestamp() if acquired else monitor.wall[new_holder_at]
            out["binds_by_old_leader_after_handover"] = len(leader.bound_after(handover))
        all_bound = watch.wait_bound(pods, drain_timeout)
        # From the survivors' own logs: only a leader binds, and a pod watch and a Lease watch on a
        # loaded machine deliver late and in either order (the whole drain was seen before the
        # holder change once).
        survivor_binds = [t for t in (inst.first_bind() for inst in instances if inst is not leader) if t is not None]
        out["first_bind_after_takeover_s"] = round(min(survivor_binds) - signalled_wall, 3) if survivor_binds else None
        out["drain_s"] = round(time.monotonic() - started, 1)
        time.sleep(1.0)  # let the last events and any stray bind attempt land
        final = cluster.pods(namespace)
        unbound = [p["metadata"]["name"] for p in final if not node_of(p)]
        out["pods_lost"] = len(unbound) + (pods - len(final))
        out["all_bound"] = all_bound and not unbound
        events = cluster.scheduled_events(namespace)
        out["pods_with_repeated_scheduled_event"] = sum(1 for n in events.values() if n > 1)
        out["double_binds"] = watch.double_binds()
        out["bind_conflicts"] = sum(len(inst.bind_failures()) for inst in instances)
        out["max_concurrent_leaders"] = monitor.max_concurrent_leaders
        out["survivors_alive"] = all(inst.alive() for inst in instances if inst is not leader)
        out["lease_holders_seen"] = len({h for _at, h in monitor.history if h})
        return out
    finally:
        monitor.close()
        watch.close()
        for inst in instances:
            inst.stop()
        cluster.delete_namespace(namespace)


def run(cluster: Cluster, workdir: str, *, pods: int = 2000, durations: Durations | None = None) -> SuiteResult:
    durations = durations or Durations()
    result = SuiteResult("failover", "Leader failover under load")
    for sig in (signal.SIGKILL, signal.SIGTERM):
        name = signal.Signals(sig).name
        try:
            m = run_variant(cluster, workdir, sig, pods=pods, durations=durations)
        except Exception as err:  # noqa: BLE001 - recorded as a failed check, the next variant still runs
            result.check(f"{name}: run completes", False, str(err)[:1000])
            continue
        result.cases.append(m)
        key = name.lower()
        result.figures[f"takeover_s_{key}"] = m["takeover_s"]
        result.figures[f"first_bind_after_{key}_s"] = m["first_bind_after_takeover_s"]
        result.figures[f"pods_lost_{key}"] = m["pods_lost"]
        result.figures[f"double_binds_{key}"] = m["double_binds"]
        result.figures[f"bind_conflicts_{key}"] = m["bind_conflicts"]
        target = durations.kill_target() if sig == signal.SIGKILL else durations.term_target()
        bound = durations.kill_bound() if sig == signal.SIGKILL else durations.term_bound()
        takeover = m["takeover_s"]
        result.check(f"{name}: a standby took the lease", takeover is not None,
                     f"lease holders seen: {m['lease_holders_seen']}")
        if takeover is not None:
            what = "leaseDuration + retryPeriod" if sig == signal.SIGKILL else "about one retryPeriod"
            # The target is reported (docs/reliability.md explains a miss); the check is the
            # bound client-go's rules allow, plus a second for a loaded 2-CPU machine.
            result.figures[f"takeover_target_s_{key}"] = target
            result.figures[f"takeover_target_met_{key}"] = takeover <= target
            result.check(f"{name}: takeover within client-go's bound ({bound:.1f} s + 1 s)", takeover <= bound + 1.0,
                         f"measured {takeover:.2f} s; target {what} = {target:g} s "
                         f"({'met' if takeover <= target else 'missed, see the explanation'})")
        if sig == signal.SIGKILL:
            gap = m["lease_gap_s"]
            result.figures["lease_gap_s_sigkill"] = gap
            result.check("SIGKILL: the standby waited the lease out (the old leader's last renewTime to its "
                         f"acquireTime, at least leaseDuration {durations.lease:g} s)",
                         gap is not None and gap >= durations.lease, f"measured {gap} s")
        if sig == signal.SIGTERM:
            result.check("SIGTERM: the leader released the lease and exited 0",
                         m.get("release_s") is not None and m.get("signalled_exit_code") == 0,
                         f"release after {m.get('release_s')} s, exit code {m.get('signalled_exit_code')}")
        result.check(f"{name}: every pod bound, none lost", m["pods_lost"] == 0 and m["all_bound"],
                     f"{m['pods_lost']} of {m['pods']} unbound")
        result.check(f"{name}: no pod bound twice", m["double_binds"] == 0 and
                     m["pods_with_repeated_scheduled_event"] == 0,
                     f"nodeName changes after the first: {m['double_binds']}; pods with more than one Scheduled "
                     f"event: {m['pods_with_repeated_scheduled_event']}; binds refused by the API server: "
                     f"{m['bind_conflicts']}")
        late = m.get("binds_by_old_leader_after_handover")
        result.check(f"{name}: never two leaders at once", m["max_concurrent_leaders"] <= 1 and not late,
                     f"most instances reporting leader_election_master_status=1 together: "
                     f"{m['max_concurrent_leaders']}; binds by the old leader after the new holder appeared: {late}")
        result.check(f"{name}: the standbys kept running", m["survivors_alive"])
    lost = [result.figures.get(k) for k in ("pods_lost_sigkill", "pods_lost_sigterm")]
    doubles = [result.figures.get(k) for k in ("double_binds_sigkill", "double_binds_sigterm")]
    result.figures["pods_lost"] = sum(v for v in lost if v is not None) if any(v is not None for v in lost) else None
    result.figures["double_binds"] = (sum(v for v in doubles if v is not None)
                                      if any(v is not None for v in doubles) else None)
    result.figures["durations"] = {"leaseDuration_s": durations.lease, "renewDeadline_s": durations.renew,
                                   "retryPeriod_s": durations.retry}
    return result.finish()
