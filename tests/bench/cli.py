"""`python -m tests.bench` (`make bench`): run the workloads against each scheduler and write
tests/bench/results/latest.json, the table in docs/performance.md and the throughput plot."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Callable

from lab.binaries import K8S_VERSION
from lab.cluster import Cluster
from lab.private_lab import ROOT, PrivateLab
from tests.bench.load import (
    MAX_LOAD_PER_CORE,
    MAX_OTHER_BURST_CORES,
    MAX_OTHER_CORES,
    QUIET_WAIT_S,
    RUN_SAMPLE_S,
    LoadMonitor,
    become_subreaper,
    pid_file_processes,
    refusal_message,
)
from tests.bench.loop import LOOP_ONLY, apart, run_loop_apart, unsupported_reason
from tests.bench.micro import whatif as whatif_bench
from tests.bench.objects import NodeSet, remove_cluster_objects
from tests.bench.profile import summarise
from tests.bench.report import estimate_seconds, merge_results, read_results, write_docs, write_plot
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
    feature_gates_text,
    pin_kubesched,
    scheduler_label,
)
from tests.bench.workloads import WHATIF_MODE, WHATIF_SIZE, WHATIF_WORKLOAD, WORKLOADS, is_whatif_name, select

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
        + f", and {WHATIF_WORKLOAD} (kubesched whatif, in-process, no API server). By default the "
          "benchmark starts its own etcd and kube-apiserver (lab/lab.sh on free ports, data in WORKDIR/lab) "
          "so nothing else touches its nodes; --kubeconfig runs it against an existing API server instead.")
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
                        help="before the bench starts, a 1-minute load average above this per core counts as busy "
                             "(default: %(default)s)")
    parser.add_argument("--max-other-cpu", type=float, default=MAX_OTHER_CORES, metavar="CORES",
                        help="a run (or the check before the bench) in which processes outside the run used more "
                             "than this many cores on average is busy (default: %(default)s)")
    parser.add_argument("--max-burst-cpu", type=float, default=MAX_OTHER_BURST_CORES, metavar="CORES",
                        help=f"a run in which processes outside it used more than this many cores over any "
                             f"{RUN_SAMPLE_S:g}-s interval is busy (default: %(default)s)")
    parser.add_argument("--busy-retries", type=int, default=2, metavar="N",
                        help="measure a run that other processes disturbed again, once the machine is quiet, up to "
                             "N times (default: %(default)s); a run still disturbed is kept marked busy and the "
                             "bench exits 1")
    parser.add_argument("--report", action="store_true",
                        help="measure nothing: render the docs page from the results file")
    args = parser.parse_args(argv)
    args.scheduler = _split(args.scheduler) or (["kubesched"] if args.profile else list(SCHEDULER_NAMES))
    unknown = [name for name in args.scheduler if name not in SCHEDULER_NAMES]
    if unknown:
        parser.error(f"unknown --scheduler {', '.join(unknown)}; choose from {', '.join(SCHEDULER_NAMES)}")
    args.qps = _split(args.qps)
    unknown = [name for name in args.qps if name not in QPS_PROFILES]
    if unknown:
        parser.error(f"unknown --qps {', '.join(unknown)}; choose from {', '.join(QPS_PROFILES)}")
    named = _split(args.workload)
    lab_named = [name for name in named if not is_whatif_name(name)]
    # The what-if runs in-process: with every workload, or when named; not in the quick, loop-only or
    # profile modes, nor without kubesched.
    args.whatif = (len(lab_named) < len(named) or not named) and "kubesched" in args.scheduler \
        and not (args.quick or args.loop_only or args.profile)
    try:
        args.workloads = select(lab_named, args.quick) if lab_named or not named else []
    except ValueError as err:
        parser.error(str(err))
    if args.whatif and not args.workloads:
        args.scheduler = ["kubesched"]
    gated = [w.name for w in args.workloads if w.api_runtime_config]
    if args.kubeconfig and gated and not args.loop_only:
        parser.error(f"{', '.join(gated)} need(s) an API server with their feature gates and API versions, which the "
                     "bench's own lab gets: run them without --kubeconfig")
    if args.run_timeout <= 0:
        parser.error("--run-timeout must be a positive number of seconds")
    if args.binder_concurrency < 1:
        parser.error("--binder-concurrency must be at least 1")
    if args.stop_after is not None and args.stop_after <= 0:
        parser.error("--stop-after must be a positive number of minutes")
    if args.max_load <= 0:
        parser.error("--max-load must be a positive load average per core")
    if args.max_other_cpu <= 0 or args.max_burst_cpu <= 0:
        parser.error("--max-other-cpu and --max-burst-cpu must be positive numbers of cores")
    if args.busy_retries < 0:
        parser.error("--busy-retries must be 0 or more")
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


def measure_apart(context: RunContext, measure: Callable[[], dict]) -> dict:
    """measure() (a run in its own interpreter) while the load monitor watches the machine: its
    record, with the load it ran under, the commit and the session."""
    monitor = context.load_monitor
    monitor.start_run()
    done = threading.Event()

    def sample(finished: threading.Event = done) -> None:
        while not finished.wait(RUN_SAMPLE_S):
            monitor.sample_run()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        record = measure()
    finally:
        done.set()
        sampler.join()
        monitor.sample_run()
    record.update(load_fields(context), commit=context.commit, session=context.session)
    return record


def loop_only(args: argparse.Namespace, runs: list[tuple], progress: Progress, context: RunContext) -> int:
    """--loop-only: each workload the replay supports, in its own interpreter (tests/bench/loop.py)."""
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
        record = measure_apart(context, lambda name=workload.name: run_loop_apart(
            name, SCHEDULER_NAME, NAMESPACE, args.kubesched_feature_gates))
        record["scheduler"] = scheduler_label("kubesched", args.kubesched_feature_gates)
        progress.log(f"{label}: {record['bound']}/{record['pods']} bound, {record['pods_per_s']} pods/s, "
                     f"{record['cpu_ms_per_pod']} ms CPU per pod, peak rss {record['peak_rss_mb']} MB"
                     + (" [BUSY machine: not comparable]" if record["busy"] else ""))
        records.append(record)
        merge_results(args.results, records)
    if records:
        document = merge_results(args.results, records, session_record(context, args, started))
        write_docs(args.docs, document)
        progress.log(f"bench: {len(records)} loop-only runs; results in {os.path.relpath(args.results)}, "
                     f"table in {os.path.relpath(args.docs)}")
    return 0 if records and all(r["complete"] for r in records) else 1


def measure_whatif(context: RunContext, args: argparse.Namespace) -> dict:
    """The what-if at scale (tests/bench/micro/whatif.py), in its own interpreter: the working
    tree's kubesched, measured again once the machine is quiet if others disturbed it."""
    label = f"{WHATIF_WORKLOAD} kubesched {WHATIF_MODE}"
    context.progress.log(f"{label}: a what-if of {WHATIF_SIZE['nodes']} nodes and {WHATIF_SIZE['running']} running "
                         "pods, in-process (no API server)")
    record = until_quiet(context, args, label, lambda: measure_apart(context, lambda: apart(whatif_bench.run)))
    context.progress.log(f"{label}: {record['wall_s']} s wall, {record['cpu_s']} s CPU, peak rss "
                         f"{record['peak_rss_mb']} MB" + (" [BUSY machine: not comparable]" if record["busy"] else ""))
    return record


