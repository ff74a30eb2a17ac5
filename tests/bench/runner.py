"""One benchmark run: a workload, a scheduler and a qps profile, measured until every pod
is bound. The path reads top to bottom: clean the namespace, create the init pods and the
backlog, start the watch, start the scheduler, wait, stop, summarise."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from lab.cluster import Cluster
from lab.pod_watch import PodWatch
from lab.private_lab import ROOT, PrivateLab
from tests.bench.load import RUN_SAMPLE_S, LoadMonitor, LoadReport
from tests.bench.measure import percentile, scheduling_throughput
from tests.bench.objects import (
    NodeSet,
    create_objects,
    delete_pods,
    ensure_namespace,
    ensure_priority_class,
    remove_objects,
)
from tests.bench.operations import RunningOperations
from tests.bench.profile import Sampler
from tests.bench.schedulers import BINDER_CONCURRENCY, QPS_PROFILES, RunningScheduler, command_line, scheduler_label
from tests.bench.workloads import MEASURED_LABEL, Workload, init_pod_bodies, node_names, pod_manifest

SAMPLE_INTERVAL_S = 0.5
# One schedulerName for every scheduler, so a saved backlog serves each of them.
SCHEDULER_NAME = "bench-scheduler"


class Progress:
    """A one-line live status on a terminal; on a log, a status line every few seconds."""

    def __init__(self, stream=sys.stderr, quiet: bool = False):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self._width = 0
        self._last_plain = 0.0

    def status(self, text: str) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
            self.stream.flush()
        elif time.monotonic() - self._last_plain >= 5:
            self._last_plain = time.monotonic()
            print(text, file=self.stream, flush=True)

    def log(self, text: str) -> None:
        if self.quiet:
            return
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        print(f"{time.strftime('%H:%M:%S')} {text}", file=self.stream, flush=True)


@dataclass
class RunContext:
    """What the runs share. With a dedicated lab, cluster and nodes are made by prepare()."""

    cluster: Cluster | None
    namespace: str
    workdir: str
    nodes: NodeSet | None
    progress: Progress
    run_timeout_s: float
    lab: PrivateLab | None = None
    saved_workload: str | None = None
    kubesched_source: str | None = None  # set by --pin-kubesched
    binder_concurrency: int = BINDER_CONCURRENCY
    commit: str = ""  # what the records name: set once, at the start of the bench
    load_monitor: LoadMonitor | None = None  # samples the machine during each run
    start_load: LoadReport | None = None  # what the check before the bench found
    allow_busy: bool = False  # --allow-busy: every record is marked busy
    kubesched_feature_gates: dict[str, bool] | None = None  # --kubesched-feature-gates
    session: str = ""  # one per bench process: records of one session are compared with each other
    subreaper: bool = False  # the bench adopts orphaned descendants (tests/bench/load.py)

    def _reconnect(self) -> None:
        self.cluster = Cluster(self.lab.kubeconfig)
        self.nodes = NodeSet(self.cluster, static=True)

    def prepare(self, workload: Workload, label: str) -> None:
        """The workload's cluster state before the scheduler starts: its nodes, its bound init
        pods and, in backlog mode, every pending pod. On the benchmark's own API server it is
        built once per workload and restored from a copy of etcd for each later run."""
        if self.lab and self.saved_workload == workload.name:
            start = time.monotonic()
            self.lab.restore_snapshot()
            self._reconnect()
            self.nodes.current = workload.nodes
            self.progress.log(f"{label}: restored the saved cluster state in {time.monotonic() - start:.1f} s")
            return
        if self.lab:
            self.lab.restart_empty()
            self._reconnect()
        else:
            delete_pods(self.cluster, self.namespace)
        pods_path = f"/api/v1/namespaces/{self.namespace}/pods"
        ensure_namespace(self.cluster, self.namespace)
        self.nodes.ensure(workload.nodes, self.progress.log)
        for name, value in workload.priority_classes:
            ensure_priority_class(self.cluster, name, value)
        groups = workload.objects(self.namespace)
        if groups:
            # A shared API server may hold an earlier run's: removed first.
            remove_objects(self.cluster, groups, workload.made_for_pods(self.namespace))
            created = create_objects(self.cluster, groups)
            self.progress.log(f"{label}: created {created} objects the pods need "
                              f"({', '.join(path.rsplit('/', 1)[-1] for path, _bodies in groups)})")
        init_bodies = init_pod_bodies(workload, node_names(workload.nodes))
        if init_bodies:
            self.cluster.create_all(pods_path, init_bodies)
            self.progress.log(f"{label}: created {len(init_bodies)} bound init pods")
        for count, build in workload.unmeasured_pods:
            self.cluster.create_all(pods_path, [build(i, SCHEDULER_NAME) for i in range(count)])
            self.progress.log(f"{label}: created {count} pending pods that are not measured")
        if workload.mode == "backlog":
            total, start = workload.pods, time.monotonic()
            bodies = [workload.measured_pod(i, SCHEDULER_NAME) for i in range(total)]
            self.cluster.create_all(pods_path, bodies, on_created=lambda n: self.progress.status(
                f"{label}: created {n}/{total} pending pods"))
            self.progress.log(f"{label}: created {total} pending pods in {time.monotonic() - start:.1f} s")
        if self.lab:
            self.lab.save_snapshot()
            self.saved_workload = workload.name
            self.lab.up()
            self._reconnect()
            self.nodes.current = workload.nodes


def git_commit(pinned: bool) -> str:
    """HEAD, marked +dirty when the measured code (kubesched/, tests/bench/) has uncommitted
    changes and kubesched runs from the working tree."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False)
    commit = head.stdout.strip() or "unknown"
    paths = ["tests/bench"] if pinned else ["kubesched", "tests/bench"]
    status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", *paths],
                            capture_output=True, text=True, check=False)
    return commit + ("+dirty" if status.stdout.strip() else "")


