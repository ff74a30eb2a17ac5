"""One soak run of one scheduler: its own lab, the plan's arrivals and faults, the checks.

    lab up (private, free ports) -> nodes and workload objects -> certificates, extender,
    relay -> three instances -> watches and sampling -> arrivals and faults for the planned
    minutes -> arrivals stop, the last faults end -> settle -> the final checks -> down

The final checks, on a quiet cluster:
- settle: every pod that can fit is bound. The run waits until no pod but the never-fitting
  ones is pending, for up to SETTLE_MAX_S (past upstream's podMaxInUnschedulablePodsDuration
  of 5 minutes, after which every scheduler retries a pod that waits for no event); when some
  are left, until kwok has caught up (a Job pod it has not finished keeps its room) and then
  AFTER_KWOK_S more;
- the cache: each running instance dumps its cache and queue (SIGUSR2), twice, and the dumps
  are set beside the API's nodes and pods; what changed in the CACHE_WINDOW_S before the dumps,
  or during them, is left out, and so is a pod missing from only one of the two (it was in a
  scheduling attempt; cache_check.py);
- lost pods: what is still pending when the long-running instances stop (they go on scheduling
  while the cache is checked) is offered to a fresh instance of the same scheduler (its
  cache new from one list, leader election off). A pod it binds within FRESH_WAIT_S was
  schedulable, and the long-running instances had lost it, unless its node lost a pod after
  they stopped (split_fresh_binds); what it cannot bind could not fit;
- stale nominations: a pending pod that still names a nominated node;
- memory: processes.judge over every process's samples;
- leader gaps: each hand-over's gap against what client-go allows, plus the overlap of any
  outage of the API server or etcd.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import threading
import time
from dataclasses import asdict
from pathlib import Path

from lab.cluster import Cluster
from lab.list_watch import ListWatch
from lab.private_lab import PrivateLab
from tests.bench.load import QUIET_WAIT_S, LoadMonitor, LoadReport, load_average, pid_file_processes, read_processes
from tests.reliability.instances import wait_until
from tests.reliability.proxy import ResettingProxy
from tests.reliability.security import grant_metrics_to_scraper
from tests.reliability.soak import cache_check, processes
from tests.reliability.soak.certificates import Certificates
from tests.reliability.soak.faults import Extender, FaultDriver
from tests.reliability.soak.ledger import TERMINAL, Ledger, device_accounting
from tests.reliability.soak.plan import Plan
from tests.reliability.soak.schedulers import LEASE_DURATION_S, RETRY_PERIOD_S, SchedulerSet
from tests.reliability.soak.workload import NAMESPACE, Workload

SCHEDULER_NAME = "soak-scheduler"
LEASE_NAME = "soak-scheduler"
SAMPLE_EVERY_S = 5.0
# Samples further apart than this mean the harness itself stalled (its figures and checks lag).
SAMPLE_STALL_S = 30.0
SETTLE_MAX_S = 330.0
KWOK_CATCH_UP_S = 180.0
# kwok plays every node's pods with one pool of workers (kwok's default 4): behind 50 pods/s
# of arrivals, completions and deletions the population grew without end (17,278 pods still
# waiting for kwok after the settle) and preemptors waited on victims kwok never removed.
KWOK_POD_PARALLELISM = 16
AFTER_KWOK_S = 60.0
FRESH_WAIT_S = 45.0
# What the cache check judges stood still for this long before the dump: longer than a healthy
# watch takes to deliver a change on the busy machine.
CACHE_WINDOW_S = 15.0
# client-go's worst case for a takeover after a holder vanished (tests/reliability/failover.py
# Durations.kill_bound): leaseDuration and two jittered retry periods; plus slack for 2 busy CPUs.
GAP_ALLOWED_S = LEASE_DURATION_S + 2 * 1.2 * RETRY_PERIOD_S
GAP_SLACK_S = 3.0
LAB_PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} soak: {message}", flush=True)


class Run:
    def __init__(self, implementation: str, plan: Plan, workdir: Path, *, memory_warmup_s: float = 300.0,
                 min_memory_window_s: float | None = None):
        self.implementation = implementation
        self.plan = plan
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.memory_warmup_s = memory_warmup_s
        # A process's stretch is judged when it lasts a fifth of the planned run after its warm-up
        # (six minutes of a 30-minute run), and at least a minute.
        self.min_memory_window_s = min_memory_window_s or max(60.0, plan.settings.seconds / 5)
        self.lab = PrivateLab.on_free_ports(str(self.workdir / "lab"), LAB_KCM_API_QPS="100",
                                            LAB_KWOK_POD_PARALLELISM=str(KWOK_POD_PARALLELISM))
        # The run's own processes are this process's tree (its schedulers, extender, proxy) and its
        # lab's (lab.sh's pid files); CPU anything else burns makes the figures a busy machine's.
        self.load = LoadMonitor(pid_file_processes(self.lab.directory))
        self.start_load: LoadReport | None = None
        self.samples: list[dict] = []
        self.result: dict = {"scheduler": implementation, "plan_digest": plan.digest,
                             "settings": asdict(plan.settings)}
        self._stop = threading.Event()
        self.parts: list = []  # what to close, last first

    # -- the run --------------------------------------------------------------------------

    def execute(self) -> dict:
        began = time.monotonic()
        try:
            self._setup()
            self._drive()
            self._final_checks()
        finally:
            self._teardown()
        self.result["seconds"] = round(time.monotonic() - began, 1)
        return self.result

    def _setup(self) -> None:
        # The half before this one leaves a 1-minute load average of 4 or more on 2 cores after
        # its lab is down (the 2026-12-01 soak's kube-scheduler half started at 4.22 on an
        # otherwise idle machine and was called busy); wait for it to fall, as the bench does.
        self.start_load = self.load.wait_until_quiet(QUIET_WAIT_S, lambda report: log(
            f"{self.implementation}: waiting for a quiet machine: {'; '.join(report.reasons())}"))
        self.result["load"] = {"start": self.start_load.as_record()}
        for attempt in range(3):
            log(f"{self.implementation}: private lab in {self.lab.directory} on 127.0.0.1:{self.lab.api_port}")
            try:
                self.lab.up()
                break
            except RuntimeError as err:
                # A port free when chosen can be taken by another program before etcd binds it.
                if attempt == 2:
                    raise
                log(f"{self.implementation}: the lab did not start ({str(err)[-200:]}); again on other ports")
                self.lab.down()
                self.lab = PrivateLab.on_free_ports(self.lab.directory, **self.lab.extra_env)
        self.cluster = Cluster(self.lab.kubeconfig)
        self.workload = Workload(self.cluster, self.plan, SCHEDULER_NAME, self.lab.kubeconfig)
        self.workload.setup(progress=lambda m: log(f"{self.implementation}: {m}"))
        grant_metrics_to_scraper(self.cluster)
        self.certificates = Certificates(self.lab, self.workdir / "pki")
        self.extender = Extender(self.workdir)
        self.parts.append(self.extender)
        host, port = self.cluster.server.removeprefix("https://").rsplit(":", 1)
        self.proxy = ResettingProxy(host, int(port))
        self.parts.append(self.proxy)
        self.origin = time.monotonic()  # replaced when the arrivals start; the schedulers' clock until then
        self.schedulers = SchedulerSet(
            self.implementation, self.workdir / "schedulers", kubeconfig=self.proxy.kubeconfig(self.lab.kubeconfig,
                                                                                               self.workdir),
            auth_kubeconfig=self.lab.kubeconfig, scheduler_name=SCHEDULER_NAME, lease_name=LEASE_NAME,
            serving=self.certificates.serving, client_ca_file=self.certificates.client_ca_file,
            extenders=[self.extender.config()], clock_origin=self.origin)
        self.parts.append(self.schedulers)
        self.schedulers.start()
        self.ledger = Ledger(SCHEDULER_NAME, LEASE_NAME, clock=lambda: time.monotonic() - self.origin)
        watches = [("/api/v1/pods", self.ledger.pod_list, self.ledger.pod_event),
                   ("/api/v1/nodes", self.ledger.node_list, self.ledger.node_event),
                   ("/apis/resource.k8s.io/v1/resourceclaims", self.ledger.claim_list, self.ledger.claim_event),
                   ("/api/v1/persistentvolumeclaims", self.ledger.pvc_list, self.ledger.pvc_event),
                   ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", self.ledger.lease_list,
                    self.ledger.lease_event)]
        self.watches = [ListWatch(self.cluster, path, on_list, on_event).start() for path, on_list, on_event in watches]
        log(f"{self.implementation}: three instances ready, watches listed")

    def _drive(self) -> None:
        settings = self.plan.settings
        self.origin = time.monotonic()
        self.schedulers.origin = self.origin
        self.load.start_run()
        self.faults = FaultDriver(self.plan, lab=self.lab, cluster=self.cluster, schedulers=self.schedulers,
                                  extender=self.extender, proxy=self.proxy, certificates=self.certificates,
                                  origin=self.origin)
        sampler = threading.Thread(target=self._sample, name="sampler", daemon=True)
        sampler.start()
        self.workload.start(self.origin, kwok_backlog=self.ledger.kwok_backlog)
        self.faults.start()
        log(f"{self.implementation}: {settings.minutes:g} minutes of {settings.rate:g} pods/s and "
            f"{len(self.plan.faults)} faults (plan {self.plan.digest})")
        while time.monotonic() - self.origin < settings.seconds:
            time.sleep(min(60.0, settings.seconds - (time.monotonic() - self.origin)))
            if time.monotonic() - self.origin < settings.seconds:
                log(f"{self.implementation}: minute {(time.monotonic() - self.origin) / 60:.0f}: "
                    f"{self.ledger.binds} bound, {len(self.ledger.pending(('never',)))} pending, "
                    f"{len(self.faults.records)} faults done, violations {self.ledger.violation_counts()}")
        self.workload.close()
        if not self.faults.wait(300):
            log(f"{self.implementation}: some faults still running 5 minutes after the end")
        self.result["arrivals_planned"] = self.plan.arrivals_by_class()
        self.result["arrivals_made"] = dict(self.workload.created)
        self.result["arrival_failures"] = self.workload.failed[:50]
        self.result["arrival_failure_count"] = len(self.workload.failed)
        self.result["arrival_lag_s"] = round(self.workload.lag_s, 2)
        self.result["arrivals_held_s"] = round(self.workload.held_s, 1)
        self.result["arrival_holds"] = self.workload.holds
        self.result["volumes_recycled"] = self.workload.recycled_volumes

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                self._sample_once()
            except Exception as err:  # noqa: BLE001 - a sample missed is no reason to stop sampling
                log(f"{self.implementation}: a sample failed: {err!r}")

    def _sample_once(self) -> None:
        t = round(time.monotonic() - self.origin, 1)
        entry = {"t": t, "pending": len(self.ledger.pending(("never",))), "binds": self.ledger.binds,
                 "pods": len(self.ledger.pods), "population": self.ledger.population(),
                 "kwok_backlog": self.ledger.kwok_backlog(), "instances": {}}
        cpu = read_processes()
        for slot in self.schedulers.slots:
            process = slot.process  # a fault may replace it meanwhile: read it once
            if process is None or not process.alive():
                continue
            figures = processes.read_instance(process.pid, cpu)
            if figures is not None:
                entry["instances"][str(slot.index)] = {"pid": process.pid, **figures, "leader": process.is_leader()}
        # Where the machine's CPU goes: the lab's components and this harness (arrivals, ledger).
        entry["cpu_s"] = {name: round(cpu[pid].total_s, 2) for name in LAB_PROCESSES
                          if (pid := self.lab.pid(name)) is not None and pid in cpu}
        entry["cpu_s"]["harness"] = round(cpu[os.getpid()].own_s, 2) if os.getpid() in cpu else None
        self.load.sample_run()
        entry["load1"] = round(load_average(), 2)
        self.samples.append(entry)

    # -- the end --------------------------------------------------------------------------

    def _final_checks(self) -> None:
        out = self.result
        out["faults"] = sorted(self.faults.records, key=lambda r: r["began"])
        out["outages"] = self.faults.outages
        settle_began = time.monotonic()
        wait_until(lambda: not self.ledger.pending(("never",)), SETTLE_MAX_S, 1.0)
        if self.ledger.pending(("never",)):
            # Room kwok has yet to give back (a Job pod it has not finished, a deleted pod it has
            # not removed) is no scheduler's doing: once kwok has caught up, the instances get
            # another chance before anything counts as lost.
            caught_up = wait_until(lambda: self.ledger.kwok_backlog() == 0, KWOK_CATCH_UP_S, 2.0)
            out["kwok_backlog_after_settle"] = 0 if caught_up else self.ledger.kwok_backlog()
            wait_until(lambda: not self.ledger.pending(("never",)), AFTER_KWOK_S, 1.0)
        out["settle_s"] = round(time.monotonic() - settle_began, 1)
        leftover = self.ledger.pending(("never",))
        log(f"{self.implementation}: settled in {out['settle_s']} s, {len(leftover)} pods pending")
        out["cache"] = self._check_caches()
        self._stop.set()
        out["series"] = self.samples
        self.load.sample_run()
        during = self.load.run_report()
        out["load"]["during"] = during.as_record() if during else None
        out["busy"] = bool(self.start_load and self.start_load.busy) or bool(during and during.busy)
        out["memory"] = self._judge_memory()
        out["cpu"] = processes.cpu_summary(self.samples)
        out["handovers"] = self._judge_handovers()
        out["violations"] = self.ledger.violations[:200]
        out["violation_counts"] = self.ledger.violation_counts()
        self.ledger.close_deferred()
        out["races"] = dict(self.ledger.races)
        # How often the ledger's own watches listed again (after a 410 or a lost connection): a
        # check that fires together with a relist may be the relist's, not the scheduler's.
        out["ledger_relists"] = {watch.name: watch.relists - 1 for watch in self.watches}
        out["binds"] = self.ledger.binds
        with self.ledger.lock:
            latencies = {cls: list(values) for cls, values in self.ledger.bind_latencies.items()}
        out["bind_latency_s"] = {cls: _percentiles(values) for cls, values in latencies.items()}
        pods, _rv = self.cluster.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        out["stale_nominations"] = stale_nominations(pods)
        out["instances"] = [asdict(r) for r in self.schedulers.history]
        out["unplanned_exits"] = self.schedulers.unplanned_exits
        out["log_counts"] = self._log_counts()
        out["pending_after_settle"] = [p.key for p in leftover][:100]
        out["lost"] = self._offer_to_fresh_instance([p.uid for p in leftover]) if leftover else {
            "offered": 0, "bound_by_fresh_instance": [], "still_pending": []}
        pods, _rv = self.cluster.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        out["devices"] = device_accounting(self.cluster.list_all("/apis/resource.k8s.io/v1/resourceslices")[0],
                                           self.cluster.list_all("/apis/resource.k8s.io/v1/resourceclaims")[0], pods)

    def _check_caches(self) -> dict:
        """Each running instance's dump against the API, judged on what stood still for
        CACHE_WINDOW_S before the dump (cache_check.py)."""
        nodes_before, _rv = self.cluster.list_all("/api/v1/nodes")
        before, _rv = self.cluster.list_all("/api/v1/pods")
        time.sleep(CACHE_WINDOW_S)
        dumps = self._dump_caches()
        time.sleep(cache_check.DUMP_GAP_S)
        again = self._dump_caches()
        nodes, _rv = self.cluster.list_all("/api/v1/nodes")
        after, _rv = self.cluster.list_all("/api/v1/pods")
        moving = cache_check.in_flux(before, after) | cache_check.in_flux(nodes_before, nodes)
        outcome: dict = {"window_s": CACHE_WINDOW_S, "pods_in_flux": len(moving)}
        for slot, (pid, dump) in dumps.items():
            if dump is None:
                outcome[str(slot)] = {"pid": pid, "dumped": False}
                continue
            second = again.get(slot, (None, None))
            diff = cache_check.compare(dump, nodes, after, SCHEDULER_NAME, moving,
                                       again=second[1] if second[0] == pid else None)
            outcome[str(slot)] = {"pid": pid, "dumped": True, "differences": cache_check.differences(diff),
                                  "cached_nodes": len(dump.nodes),
                                  "cached_pods": sum(len(u) for u in dump.nodes.values()),
                                  "queued_pods": len(dump.queue), "queue_summary": dump.queue_summary,
                                  "detail": {k: v[:20] for k, v in diff.items()}}
        return outcome

    def _dump_caches(self) -> dict[int, tuple[int, cache_check.CacheDump | None]]:
        """Signal every running instance to dump its cache and queue; slot -> (pid, its dump)."""
        dumps = {}
        for slot, (pid, log_path, offset) in self.schedulers.signal_all(signal.SIGUSR2).items():
            def read(log_path=log_path, offset=offset):
                with open(log_path, encoding="utf-8", errors="replace") as fh:
                    fh.seek(offset)
                    return cache_check.parse_dump(fh.read())
            dumps[slot] = (pid, wait_until(read, 60, 0.5))
        return dumps

    def _offer_to_fresh_instance(self, uids: list[str]) -> dict:
        """Stop the soak's instances and let a fresh one try the pods still pending.

        kwok may still be finishing and deleting pods then (two busy cores), so a pod the fresh
        instance binds to a node that lost a pod after the stop may have found room that the
        long-running instances never had: it is counted apart, not as lost."""
        self.schedulers.close()
        pods, _rv = self.cluster.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        at_stop = _running_by_node(pods)
        # What the long-running instances left: the settle's list less what they bound (or what
        # went) before they stopped, as the API has it now.
        wanted = set(uids) & pending_uids(pods)
        fresh = SchedulerSet(self.implementation, self.workdir / "fresh", kubeconfig=self.lab.kubeconfig,
                             auth_kubeconfig=self.lab.kubeconfig, scheduler_name=SCHEDULER_NAME,
                             lease_name=LEASE_NAME + "-fresh", serving=self.certificates.serving,
                             client_ca_file=self.certificates.client_ca_file,
                             extenders=[self.extender.config()], clock_origin=self.origin)
        fresh.config["leaderElection"] = {"leaderElect": False}
        fresh.slots = fresh.slots[:1]
        self.parts.append(fresh)
        fresh.start()
        wait_until(lambda: not wanted & {p.uid for p in self.ledger.pending(("never",))}, FRESH_WAIT_S, 1.0)
        fresh.close()
        pods, _rv = self.cluster.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        lost, room_freed = split_fresh_binds(wanted, at_stop, pods)
        still = wanted & pending_uids(pods)
        with self.ledger.lock:  # its watches still run
            keys = {p.uid: p.key for p in self.ledger.pods.values()}
        return {"pending_after_settle": len(uids), "offered": len(wanted),
                "bound_by_fresh_instance": sorted(keys.get(u, u) for u in lost),
                "bound_where_room_was_freed_after_the_stop": sorted(keys.get(u, u) for u in room_freed),
                "still_pending": sorted(keys.get(u, u) for u in still),
                "gone": len(wanted - lost - room_freed - still)}

    def _judge_memory(self) -> list[dict]:
        per_pid: dict[int, list[dict]] = {}
        # Up to the planned end: the catch-up after the last fault is another regime.
        for sample in (s for s in self.samples if s["t"] <= self.plan.settings.seconds):
            for slot, figures in sample["instances"].items():
                per_pid.setdefault(figures["pid"], []).append({"t": sample["t"], "slot": int(slot),
                                                               "pods": sample.get("pods"), **figures})
        verdicts = []
        for pid, samples in per_pid.items():
            for verdict in processes.judge(samples, warmup_s=min(self.memory_warmup_s, 60.0),
                                           min_window_s=self.min_memory_window_s,
                                           run_warmup_until=self.memory_warmup_s):
                verdicts.append({"pid": pid, "slot": samples[0]["slot"], "role": verdict.role,
                                 "window_s": verdict.window_s, "start": verdict.start, "end": verdict.end,
                                 "growth": verdict.growth, "pods": verdict.pods, "parts": verdict.parts,
                                 "flat": verdict.flat})
        return verdicts

    def _judge_handovers(self) -> list[dict]:
        """Each hand-over's gap, and whether it stayed within what the Lease allows (plus the part
        of an API server or etcd outage it overlapped, when no one could renew or acquire)."""
        origin_wall = time.time() - (time.monotonic() - self.origin)
        judged = []
        for handover in self.ledger.handovers():
            start, end = handover["last_renew"] - origin_wall, handover["acquired"] - origin_wall
            overlap = sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.faults.outages)
            allowed = GAP_ALLOWED_S + GAP_SLACK_S + overlap
            # An upper bound within the allowance holds; one over it, unobserved, is not known.
            if handover["gap_s"] <= allowed:
                within: bool | None = True
            else:
                within = False if handover["observed"] else None
            judged.append({**handover, "at": round(end, 1), "outage_overlap_s": round(overlap, 2),
                           "allowed_s": round(allowed, 2), "within": within})
        return judged

    def _log_counts(self) -> dict:
        texts = []
        for record in self.schedulers.history:
            try:
                texts.append(Path(record.log).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
        text = "\n".join(texts)
        return {"relists_after_410": text.count('"Watch expired, relisting"') + text.count("too old resource version"),
                "bind_refused": text.count('"Failed to bind pod"') + text.count("Failed to bind pod"),
                "scheduling_errors_retried": text.count('"Error scheduling pod; retrying"')
                + text.count("Error scheduling pod; retrying"),
                "lost_leadership": text.count("Leaderelection lost") + text.count("leaderelection lost"),
                "tracebacks": text.count("Traceback (most recent call last)") + text.count("panic:")}

    def _teardown(self) -> None:
        self._stop.set()
        for watch in getattr(self, "watches", []):
            watch.close()
        if hasattr(self, "workload"):
            self.workload.close()
        if hasattr(self, "faults"):
            self.faults.close()
        for part in reversed(self.parts):
            try:
                part.close()
            except Exception as err:  # noqa: BLE001 - the rest must still be stopped
                log(f"could not stop {type(part).__name__}: {err}")
        try:
            self.lab.down()
        except Exception as err:  # noqa: BLE001
            log(f"could not stop the private lab: {err}")


def _running_by_node(pods: list[dict]) -> dict[str, set[str]]:
    """node -> UIDs of its pods that have not finished."""
    by_node: dict[str, set[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in TERMINAL:
            by_node.setdefault(node, set()).add(pod["metadata"]["uid"])
    return by_node


def pending_uids(pods: list[dict]) -> set[str]:
    """The pods no node has and that are neither finished nor going."""
    return {p["metadata"]["uid"] for p in pods if not (p.get("spec") or {}).get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in TERMINAL}


def split_fresh_binds(offered: set[str], at_stop: dict[str, set[str]], pods_now: list[dict]) -> tuple[set[str], set[str]]:
    """(lost, room freed): the offered pods the API now shows on a node (the fresh instance's
    binds), split by whether that node lost a pod (deleted or finished) between the
    long-running instances' stop and now. A pod that is gone is neither."""
    now = _running_by_node(pods_now)
    where = {p["metadata"]["uid"]: (p.get("spec") or {}).get("nodeName") for p in pods_now}
    freed = {node for node, uids in at_stop.items() if uids - now.get(node, set())}
    bound = {uid for uid in offered if where.get(uid)}
    room_freed = {uid for uid in bound if where[uid] in freed}
    return bound - room_freed, room_freed


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    return {"count": len(ordered), "p50": round(statistics.median(ordered), 3),
            "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3), "max": round(ordered[-1], 3)}


def stale_nominations(pods: list[dict]) -> list[str]:
    """Pending pods still nominated to a node where no lower-priority pod is terminating: a
    preemptor whose victims are still going waits, as upstream's PodEligibleToPreemptOthers
    has it (kwok holds a deleted pod for its grace period); any other nomination is stale."""
    terminating: dict[str, list[int]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") and pod["spec"].get("nodeName"):
            terminating.setdefault(pod["spec"]["nodeName"], []).append(pod["spec"].get("priority") or 0)
    return [pod["metadata"]["name"] for pod in pods
            if not pod["spec"].get("nodeName") and (node := (pod.get("status") or {}).get("nominatedNodeName"))
            and not any(priority < (pod["spec"].get("priority") or 0) for priority in terminating.get(node, ()))]


def verdicts(result: dict) -> list[tuple[str, bool, str]]:
    """The run's invariants as (name, held, detail)."""
    counts = result.get("violation_counts") or {}
    lost = result.get("lost") or {}
    devices = result.get("devices") or {}
    memory = result.get("memory") or []
    caches = {k: v for k, v in (result.get("cache") or {}).items() if isinstance(v, dict)}
    gaps = result.get("handovers") or []
    times = [sample["t"] for sample in result.get("series") or []]
    sample_gap = round(max((b - a for a, b in zip(times, times[1:])), default=0.0), 1)
    return [
        ("every pod that can fit is bound (a fresh instance binds none of those left pending, and no device "
         "is held for a pod that is gone)",
         not lost.get("bound_by_fresh_instance") and not devices.get("held_for_no_pod"),
         f"pending after {result.get('settle_s')} s of settling: {lost.get('pending_after_settle', lost.get('offered', 0))}"
         f", still pending at the stop: {lost.get('offered', 0)}; bound by a fresh "
         f"instance: {len(lost.get('bound_by_fresh_instance') or [])}; bound by it where a pod left after the "
         f"stop: {len(lost.get('bound_where_room_was_freed_after_the_stop') or [])}; could not fit: "
         f"{len(lost.get('still_pending') or [])}"
         + (f"; devices at the end: {devices['devices']} published, {devices['allocated']} allocated, "
            f"{devices['free']} free, held for no pod: {devices['held_for_no_pod'] or 'none'}" if devices else "")),
        ("no pending pod left with a stale nomination", not result.get("stale_nominations"),
         f"{len(result.get('stale_nominations') or [])} pods"),
        ("no pod bound twice", not counts.get("double_bind"), f"{counts.get('double_bind', 0)} nodeName changes"),
        ("no pod placed where it did not fit at bind time",
         not any(counts.get(k) for k in ("overcommitted", "node_selector", "untolerated_taint", "anti_affinity")),
         ", ".join(f"{k} {counts.get(k, 0)}" for k in ("overcommitted", "node_selector", "untolerated_taint",
                                                       "anti_affinity"))),
        ("no device allocated to two claims", not counts.get("device_in_two_claims"),
         f"{counts.get('device_in_two_claims', 0)}"),
        ("no volume bound to two claims", not counts.get("volume_in_two_claims"),
         f"{counts.get('volume_in_two_claims', 0)}"),
        ("no leader gap longer than the Lease allows", bool(gaps) and all(g["within"] is not False for g in gaps),
         f"{len(gaps)} hand-overs, longest {max((g['gap_s'] for g in gaps), default=None)} s, over the allowance: "
         f"{[g['gap_s'] for g in gaps if g['within'] is False]}"),
        ("the harness saw every hand-over whole and kept sampling (samples at most "
         f"{SAMPLE_STALL_S:g} s apart)",
         not any(g["within"] is None for g in gaps) and sample_gap <= SAMPLE_STALL_S,
         f"hand-overs the Lease watch relisted across, over the allowance as upper bounds: "
         f"{[g['gap_s'] for g in gaps if g['within'] is None]}; longest time between samples {sample_gap} s"),
        ("RSS, threads and open files of each instance flat after the warm-up (growth <= 10%; RSS may grow "
         "as fast as the API's pods)",
         bool(memory) and all(m["flat"] for m in memory),
         f"{len(memory)} process stretches judged; "
         + "; ".join(f"pid {m.get('pid')} ({m.get('role')}): RSS {m['growth']['rss_mb']:+.0%}, threads "
                     f"{m['growth']['threads']:+.0%}, files {m['growth']['fds']:+.0%}"
                     + (" (RSS by process: " + ", ".join(f"{name} {growth['rss_mb']:+.0%}"
                                                         for name, growth in m["parts"].items()) + ")"
                        if m.get("parts") else "")
                     + (f", the API's pods {m['pods']['growth']:+.0%} ({m['pods']['start']:g} to {m['pods']['end']:g})"
                        if m.get("pods") else "")
                     for m in memory)),
        ("each instance's cache equals the API's view after the last relist",
         bool(caches) and all(c.get("dumped") and c.get("differences") == 0 for c in caches.values()),
         "; ".join(f"instance {k}: {c.get('differences', 'no dump')} differences" for k, c in caches.items())),
        ("each running instance took the rotated serving certificate and client CA while it ran",
         all(v is not None for f in result.get("faults") or [] if f["kind"] == "ca_rotation" and f.get("ok")
             for part in ("serving", "client_ca") for v in (f.get(part) or {}).get("instances", {}).values()),
         "; ".join(f"{part} seconds per instance: {(f.get(part) or {}).get('instances')}"
                   for f in result.get("faults") or [] if f["kind"] == "ca_rotation" for part in ("serving", "client_ca"))),
        ("every fault was carried out", all(f.get("ok") and not f.get("skipped") for f in result.get("faults") or []),
         "; ".join(f"{f['kind']}: {f.get('error') or f.get('skipped')}" for f in result.get("faults") or []
                   if not f.get("ok") or f.get("skipped")) or "all"),
    ]


def save(result: dict, path: Path) -> None:
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