def _interrupt_on_sigterm(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def session_record(context: RunContext, args: argparse.Namespace, started: float) -> dict:
    """What the results file keeps of a session: when, at which commit, how long, the settings
    its records were judged by, and the CPU other processes used over the whole of it."""
    whole = context.load_monitor.session_report()
    return {"id": context.session, "commit": context.commit, "seconds": round(time.monotonic() - started),
            "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "workloads": sorted({workload.name for workload, _scheduler, _profile in plan(args)}
                                | ({WHATIF_WORKLOAD} if args.whatif else set())),
            "schedulers": list(args.scheduler), "allow_busy": args.allow_busy,
            "pinned_kubesched": context.kubesched_source is not None,
            "settings": {"max_load_per_core": args.max_load, "max_other_cores": args.max_other_cpu,
                         "max_burst_cores": args.max_burst_cpu, "sample_s": RUN_SAMPLE_S,
                         "binder_concurrency": args.binder_concurrency, "kube_scheduler": K8S_VERSION,
                         "subreaper": context.subreaper},
            "start": context.start_load.as_record() if context.start_load else None,
            "whole": whole.window.as_record() if whole else None}


def missing_schedulers(names: list[str]) -> str | None:
    """None when every scheduler asked for can run, else the error that says which cannot and why."""
    missing = {name: reason for name in names if (reason := available(name))}
    if not missing:
        return None
    runnable = [name for name in names if name not in missing]
    return ("bench: cannot run " + ", ".join(missing) + ":\n  - "
            + "\n  - ".join(f"{name}: {reason}" for name, reason in missing.items())
            + "\nRun 'make setup' to build what is missing"
            + (f", or leave it out with --scheduler {','.join(runnable)}." if runnable else "."))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        document = read_results(args.results)
        write_docs(args.docs, document)
        print(f"bench: {os.path.relpath(args.docs)} rendered from {os.path.relpath(args.results)}")
        return 0
    runs = plan(args)
    previous = read_results(args.results)["records"]
    estimate = estimate_seconds(runs, previous)
    if args.whatif:
        runs_whatif = [r for r in previous if r["workload"] == WHATIF_WORKLOAD]
        estimate += (runs_whatif[0]["wall_s"] if runs_whatif else 60) + 10
    if args.list:
        for workload, scheduler, profile in runs:
            print(f"{workload.name}  {scheduler}  {profile}")
        if args.whatif:
            print(f"{WHATIF_WORKLOAD}  kubesched  {WHATIF_MODE}")
        print(f"{len(runs) + args.whatif} runs, about {estimate / 60:.0f} minutes on this machine")
        return 0
    if runs and not args.loop_only:
        problem = missing_schedulers(args.scheduler)
        if problem:
            print(problem, file=sys.stderr)
            return 2
    progress = Progress()
    progress.log(f"bench: {len(runs) + args.whatif} runs, about {estimate / 60:.0f} minutes (from the durations in "
                 f"{os.path.relpath(args.results)} where it has the run, else from the workload's size)")
    subreaper = become_subreaper()
    # The run's own processes are this process's tree; a lab started elsewhere (--kubeconfig)
    # is its own by the pid files lab.sh keeps beside its kubeconfig.
    monitor = LoadMonitor(extra_roots=pid_file_processes(os.path.dirname(os.path.abspath(args.kubeconfig)))
                          if args.kubeconfig else (lambda: ()),
                          max_load_per_core=args.max_load, max_other_cores=args.max_other_cpu,
                          max_burst_cores=args.max_burst_cpu)
    monitor.start_session()
    start_load = monitor.check()
    if start_load.busy and not args.allow_busy:
        print(refusal_message(start_load), file=sys.stderr)
        return 2
    progress.log(f"bench: load average {start_load.load1:.2f}, other processes {start_load.window.other_cores:.2f} "
                 "cores" + (f"; busy, measuring anyway (--allow-busy): {'; '.join(start_load.reasons())}"
                            if start_load.busy else ""))
    if not subreaper:
        progress.log("bench: this kernel refuses PR_SET_CHILD_SUBREAPER: the lab's processes are counted while "
                     "they run, and CPU they spend just before exiting counts as other processes'")
    started = time.monotonic()
    context = RunContext(None, NAMESPACE, args.workdir, None, progress, args.run_timeout)
    context.load_monitor, context.start_load, context.allow_busy = monitor, start_load, args.allow_busy
    context.session = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") + f"-{os.getpid()}"
    context.subreaper = subreaper
    if args.loop_only:
        context.commit = git_commit(pinned=False)
        return loop_only(args, runs, progress, context)
    records: list[dict] = []
    if args.whatif:
        context.commit = git_commit(pinned=False)
        records.append(measure_whatif(context, args))
        merge_results(args.results, records)
        if not runs:
            document = merge_results(args.results, records, session_record(context, args, started))
            write_docs(args.docs, document)
            progress.log(f"bench: results in {os.path.relpath(args.results)}, table in {os.path.relpath(args.docs)}")
            return 0 if records[0]["complete"] and (args.allow_busy or not records[0]["busy"]) else 1
    os.makedirs(args.workdir, exist_ok=True)
    # Static nodes send no heartbeat: no node lifecycle controller and no kwok on the bench's
    # own lab, only the controllers pods need (docs/performance.md, "Static nodes"), and those
    # a selected workload names (the resourceclaim controller for claims from templates).
    controllers = ["serviceaccount", "namespace"]
    for workload, _scheduler, _profile in runs:
        controllers += [c for c in workload.controllers if c not in controllers]
    # The gates and API versions a selected workload needs (GenericWorkload and PodGroups for the
    # gangs) are the API server's and kube-controller-manager's for the whole session.
    lab_gates = sorted({gate for workload, _s, _p in runs for gate in workload.feature_gates})
    runtime_config = sorted({workload.api_runtime_config for workload, _s, _p in runs if workload.api_runtime_config})
    lab = None if args.kubeconfig else PrivateLab.on_free_ports(
        os.path.join(args.workdir, "lab"), LAB_KCM_CONTROLLERS=",".join(controllers),
        # kcm's default 20 QPS made a claim every 100 ms: as fast as scheduler_perf's in-process controller.
        LAB_KCM_API_QPS="5000", LAB_KWOK="0",
        LAB_FEATURE_GATES=feature_gates_text(dict(lab_gates)), LAB_RUNTIME_CONFIG=",".join(runtime_config))
    cluster = Cluster(args.kubeconfig) if args.kubeconfig else None
    if lab:
        progress.log(f"bench: the runs use their own etcd + kube-apiserver (lab/lab.sh, data in {lab.directory})")
    context.cluster, context.nodes, context.lab = cluster, cluster and NodeSet(cluster), lab
    context.binder_concurrency = args.binder_concurrency
    context.kubesched_feature_gates = args.kubesched_feature_gates
    if args.pin_kubesched and "kubesched" in args.scheduler:
        context.kubesched_source = pin_kubesched(args.workdir)
        progress.log(f"bench: kubesched runs from {context.kubesched_source}")
    context.commit = git_commit(pinned=context.kubesched_source is not None)
    failures: list[str] = []
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
                record = measure_until_quiet(context, args, workload, scheduler, profile, label)
            except Exception as err:  # noqa: BLE001 - reported below; the remaining runs go on
                # One broken run (a scheduler that never starts, an API server that will not
                # come back) is reported and the rest still run, from a freshly built state.
                failures.append(f"{workload.name} {scheduler} {profile}: {err}")
                progress.log(f"{label}: FAILED: {err!r}")
                context.saved_workload = None
                continue
            records.append(record)
            # Results are saved after every run, so an interrupted bench keeps what it measured.
            merge_results(args.results, records)
    except KeyboardInterrupt:
        progress.log("bench: interrupted")
        return 130
    finally:
        if lab and not args.keep_lab:
            lab.remove()
        elif not lab:
            remove_cluster_objects(context.cluster, NAMESPACE, [(w.objects(NAMESPACE), w.made_for_pods(NAMESPACE))
                                                                for w in args.workloads])
        if records:
            document = merge_results(args.results, records, session_record(context, args, started))
            write_docs(args.docs, document)
            write_plot(args.plot, document)
            progress.log(f"bench: {len(records)} runs in {(time.monotonic() - started) / 60:.0f} minutes; results "
                         f"in {os.path.relpath(args.results)}, table in {os.path.relpath(args.docs)}, plot in "
                         f"{os.path.relpath(args.plot)}")
    incomplete = [r for r in records if not r["complete"]]
    for record in incomplete:
        progress.log(f"bench: incomplete: {record['workload']} {record['scheduler']} {record['qps_profile']}: "
                     f"{record.get('failure', '')}")
    disturbed = [r for r in records if r["busy"]] if not args.allow_busy else []
    for record in disturbed:
        progress.log(f"bench: measured while others used the machine, left out of the docs: {record['workload']} "
                     f"{record['scheduler']} {record['qps_profile']}: {'; '.join(record['load']['during']['reasons'])}")
    if disturbed:
        again = sorted({r["workload"] for r in disturbed})
        progress.log(f"bench: measure them again on a quiet machine: python -m tests.bench --workload {','.join(again)}")
    for failure in failures:
        progress.log(f"bench: failed: {failure}")
    return 1 if incomplete or failures or disturbed else 0


def measure_until_quiet(context: RunContext, args: argparse.Namespace, workload, scheduler: str, profile: str,
                        label: str) -> dict:
    """One run; a run other processes disturbed is measured again once the machine is quiet,
    up to --busy-retries times, so one command gives a comparable session."""
    return until_quiet(context, args, label, lambda: run_one(context, workload, scheduler, profile, label))


def until_quiet(context: RunContext, args: argparse.Namespace, label: str, measure: Callable[[], dict]) -> dict:
    """measure() until a run is quiet (or --allow-busy), at most --busy-retries times more."""
    for attempt in range(args.busy_retries + 1):
        record = measure()
        if not record["busy"] or args.allow_busy or attempt == args.busy_retries:
            return record
        context.progress.log(f"{label}: others used the machine during the run: "
                             f"{'; '.join(record['load']['during']['reasons'])}; measuring it again once it is quiet")
        context.load_monitor.wait_until_quiet(QUIET_WAIT_S, lambda report: context.progress.log(
            f"{label}: still busy: {'; '.join(report.reasons())}"))
    return record


if __name__ == "__main__":
    sys.exit(main())