def run_timeout(workload: Workload, cap_s: float) -> float:
    """Generous for a slow scheduler, bounded so one stuck run cannot stall the whole bench."""
    if workload.mode == "steady":
        return workload.pods / workload.rate_per_s + min(cap_s, 120)
    return min(cap_s, 120 + workload.pods * workload.timeout_per_pod_s)


def _wait_warm(ctx: RunContext, running: RunningScheduler, scheduler_name: str, label: str) -> None:
    """In steady mode the clock starts once the scheduler binds a first pod, so start-up
    and cache sync are not charged to the arrival latency."""
    path = f"/api/v1/namespaces/{ctx.namespace}/pods"
    ctx.cluster.request("POST", path, pod_manifest("warm-up", scheduler_name), ok=(201,))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if running.exited() is not None:
            raise RuntimeError(f"{running.scheduler} exited with {running.exited()} before binding a first pod:\n"
                               f"{running.log_tail()}")
        pod = ctx.cluster.request("GET", f"{path}/warm-up")
        if pod["spec"].get("nodeName"):
            return
        ctx.progress.status(f"{label}: waiting for the scheduler to bind a warm-up pod")
        time.sleep(0.2)
    raise TimeoutError(f"{running.scheduler} did not bind a warm-up pod within 180 s; see {running.log_path}")


def _arrive_steadily(ctx: RunContext, workload: Workload, scheduler_name: str,
                     created_at: dict[str, float], stop: threading.Event) -> None:
    """Create the pods at a fixed rate on a fixed timetable, so a slow create never bunches arrivals."""
    path = f"/api/v1/namespaces/{ctx.namespace}/pods"

    def create(index: int) -> None:
        body = workload.measured_pod(index, scheduler_name)
        created_at[body["metadata"]["name"]] = time.monotonic()
        ctx.cluster.request("POST", path, body, ok=(201,))

    start = time.monotonic()
    # Enough threads that a slow create (hundreds of ms on a loaded API server) never holds
    # back the next arrival.
    with ThreadPoolExecutor(max_workers=64) as pool:
        for index in range(workload.pods):
            if stop.is_set():
                break
            delay = start + index / workload.rate_per_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(create, index)


