"""`python -m tests.bench` (`make bench`): run the workloads against each scheduler and write
tests/bench/results/latest.json, the table in docs/performance.md and the throughput plot."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from lab.private_lab import ROOT, PrivateLab
from tests.bench.cluster import Cluster, NodeSet, remove_cluster_objects
from tests.bench.load import MAX_LOAD_PER_CORE, LoadMonitor, refusal_message
from tests.bench.loop import LOOP_ONLY, run_loop_apart, unsupported_reason
from tests.bench.profile import summarise
from tests.bench.report import merge_results, write_docs, write_plot
from tests.bench.runner import (
    SCHEDULER_NAME,
    Progress,
    RunContext,
    format_record,
    git_commit,
    load_fields,
    run_one,
)
from tests.bench.schedulers import (
    BINDER_CONCURRENCY,
    QPS_PROFILES,
    SCHEDULER_NAMES,
    available,
    pin_kubesched,
    scheduler_label,
)
from tests.bench.workloads import WORKLOADS, select

NAMESPACE = "kubesched-bench"
RESULTS = os.path.join(ROOT, "tests", "bench", "results", "latest.json")
PLOT = os.path.join(ROOT, "tests", "bench", "results", "throughput.png")
DOCS = os.path.join(ROOT, "docs", "performance.md")
WORKDIR = os.path.join(ROOT, "tests", "bench", "work")


def _split(values: list[str] | None) -> list[str]:
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench", description=__doc__,
        epilog="Workloads: " + ", ".join(w.name for w in WORKLOADS)
        + ". By default the benchmark starts its own etcd and kube-apiserver (lab/lab.sh on free "
          "ports, data in WORKDIR/lab) so nothing else touches its nodes; --kubeconfig runs it "
          "against an existing API server instead.")
    parser.add_argument("--workload", action="append", metavar="NAME",
                        help="run only these workloads (repeat or comma-separate; a name before '/' "
                             "selects every size, e.g. SchedulingBasic)")
    parser.add_argument("--scheduler", action="append", metavar="NAME",
                        help=f"run only these schedulers: {', '.join(SCHEDULER_NAMES)}")
    parser.add_argument("--qps", action="append", metavar="PROFILE",
                        help="run only these clientConnection profiles: default (qps 50, burst 100), "
                             "unthrottled (5000/5000); by default each workload's own")
    parser.add_argument("--quick", action="store_true", help="only the quick workload (SchedulingBasic/500Nodes)")
    parser.add_argument("--kubeconfig", help="use this API server instead of starting a dedicated one")
    parser.add_argument("--keep-lab", action="store_true", help="leave the dedicated API server running")
    parser.add_argument("--results", default=RESULTS, help="results file to merge into (default: %(default)s)")
    parser.add_argument("--docs", default=DOCS, help="page whose generated table is rewritten (default: %(default)s)")
    parser.add_argument("--plot", default=PLOT, help="throughput plot (default: %(default)s)")
    parser.add_argument("--workdir", default=WORKDIR, help="scheduler configs and logs (default: %(default)s)")
    parser.add_argument("--run-timeout", type=float, default=600, metavar="SECONDS",
                        help="longest a single backlog run may take (default: %(default)s)")
    parser.add_argument("--pin-kubesched", action="store_true",
                        help="run kubesched as committed at HEAD (a copy in WORKDIR) instead of the working "
                             "tree, so edits made while the benchmark runs do not mix versions")
    parser.add_argument("--binder-concurrency", type=int, default=BINDER_CONCURRENCY, metavar="N",
                        help="bindings the raw binder keeps in flight (default: %(default)s)")
    parser.add_argument("--stop-after", type=float, metavar="MINUTES",
                        help="start no new run after this many minutes; what was measured is kept")
    parser.add_argument("--profile", action="store_true",
                        help="sample kubesched with py-spy during its runs and write where its time goes to "
                             "tests/bench/results/profile-<workload>.txt; profiled runs are not recorded")
    parser.add_argument("--list", action="store_true", help="print the runs that would be made and exit")
    parser.add_argument("--allow-busy", action="store_true",
                        help="measure even when the machine is busy; every record is then marked busy: true and "
                             "left out of the docs table and plot")
    parser.add_argument("--loop-only", action="store_true",
                        help="measure kubesched's scheduling loop alone, in-process, against a replayed watch and a "
                             "null API client (no API server); records carry qps profile 'loop-only'")
    parser.add_argument("--kubesched-feature-gates", metavar="NAME=BOOL,...",
                        help="run kubesched with these feature gates (e.g. OpportunisticBatching=false); its records "
                             "are named 'kubesched NAME=BOOL'")
    parser.add_argument("--max-load", type=float, default=MAX_LOAD_PER_CORE, metavar="PER_CORE",
                        help="a 1-minute load average above this per core counts as busy (default: %(default)s)")
    args = parser.parse_args(argv)
    args.scheduler = _split(args.scheduler) or (["kubesched"] if args.profile else list(SCHEDULER_NAMES))
    unknown = [name for name in args.scheduler if name not in SCHEDULER_NAMES]
    if unknown:
        parser.error(f"unknown --scheduler {', '.join(unknown)}; choose from {', '.join(SCHEDULER_NAMES)}")
    args.qps = _split(args.qps)
    unknown = [name for name in args.qps if name not in QPS_PROFILES]
    if unknown:
        parser.error(f"unknown --qps {', '.join(unknown)}; choose from {', '.join(QPS_PROFILES)}")
    try:
        args.workloads = select(_split(args.workload), args.quick)
    except ValueError as err:
        parser.error(str(err))
    if args.run_timeout <= 0:
        parser.error("--run-timeout must be a positive number of seconds")
    if args.binder_concurrency < 1:
        parser.error("--binder-concurrency must be at least 1")
    if args.stop_after is not None and args.stop_after <= 0:
        parser.error("--stop-after must be a positive number of minutes")
    if args.max_load <= 0:
        parser.error("--max-load must be a positive load average per core")
    try:
        args.kubesched_feature_gates = parse_gates(args.kubesched_feature_gates)
    except ValueError as err:
        parser.error(str(err))
    if args.loop_only:
        args.scheduler = ["kubesched"]
    return args


def parse_gates(text: str | None) -> dict[str, bool] | None:
    if not text:
        return None
    gates = {}
    for item in text.split(","):
        name, _sep, value = item.partition("=")
        if not name.strip() or value.strip().lower() not in ("true", "false"):
            raise ValueError(f"--kubesched-feature-gates: {item!r} is not NAME=true or NAME=false")
        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def plan(args: argparse.Namespace) -> list[tuple]:
    if args.loop_only:
        return [(workload, "kubesched", LOOP_ONLY) for workload in args.workloads]
    runs = []
    for workload in args.workloads:
        profiles = [p for p in workload.qps_profiles if not args.qps or p in args.qps]
        if args.qps and not profiles and workload.mode == "backlog":
            profiles = args.qps
        for profile in profiles:
            runs.extend((workload, scheduler, profile) for scheduler in args.scheduler)
    return runs


def profile_run(context: RunContext, workload, qps_profile: str, label: str, results_dir: str) -> None:
    slug = workload.name.replace("/", "-")
    raw = os.path.join(context.workdir, f"profile-{slug}.raw")
    record = run_one(context, workload, "kubesched", qps_profile, label, profile_output=raw)
    os.makedirs(results_dir, exist_ok=True)
    summary = os.path.join(results_dir, f"profile-{slug}.txt")
    with open(summary, "w") as handle:
        handle.write(f"kubesched on {workload.name}, qps profile {qps_profile}, sampled by py-spy "
                     f"(commit {record['commit']}, {record['date']}).\n{format_record(record)}\n\n")
        handle.write(summarise(raw))
    context.progress.log(f"{label}: profile written to {os.path.relpath(summary)}")


def loop_only(args: argparse.Namespace, runs: list[tuple], progress: Progress, monitor: LoadMonitor,
              start_load) -> int:
    """--loop-only: each workload the replay supports, in its own interpreter (tests/bench/loop.py)."""
    context = RunContext(None, NAMESPACE, args.workdir, None, progress, args.run_timeout)
    context.load_monitor, context.start_load, context.allow_busy = monitor, start_load, args.allow_busy
    commit = git_commit(pinned=False)
    records: list[dict] = []
    started = time.monotonic()
    for index, (workload, _scheduler, _profile) in enumerate(runs, 1):
        label = f"[{index}/{len(runs)}] {workload.name} kubesched {LOOP_ONLY}"
        reason = unsupported_reason(workload)
        if reason:
            progress.log(f"{label}: skipped: {reason}")
            continue
        if args.stop_after and time.monotonic() - started > args.stop_after * 60:
            progress.log(f"bench: --stop-after {args.stop_after:g} minutes reached")
            break
        progress.log(f"{label}: replaying {workload.node_count} nodes and {workload.pods} pods")
        monitor.reset_run()
        done = threading.Event()

        def sample(finished: threading.Event = done) -> None:
            while not finished.wait(2.0):
                monitor.sample_run()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            record = run_loop_apart(workload.name, SCHEDULER_NAME, NAMESPACE, args.kubesched_feature_gates)
        finally:
            done.set()
            sampler.join()
        record.update(load_fields(context), commit=commit,
                      scheduler=scheduler_label("kubesched", args.kubesched_feature_gates))
        progress.log(f"{label}: {record['bound']}/{record['pods']} bound, {record['pods_per_s']} pods/s, "
                     f"{record['cpu_ms_per_pod']} ms CPU per pod, peak rss {record['peak_rss_mb']} MB"
                     + (" [BUSY machine: not comparable]" if record["busy"] else ""))
        records.append(record)
        merge_results(args.results, records)
    if records:
        document = merge_results(args.results, records)
        write_docs(args.docs, document)
        progress.log(f"bench: {len(records)} loop-only runs; results in {os.path.relpath(args.results)}, "
                     f"table in {os.path.relpath(args.docs)}")
    return 0 if records and all(r["complete"] for r in records) else 1


def _interrupt_on_sigterm(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = plan(args)
    if args.list:
        for workload, scheduler, profile in runs:
            print(f"{workload.name}  {scheduler}  {profile}")
        return 0
    progress = Progress()
    # The run's own processes never count as busy: the bench's children, and the lab, whose
    # command lines name its directory.
    monitor = LoadMonitor(ours=[os.path.abspath(args.workdir)]
                          + ([os.path.dirname(os.path.abspath(args.kubeconfig))] if args.kubeconfig else []),
                          max_load_per_core=args.max_load)
    start_load = monitor.check()
    if start_load.busy and not args.allow_busy:
        print(refusal_message(start_load), file=sys.stderr)
        return 2
    progress.log(f"bench: load average {start_load.load1:.2f}"
                 + (f"; busy, measuring anyway (--allow-busy): {'; '.join(start_load.reasons())}"
                    if start_load.busy else ", no other busy process"))
    if args.loop_only:
        return loop_only(args, runs, progress, monitor, start_load)
    skipped = {name: reason for name in args.scheduler if (reason := available(name))}
    for name, reason in skipped.items():
        progress.log(f"bench: skipping {name}: {reason}")
    runs = [run for run in runs if run[1] not in skipped]
    if not runs:
        progress.log("bench: nothing to run")
        return 1
    os.makedirs(args.workdir, exist_ok=True)
    # Static nodes send no heartbeat: no node lifecycle controller and no kwok on the bench's
    # own lab, only the controllers pods need (docs/performance.md, "Static nodes"), and those
    # a selected workload names (the resourceclaim controller for claims from templates).
    controllers = ["serviceaccount", "namespace"]
    for workload, _scheduler, _profile in runs:
        controllers += [c for c in workload.controllers if c not in controllers]
    lab = None if args.kubeconfig else PrivateLab.on_free_ports(
        os.path.join(args.workdir, "lab"), LAB_KCM_CONTROLLERS=",".join(controllers),
        # kcm's default 20 QPS made a claim every 100 ms: as fast as scheduler_perf's in-process controller.
        LAB_KCM_API_QPS="5000", LAB_KWOK="0")
    cluster = Cluster(args.kubeconfig) if args.kubeconfig else None
    if lab:
        progress.log(f"bench: the runs use their own etcd + kube-apiserver (lab/lab.sh, data in {lab.directory})")
    context = RunContext(cluster, NAMESPACE, args.workdir, cluster and NodeSet(cluster), progress,
                         args.run_timeout, lab)
    context.binder_concurrency = args.binder_concurrency
    context.kubesched_feature_gates = args.kubesched_feature_gates
    context.load_monitor, context.start_load, context.allow_busy = monitor, start_load, args.allow_busy
    if args.pin_kubesched and "kubesched" in args.scheduler:
        context.kubesched_source = pin_kubesched(args.workdir)
        progress.log(f"bench: kubesched runs from {context.kubesched_source}")
    context.commit = git_commit(pinned=context.kubesched_source is not None)
    records: list[dict] = []
    failures: list[str] = []
    started = time.monotonic()
    # `kill` (a CI timeout, a user's pkill) tears the lab down as Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        for index, (workload, scheduler, profile) in enumerate(runs, 1):
            label = f"[{index}/{len(runs)}] {workload.name} {scheduler} {profile}"
            if args.stop_after and time.monotonic() - started > args.stop_after * 60:
                progress.log(f"bench: --stop-after {args.stop_after:g} minutes reached; "
                             f"{len(runs) - index + 1} runs not started")
                break
            if args.profile and scheduler == "kubesched":
                profile_run(context, workload, profile, label, os.path.dirname(os.path.abspath(args.results)))
                continue
            try:
                records.append(run_one(context, workload, scheduler, profile, label))
            except Exception as err:  # noqa: BLE001 - reported below; the remaining runs go on
                # One broken run (a scheduler that never starts, an API server that will not
                # come back) is reported and the rest still run, from a freshly built state.
                failures.append(f"{workload.name} {scheduler} {profile}: {err}")
                progress.log(f"{label}: FAILED: {err!r}")
                context.saved_workload = None
                continue
            # Results are saved after every run, so an interrupted bench keeps what it measured.
            merge_results(args.results, records)
    except KeyboardInterrupt:
        progress.log("bench: interrupted")
        return 130
    finally:
        if lab and not args.keep_lab:
            lab.remove()
        elif not lab:
            remove_cluster_objects(context.cluster, NAMESPACE)
        if records:
            document = merge_results(args.results, records)
            write_docs(args.docs, document)
            write_plot(args.plot, document)
            progress.log(f"bench: {len(records)} runs in {time.monotonic() - started:.0f} s; results in "
                         f"{os.path.relpath(args.results)}, table in {os.path.relpath(args.docs)}, "
                         f"plot in {os.path.relpath(args.plot)}")
    incomplete = [r for r in records if not r["complete"]]
    for record in incomplete:
        progress.log(f"bench: incomplete: {record['workload']} {record['scheduler']} {record['qps_profile']}: "
                     f"{record.get('failure', '')}")
    for failure in failures:
        progress.log(f"bench: failed: {failure}")
    return 1 if incomplete or failures else 0


if __name__ == "__main__":
    sys.exit(main())
