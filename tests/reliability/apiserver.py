"""Suite 2: the API server goes away mid-drain; kubesched carries on and binds every pod.

- restart: the private lab's kube-apiserver is killed, etcd is compacted past every revision
  kubesched has seen, and the API server is started again. Every open connection is dropped, and every watch that
  resumes from its old resourceVersion is answered 410 Gone by the rebuilt watch cache: a
  real expiry, not a simulated one. kubesched must relist and go on, in the same process.
- reset: kubesched reaches the API server through a TCP relay that resets (RST) every
  connection, watches and in-flight binds included, three times during the drain.

Leader election is off here: an outage longer than renewDeadline makes a leader stop, by
design (the failover suite covers that path); this suite is about the cache and binds.
"""

from __future__ import annotations

import signal
import time
import uuid

from lab.cluster import Cluster
from lab.pod_watch import PodWatch, node_of
from lab.private_lab import PrivateLab
from tests.reliability.instances import scheduler_config, start_instance, wait_until
from tests.reliability.pods import RELIABILITY_LABELS, create_pods
from tests.reliability.proxy import ResettingProxy
from tests.reliability.result import SuiteResult

WATCH_EXPIRED = '"Watch expired, relisting"'
WATCH_FAILED = '"Watch failed, retrying"'


def _drain(cluster: Cluster, workdir: str, label: str, pods: int, disrupt, kubeconfig: str | None = None,
           drain_timeout: float = 600.0) -> dict:
    """Create a backlog, start one kubesched, call disrupt(out, watch) at 30% bound, wait for the rest."""
    scheduler_name = f"rel-{label}-{uuid.uuid4().hex[:6]}"
    namespace = cluster.create_namespace(label, RELIABILITY_LABELS)
    create_pods(cluster, namespace, pods, scheduler_name)
    watch = PodWatch(cluster.core, namespace).start()
    instance = start_instance(scheduler_config(kubeconfig or cluster.kubeconfig, scheduler_name), workdir, label)
    out: dict = {"pods": pods, "namespace": namespace}
    try:
        instance.wait_ready()
        pid = instance.pid
        if not watch.wait_bound(int(pods * 0.3), drain_timeout):
            raise RuntimeError(f"only {watch.bound()}/{pods} pods bound before the disruption")
        out["bound_before_disruption"] = watch.bound()
        disrupt(out, watch)
        resumed_from = time.monotonic()
        all_bound = watch.wait_bound(pods, drain_timeout)
        first = watch.first_bound_after(resumed_from)
        out["first_bind_after_recovery_s"] = round(first - resumed_from, 3) if first else None
        time.sleep(1.0)
        final = cluster.pods(namespace)
        out["pods_lost"] = sum(1 for p in final if not node_of(p)) + (pods - len(final))
        out["all_bound"] = all_bound and out["pods_lost"] == 0
        out["double_binds"] = watch.double_binds()
        out["repeated_scheduled_events"] = sum(1 for n in cluster.scheduled_events(namespace).values() if n > 1)
        out["same_process"] = instance.alive() and instance.pid == pid
        log = instance.log()
        out["watch_expired_relists"] = log.count(WATCH_EXPIRED)
        out["watch_retries"] = log.count(WATCH_FAILED)
        out["bind_failures_retried"] = len(instance.bind_failures())
        # The pod informer may still be backing off (up to 30 s, as client-go's reflector) when the
        # binds already succeed; the cache must converge once it is back.
        settle_from = time.monotonic()
        wait_until(lambda: instance.metric("scheduler_cache_size", {"type": "assumed_pods"}) == 0, 90, 0.5)
        out["cache_settled_s"] = round(time.monotonic() - settle_from, 1)
        out["cache_assumed_pods_after"] = instance.metric("scheduler_cache_size", {"type": "assumed_pods"})
        return out
    finally:
        watch.close()
        instance.stop()
        cluster.delete_namespace(namespace)


def run_restart(lab: PrivateLab, cluster: Cluster, workdir: str, pods: int) -> dict:
    def restart(out: dict, watch: PodWatch) -> None:
        stopped = time.monotonic()
        # SIGKILL: a graceful stop keeps serving for seconds, long enough to finish a small
        # backlog before the outage even begins.
        lab.stop_apiserver(signal.SIGKILL)
        out["bound_at_outage"] = watch.bound()
        # Compacted while the API server is down, past every revision kubesched has seen.
        out["compacted_revision"] = lab.compact_etcd()
        time.sleep(2.0)  # kubesched meets refused connections for a while
        lab.start_apiserver()
        out["apiserver_outage_s"] = round(time.monotonic() - stopped, 2)

    return _drain(cluster, workdir, "apiserver-restart", pods, restart)


def run_reset(lab: PrivateLab, cluster: Cluster, workdir: str, pods: int) -> dict:
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    proxy = ResettingProxy(host, int(port))
    try:
        def reset(out: dict, watch: PodWatch) -> None:
            out["connections_reset"] = 0
            out["bound_at_first_reset"] = watch.bound()
            for _round in range(3):
                out["connections_reset"] += proxy.reset_all()
                time.sleep(1.0)

        return _drain(cluster, workdir, "connection-reset", pods, reset,
                      kubeconfig=proxy.kubeconfig(lab.kubeconfig, workdir))
    finally:
        proxy.close()


def run(lab: PrivateLab, cluster: Cluster, workdir: str, *, pods: int = 1000) -> SuiteResult:
    result = SuiteResult("apiserver", "API server restart and connection resets mid-drain")
    for name, runner in (("restart", run_restart), ("reset", run_reset)):
        try:
            m = runner(lab, cluster, workdir, pods)
        except Exception as err:  # noqa: BLE001
            result.check(f"{name}: run completes", False, str(err)[:1000])
            continue
        m["variant"] = name
        result.cases.append(m)
        result.figures[f"pods_lost_{name}"] = m["pods_lost"]
        result.figures[f"double_binds_{name}"] = m["double_binds"]
        result.check(f"{name}: kubesched kept running in the same process", m["same_process"])
        result.check(f"{name}: every pod bound, none lost", m["all_bound"], f"{m['pods_lost']} of {pods} unbound")
        result.check(f"{name}: no pod bound twice", m["double_binds"] == 0 and m["repeated_scheduled_events"] == 0,
                     f"nodeName changes after the first: {m['double_binds']}; failed binds retried: "
                     f"{m['bind_failures_retried']}")
        result.check(f"{name}: no assumed pod left in the cache", m["cache_assumed_pods_after"] == 0,
                     f"scheduler_cache_size{{type=assumed_pods}} = {m['cache_assumed_pods_after']}")
        if name == "restart":
            result.figures["apiserver_outage_s"] = m["apiserver_outage_s"]
            result.figures["watch_410_relists"] = m["watch_expired_relists"]
            result.check("restart: a watch got 410 Gone and was relisted", m["watch_expired_relists"] > 0,
                         f"'Watch expired, relisting' lines: {m['watch_expired_relists']}")
        else:
            result.figures["connections_reset"] = m["connections_reset"]
            result.check("reset: connections were reset and the watches retried",
                         m["connections_reset"] > 0 and m["watch_retries"] > 0,
                         f"connections reset: {m['connections_reset']}; watch retries logged: {m['watch_retries']}")
    return result.finish()