def run_one(ctx: RunContext, workload: Workload, scheduler: str, qps_profile: str, label: str,
            profile_output: str | None = None) -> dict:
    """Measure one run; with profile_output, py-spy samples the scheduler into that file."""
    qps, burst = QPS_PROFILES[qps_profile]
    scheduler_name = SCHEDULER_NAME
    prepare_start = time.monotonic()
    ctx.prepare(workload, label)
    prepare_s = time.monotonic() - prepare_start

    # Started before the scheduler: the first list settles what is bound already.
    watcher = PodWatch(ctx.cluster.core, ctx.namespace, f"{MEASURED_LABEL}=true").start()
    log_path = os.path.join(ctx.workdir, f"{scheduler}.log")
    command = command_line(scheduler, ctx.cluster, ctx.workdir, scheduler_name, qps, burst, ctx.kubesched_source,
                           ctx.binder_concurrency, ctx.kubesched_feature_gates, dict(workload.feature_gates))
    if ctx.load_monitor:
        ctx.load_monitor.start_run()
    running = RunningScheduler(scheduler, command, log_path)
    operations = RunningOperations(workload.operations, ctx.cluster, ctx.namespace, scheduler_name)
    sampler = Sampler(running.process.pid, profile_output) if profile_output else None
    created_at: dict[str, float] = {}
    stop_arrivals = threading.Event()
    arrivals = None
    failure = ""
    next_load_sample = time.monotonic() + RUN_SAMPLE_S
    try:
        if workload.mode == "steady":
            _wait_warm(ctx, running, scheduler_name, label)
            arrivals = threading.Thread(target=_arrive_steadily, daemon=True,
                                        args=(ctx, workload, scheduler_name, created_at, stop_arrivals))
            arrivals.start()
        clock = time.monotonic()
        deadline = clock + run_timeout(workload, ctx.run_timeout_s)
        next_sample = 0.0
        while len(watcher.bound_at) < workload.pods:
            now = time.monotonic()
            if now >= next_sample:
                running.stats.sample()
                next_sample = now + SAMPLE_INTERVAL_S
            if ctx.load_monitor and now >= next_load_sample:
                ctx.load_monitor.sample_run()
                next_load_sample = now + RUN_SAMPLE_S
            if running.exited() is not None:
                failure = f"{scheduler} exited with status {running.exited()}"
                ctx.progress.log(f"{label}: {failure}; last lines of {log_path}:\n{running.log_tail()}")
                break
            if now > deadline:
                failure = f"timed out after {now - clock:.0f} s"
                ctx.progress.log(f"{label}: {failure} with {len(watcher.bound_at)}/{workload.pods} pods bound")
                break
            bound = len(watcher.bound_at)
            elapsed = now - running.started
            ctx.progress.status(f"{label}: {bound}/{workload.pods} bound, {elapsed:.1f} s, "
                                f"cpu {running.stats.cpu_s:.1f} s, rss {running.stats.peak_rss_mb:.0f} MB")
            watcher.wait_changed(0.25)
        running.stats.sample()
    finally:
        stop_arrivals.set()
        if arrivals:
            arrivals.join()
        for problem in operations.stop():
            ctx.progress.log(f"{label}: {problem}")
        running.stop()
        watcher.close()
        if sampler:
            sampler.finish()
        if ctx.load_monitor:
            ctx.load_monitor.sample_run()  # the scheduler's last CPU, now reaped into the bench's
    run_s = time.monotonic() - running.started
    record = summarise(workload, scheduler, qps_profile, running, watcher.bound_at, created_at, failure,
                       ctx.commit or git_commit(pinned=ctx.kubesched_source is not None))
    record.update(load_fields(ctx), session=ctx.session, prepare_s=round(prepare_s, 1), run_s=round(run_s, 1))
    record["scheduler"] = scheduler_label(scheduler, ctx.kubesched_feature_gates)
    ctx.progress.log(f"{label}: {format_record(record)}")
    return record


def load_fields(ctx: RunContext) -> dict:
    """The load a record was measured under, and whether that makes it a busy record: other
    processes used the machine during the run (tests/bench/load.py), or the bench measures
    anyway (--allow-busy, also what lets a bench start on a busy machine)."""
    start = ctx.start_load.as_record() if ctx.start_load else None
    during = ctx.load_monitor.run_report() if ctx.load_monitor else None
    busy = ctx.allow_busy or bool(ctx.start_load and ctx.start_load.busy) or bool(during and during.busy)
    return {"busy": busy, "load": {"start": start, "during": during.as_record() if during else None}}


def summarise(workload: Workload, scheduler: str, qps_profile: str, running: RunningScheduler,
              bound_at: dict[str, float], created_at: dict[str, float], failure: str, commit: str) -> dict:
    qps, burst = QPS_PROFILES[qps_profile]
    bound_times = sorted(bound_at.values())
    if workload.mode == "steady":
        # Latency from creation: what a user who just created the pod waits.
        latencies = [bound_at[name] - created_at[name] for name in bound_at if name in created_at]
        window_start = min(created_at.values()) if created_at else running.started
    else:
        # From the scheduler's start: a backlog pod waits for start-up too, and a workload
        # like Preemption does most of its work before the first binding.
        latencies = [moment - running.started for moment in bound_times]
        window_start = running.started
    span = bound_times[-1] - window_start if bound_times else 0.0
    first_to_last = bound_times[-1] - bound_times[0] if len(bound_times) > 1 else 0.0
    record = {
        "workload": workload.name,
        "mode": workload.mode,
        "scheduler": scheduler,
        "nodes": workload.node_count,
        "pods": workload.pods,
        "bound": len(bound_at),
        "complete": len(bound_at) >= workload.pods and not failure,
        "qps_profile": qps_profile,
        "qps": qps,
        "burst": burst,
        "pods_per_s": round(len(bound_times) / span, 1) if span > 0 else None,
        # The rate once binding has begun, start-up and preemption left out.
        "bind_rate_per_s": round((len(bound_times) - 1) / first_to_last, 1) if first_to_last > 0 else None,
        # scheduler_perf's own figure, the one its thresholds are set on.
        "scheduling_throughput": _rounded(scheduling_throughput(bound_times, window_start)),
        "p50_ms": round(percentile(latencies, 0.50) * 1000) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000) if latencies else None,
        "startup_s": round(bound_times[0] - running.started, 2) if bound_times else None,
        "makespan_s": round(bound_times[-1] - running.started, 2) if bound_times else None,
        "cpu_s": round(running.stats.cpu_s, 2),
        "main_cpu_s": round(running.stats.main_cpu_s, 2),
        "peak_rss_mb": round(running.stats.peak_rss_mb, 1),
        "commit": commit,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if workload.mode == "steady":
        record["rate_per_s"] = workload.rate_per_s
        arrivals = sorted(created_at.values())
        if len(arrivals) > 1:
            record["achieved_rate_per_s"] = round((len(arrivals) - 1) / (arrivals[-1] - arrivals[0]), 1)
    if failure:
        record["failure"] = failure
    return record


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def format_record(record: dict) -> str:
    def show(value, unit=""):
        return "-" if value is None else f"{value}{unit}"

    return (f"{record['bound']}/{record['pods']} bound, {show(record['pods_per_s'])} pods/s, "
            f"p50 {show(record['p50_ms'], ' ms')}, p99 {show(record['p99_ms'], ' ms')}, "
            f"cpu {record['cpu_s']} s, peak rss {record['peak_rss_mb']} MB"
            + (f" [{record['failure']}]" if record.get("failure") else "")
            + (" [BUSY machine: not comparable]" if record.get("busy") else ""))
