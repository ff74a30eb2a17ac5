"""Results: tests/bench/results/latest.json, the generated parts of docs/performance.md and
the throughput plot.

Every figure the page shows about a measurement comes from the results file through this
module: the tables, the targets, how long a session takes, and the sentences that read
them. Two records are compared (a ratio, a target) only when one session measured both at
one commit; records measured while other processes used the machine, or judged by the
bench's earlier check that could not see short-lived processes, are left out and named.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from typing import Callable

from tests.bench.schedulers import SCHEDULER_NAMES
from tests.bench.workloads import WHATIF_MODE, WHATIF_TARGET_MB, WHATIF_TARGET_S, WHATIF_WORKLOAD, WORKLOADS

QPS_ORDER = ("unthrottled", "default")


def begin_marker(block: str) -> str:
    return f"<!-- BEGIN GENERATED {block} by `make bench` (tests/bench/report.py): do not edit by hand -->"


def end_marker(block: str) -> str:
    return f"<!-- END GENERATED {block} -->"


TABLE_BEGIN, TABLE_END = begin_marker("results"), end_marker("results")


def _key(record: dict) -> tuple:
    return record["workload"], record["scheduler"], record["qps_profile"]


def _order(record: dict) -> tuple:
    names = [w.name for w in WORKLOADS]
    workload = names.index(record["workload"]) if record["workload"] in names else len(names)
    scheduler = SCHEDULER_NAMES.index(record["scheduler"]) if record["scheduler"] in SCHEDULER_NAMES else 9
    qps = QPS_ORDER.index(record["qps_profile"]) if record["qps_profile"] in QPS_ORDER else 9
    return workload, record["workload"], qps, scheduler


def host_facts() -> dict:
    with open("/proc/meminfo") as handle:
        mem_kb = int(handle.readline().split()[1])
    return {"cpus": os.cpu_count(), "memory_gib": round(mem_kb / 2**20, 1), "python": platform.python_version(),
            "kernel": platform.release()}


def read_results(path: str) -> dict:
    if not os.path.exists(path):
        return {"generated": "", "host": host_facts(), "sessions": {}, "records": []}
    with open(path) as handle:
        document = json.load(handle)
    document.setdefault("sessions", {})
    return document


def merge_results(path: str, records: list[dict], session: dict | None = None) -> dict:
    """New records replace the ones of the same workload, scheduler and qps profile, so a
    partial run (--workload, --scheduler) refreshes only what it measured. Records of
    workloads the bench no longer has are dropped, and so are sessions no record names."""
    document = read_results(path)
    fresh = {_key(record) for record in records}
    known = {w.name for w in WORKLOADS} | {WHATIF_WORKLOAD}
    merged = sorted([r for r in document["records"] if _key(r) not in fresh and r["workload"] in known] + records,
                    key=_order)
    sessions = dict(document["sessions"])
    if session:
        sessions[session["id"]] = session
    named = {r.get("session") for r in merged}
    document = {
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_facts(),
        "sessions": {key: value for key, value in sorted(sessions.items()) if key in named},
        "records": merged,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    return document


# Before a workload has a record with its durations: how fast the harness builds a state and
# a scheduler binds, round figures from the correctness runs of the scheduler_perf workloads on
# this 2-core machine while other work shared it (nodes created: 15,001 in 163 s, 5,000 in
# 33-85 s; pending pods created: 50,000 in 314 s, 30,000 in 81 s; a saved state restored in
# 5-62 s; the slowest scheduler of a workload bound 20-188 pods/s). A quiet machine is faster.
NODES_CREATED_PER_S = 100
PODS_CREATED_PER_S = 250
PODS_BOUND_PER_S = 100
RESTORE_S = 20


def estimate_seconds(runs: list[tuple], records: list[dict]) -> float:
    """How long a plan of (workload, scheduler, qps profile) runs takes: each run's own last
    duration where the results have it (the state built once per workload, restored for each
    later run), else the workload's size at the rates above."""
    by_key = {_key(r): r for r in records}
    total, built = 0.0, set()
    for workload, scheduler, profile in runs:
        previous = [r for r in records if r["workload"] == workload.name and r.get("prepare_s") is not None]
        if workload.name not in built:
            built.add(workload.name)
            total += max((r["prepare_s"] for r in previous), default=None) or (
                workload.node_count / NODES_CREATED_PER_S
                + (workload.init_pods + workload.pods + sum(n for n, _b in workload.unmeasured_pods))
                / PODS_CREATED_PER_S)
        else:
            total += min((r["prepare_s"] for r in previous), default=None) or RESTORE_S
        record = by_key.get((workload.name, scheduler, profile))
        if record and record.get("run_s"):
            total += record["run_s"]
        elif record and record.get("makespan_s"):
            total += record["makespan_s"] + 5
        else:
            total += 10 + workload.pods / PODS_BOUND_PER_S
    return total


def _cell(value, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def judged_by_machine_clock(record: dict) -> bool:
    """The run was judged by the CPU other processes spent during it (tests/bench/load.py),
    not only by the processes a periodic sample happened to see."""
    during = (record.get("load") or {}).get("during") or {}
    return "other_cpu_s" in during


def is_quiet(record: dict) -> bool:
    """Measured on a quiet machine, as the machine's CPU clock judged it."""
    return record.get("busy") is False and judged_by_machine_clock(record)


def same_session(first: dict, second: dict) -> bool:
    """One session measured both, at one commit: the only records a ratio may pair."""
    return bool(first.get("session")) and first.get("session") == second.get("session") \
        and first.get("commit") == second.get("commit")


def _find(records: list[dict], workload: str, scheduler: str, qps_profile: str = "unthrottled") -> dict | None:
    return next((r for r in records if r["workload"] == workload and r["scheduler"] == scheduler
                 and r["qps_profile"] == qps_profile), None)


def _pair(records: list[dict], workload: str, first: str, second: str,
          qps_profile: str = "unthrottled") -> tuple[dict, dict] | None:
    one, other = _find(records, workload, first, qps_profile), _find(records, workload, second, qps_profile)
    return (one, other) if one and other and same_session(one, other) else None


def _quotient(pair: tuple[dict, dict] | None, field: str = "pods_per_s") -> float | None:
    if not pair or not pair[0].get(field) or not pair[1].get(field):
        return None
    return pair[0][field] / pair[1][field]


def _ratio_cell(records: list[dict], workload: str, numerator: str, denominator: str,
                qps_profile: str = "unthrottled", field: str = "pods_per_s") -> str:
    """The quotient of two schedulers' figures; † when their records come from different
    sessions or commits, – when one is missing."""
    one, other = _find(records, workload, numerator, qps_profile), _find(records, workload, denominator, qps_profile)
    if one and other and not same_session(one, other):
        return "†"
    ratio = _quotient((one, other) if one and other else None, field)
    return "–" if ratio is None else f"{ratio:.2f}"


def _load_cell(record: dict) -> str:
    during = (record.get("load") or {}).get("during") or {}
    return (f"{during.get('min_load1', '–')}–{during.get('max_load1', '–')} / "
            f"{during.get('other_cpu_s', '–')} s")


def session_labels(document: dict, records: list[dict]) -> dict[str, str]:
    """S1, S2, ... for the sessions the records come from, oldest first."""
    ids = sorted({r.get("session") or "" for r in records} - {""})
    return {session: f"S{index}" for index, session in enumerate(ids, 1)}


def _session_line(document: dict, labels: dict[str, str]) -> list[str]:
    lines = []
    for session, label in labels.items():
        info = document["sessions"].get(session) or {}
        whole = info.get("whole") or {}
        length = f", {info['seconds'] / 60:.0f} minutes" if info.get("seconds") else ""
        others = (f", other processes {whole['other_cpu_s']:.0f} CPU-s over the whole session"
                  if "other_cpu_s" in whole else "")
        lines.append(f"- {label}: started {session.rsplit('-', 1)[0]}, commit {info.get('commit', '–')}{length}{others}")
    return lines


def _excluded_note(excluded: list[dict]) -> list[str]:
    if not excluded:
        return []
    old = [r for r in excluded if not judged_by_machine_clock(r)]
    busy = [r for r in excluded if judged_by_machine_clock(r)]
    lines = [""]
    if busy:
        names = ", ".join(f"{r['workload']} {r['scheduler']} {r['qps_profile']}" for r in busy)
        lines.append(f"**Left out: {len(busy)} record(s) measured while other processes used the machine** "
                     f"({names}); they stay in `tests/bench/results/latest.json` with `busy: true` and what the "
                     "machine did (`load.during`). Measure them again on a quiet machine.")
    if old:
        workloads = sorted({r["workload"] for r in old},
                           key=lambda name: _order({"workload": name, "scheduler": "", "qps_profile": ""}))
        lines.append(f"**Left out: {len(old)} record(s) judged only by sampling processes every two seconds**, which "
                     f"cannot see short-lived ones, of these workloads: {', '.join(workloads)}. Measure them again.")
    return lines


def is_loop_only(record: dict) -> bool:
    return record.get("mode") == "loop-only"


def _records_table(intro: str, columns: list[tuple[str, Callable[[dict], str]]], records: list[dict]) -> list[str]:
    """intro, then one row per record, a column being (header, the record's cell): the first two
    columns and the last (the load) are text, the others figures."""
    if not records:
        return []
    align = ["---", "---"] + ["---:"] * (len(columns) - 3) + ["---"]
    return ["", intro, "", "| " + " | ".join(header for header, _cell_of in columns) + " |", f"|{'|'.join(align)}|",
            *("| " + " | ".join(cell_of(r) for _header, cell_of in columns) + " |" for r in records)]


def _complete_cell(field: str) -> Callable[[dict], str]:
    return lambda r: _cell(r[field]) + ("" if r["complete"] else " ⚠")


def loop_table(records: list[dict]) -> list[str]:
    """The scheduling loop alone (`--loop-only`): kubesched's own ceiling, API work excluded."""
    return _records_table(
        "The scheduling loop alone (`python -m tests.bench --loop-only`, API work excluded; method below):",
        [("workload", lambda r: r["workload"]), ("scheduler", lambda r: r["scheduler"]),
         ("nodes", lambda r: _cell(r["nodes"])), ("pods", lambda r: _cell(r["pods"])), ("bound", _complete_cell("bound")),
         ("pods/s", lambda r: _cell(r["pods_per_s"], 1)), ("CPU ms/pod", lambda r: _cell(r["cpu_ms_per_pod"], 3)),
         ("CPU s", lambda r: _cell(r["cpu_s"], 1)), ("peak RSS MB", lambda r: _cell(r["peak_rss_mb"])),
         ("load", _load_cell)], records)


def is_whatif(record: dict) -> bool:
    return record.get("mode") == WHATIF_MODE


def whatif_table(records: list[dict], labels: dict[str, str]) -> list[str]:
    """`kubesched whatif` at scale: both configurations re-place every running pod."""
    return _records_table(
        "`kubesched whatif` on a generated cluster (scheduler_perf's node-default nodes, pod-default pods bound "
        "round-robin, a few pending; NodeResourcesFit LeastAllocated → MostAllocated), in one process with no API "
        "server (`python -m tests.bench --workload WhatIf`): every running pod is re-placed under both "
        "configurations.",
        [("workload", lambda r: r["workload"]), ("session", lambda r: labels.get(r.get("session") or "", "–")),
         ("nodes", lambda r: _cell(r["nodes"])), ("running pods re-placed", _complete_cell("replaced")),
         ("pending pods", lambda r: _cell(r["pending"])), ("moved", lambda r: _cell(r["moved"])),
         ("wall s", lambda r: _cell(r["wall_s"], 1)), ("CPU s", lambda r: _cell(r["cpu_s"], 1)),
         ("peak RSS MB", lambda r: _cell(r["peak_rss_mb"])), ("load", _load_cell)], records)


HEADLINE = "SchedulingBasic/5000Nodes_10000Pods"
# The targets of the performance issues, judged from the records (never typed by hand).
RATIO_TARGET_WORKLOADS = (
    HEADLINE, "SchedulingNodeAffinity/5000Nodes", "TopologySpreading/1000Nodes",
    "SchedulingPodAntiAffinity/1000Nodes", "Preemption/500Nodes", "SchedulingCSIPVs/1000Nodes",
    "SchedulingWithResourceClaimTemplate/500Nodes", "SchedulingBasic/15000Nodes",
)


def _target_rows(records: list[dict]) -> list[tuple[str, str, bool | None]]:
    """(target, the figure it was judged on, met) for every target that has its records; met is
    None when the records it needs come from different sessions."""
    rows: list[tuple[str, str, bool | None]] = []

    def add(target: str, value: float | None, shown: str, bound: float, higher: bool) -> None:
        met = None if value is None else (value >= bound if higher else value <= bound)
        rows.append((target, shown if value is not None else "† " + shown, met))

    unpaired = "not measured in one session"
    steady = _find(records, "SteadyArrival/500Nodes", "kubesched")
    if steady:
        share = steady["bound"] / steady["pods"]
        add("SteadyArrival/500Nodes: kubesched binds ≥ 99% of arrivals", share,
            f"{share:.1%} ({steady['bound']:,} of {steady['pods']:,})", 0.99, True)
    if steady and _find(records, "SteadyArrival/500Nodes", "raw-binder"):
        pair = _pair(records, "SteadyArrival/500Nodes", "kubesched", "raw-binder")
        ratio = _quotient(pair, "p99_ms")
        add("SteadyArrival/500Nodes: kubesched p99 ≤ 1.5× the raw binder's", ratio,
            f"{ratio:.2f}× ({pair[0]['p99_ms']} ms against {pair[1]['p99_ms']} ms)" if ratio else unpaired, 1.5, False)
    basic = _find(records, HEADLINE, "kubesched")
    if basic and basic["bound"]:
        per_pod = basic["cpu_s"] * 1000 / basic["bound"]
        main = basic.get("main_cpu_s")
        in_main = f"; {main * 1000 / basic['bound']:.2f} ms in the scheduling process" if main else ""
        shown = f"{per_pod:.2f} ms (all processes){in_main}"
        add(f"{HEADLINE}: kubesched CPU per pod ≤ 1.3 ms", per_pod, shown, 1.3, False)
    loop = _find(records, HEADLINE, "kubesched", "loop-only")
    if loop and loop["pods_per_s"]:
        add(f"The scheduling loop's own ceiling ≥ 1,000 pods/s ({HEADLINE}, loop-only)",
            loop["pods_per_s"], f"{loop['pods_per_s']:,.1f} pods/s, {loop['cpu_ms_per_pod']:.3f} ms CPU per pod",
            1000, True)
    if basic and _find(records, HEADLINE, "raw-binder"):
        pair = _pair(records, HEADLINE, "kubesched", "raw-binder")
        share = _quotient(pair)
        add(f"{HEADLINE}: kubesched ≥ 70% of the raw binder", share,
            f"{share:.0%} ({pair[0]['pods_per_s']:,.1f} against {pair[1]['pods_per_s']:,.1f} pods/s)" if share
            else unpaired, 0.70, True)
    for workload in RATIO_TARGET_WORKLOADS:
        if not _find(records, workload, "kubesched") or not _find(records, workload, "kube-scheduler"):
            continue
        pair = _pair(records, workload, "kubesched", "kube-scheduler")
        ratio = _quotient(pair)
        add(f"{workload}: kubesched ≥ 1.0× kube-scheduler", ratio,
            f"{ratio:.2f}× ({pair[0]['pods_per_s']:,.1f} against {pair[1]['pods_per_s']:,.1f} pods/s)" if ratio
            else unpaired, 1.0, True)
    whatif = _find(records, WHATIF_WORKLOAD, "kubesched", WHATIF_MODE)
    if whatif:
        add(f"{WHATIF_WORKLOAD}: a what-if within {WHATIF_TARGET_S} s on one core", whatif["wall_s"],
            f"{whatif['wall_s']:.1f} s wall, {whatif['cpu_s']:.1f} s CPU", WHATIF_TARGET_S, False)
        add(f"{WHATIF_WORKLOAD}: a what-if within {WHATIF_TARGET_MB:,} MB", whatif["peak_rss_mb"],
            f"{whatif['peak_rss_mb']:,.0f} MB peak RSS", WHATIF_TARGET_MB, False)
    scale = "SchedulingBasic/15000Nodes"
    if _find(records, scale, "kubesched") and _find(records, scale, "kube-scheduler"):
        pair = _pair(records, scale, "kubesched", "kube-scheduler")
        ours = pair[0]["peak_rss_mb"] if pair else None
        add(f"{scale}: kubesched peak RSS ≤ kube-scheduler's", ours,
            f"{pair[0]['peak_rss_mb']:,.0f} MB against {pair[1]['peak_rss_mb']:,.0f} MB" if pair else unpaired,
            pair[1]["peak_rss_mb"] if pair else 0, False)
    return rows


def targets_table(records: list[dict]) -> list[str]:
    """Every performance target with the figure it was judged on, from the quiet records."""
    rows = _target_rows(records)
    if not rows:
        return []
    lines = ["", "Targets, judged from the records above:", "", "| target | measured | met |", "|---|---|---|"]
    for target, shown, met in rows:
        lines.append(f"| {target} | {shown} | {'–' if met is None else 'yes' if met else 'no'} |")
    return lines


def _throughput(record: dict | None) -> str:
    return _cell(record.get("scheduling_throughput"), 1) if record else "–"


def _share(record: dict | None, threshold: float) -> str:
    value = record and record.get("scheduling_throughput")
    return f"{value / threshold:.2f}" if value else "–"


def upstream_table(records: list[dict]) -> list[str]:
    """scheduler_perf's workloads against kube-scheduler and against upstream's thresholds."""
    rows = []
    for workload in WORKLOADS:
        if not workload.upstream or not any(r["workload"] == workload.name for r in records):
            continue
        ours, theirs = _find(records, workload.name, "kubesched"), _find(records, workload.name, "kube-scheduler")
        raw = _find(records, workload.name, "raw-binder")
        threshold = workload.upstream.threshold
        ratio = _ratio_cell(records, workload.name, "kubesched", "kube-scheduler", field="scheduling_throughput")
        rows.append(f"| {workload.name} | {_cell(threshold)} | {_throughput(ours)} | {_throughput(theirs)} "
                    f"| {_throughput(raw)} | {ratio} | {_share(ours, threshold)} | {_share(theirs, threshold)} |")
    if not rows:
        return []
    return ["", "Upstream's scheduler_perf workloads that carry a threshold, in scheduler_perf's own figure "
                "(SchedulingThroughput: the average of per-second binding rates from the first binding on). "
                "Upstream's threshold was set on its CI hardware, with the scheduler in the API server's process: "
                "a reference, not a pass or fail here.",
            "", "| workload | upstream threshold pods/s | kubesched | kube-scheduler | raw binder "
                "| kubesched ÷ kube-scheduler | kubesched ÷ threshold | kube-scheduler ÷ threshold |",
            "|---|---:|---:|---:|---:|---:|---:|---:|", *rows]


def side_by_side(records: list[dict]) -> list[tuple[str, float]]:
    """(workload, kubesched ÷ kube-scheduler pods/s) for every workload both were measured on
    in one session, unthrottled."""
    found = []
    for workload in WORKLOADS:
        ratio = _quotient(_pair(records, workload.name, "kubesched", "kube-scheduler"))
        if ratio is not None:
            found.append((workload.name, ratio))
    return found


def _reading(records: list[dict]) -> list[str]:
    """The sentences that read the tables, each figure taken from the records."""
    lines = []
    compared = side_by_side(records)
    if compared:
        trailing = [(name, ratio) for name, ratio in compared if ratio < 1.0]
        lines.append(f"- kubesched binds faster than kube-scheduler on {len(compared) - len(trailing)} of the "
                     f"{len(compared)} workloads both were measured on in one session"
                     + (": on every one." if not trailing else "; it trails on " + ", ".join(
                         f"{name} ({ratio:.2f}×)" for name, ratio in trailing) + "."))
    pair = _pair(records, "Preemption/500Nodes", "kubesched", "kube-scheduler")
    if pair and pair[0].get("startup_s") is not None and pair[1].get("startup_s") is not None:
        ours, theirs = pair
        lines.append(
            f"- Preemption/500Nodes: kubesched binds its first pod {ours['startup_s']:.1f} s after it starts, "
            f"kube-scheduler after {theirs['startup_s']:.1f} s, and both bind the rest at once "
            f"({_cell(ours.get('bind_rate_per_s'), 1)} and {_cell(theirs.get('bind_rate_per_s'), 1)} pods/s from the "
            "first binding on). Before its first binding a scheduler runs PostFilter (the preemption dry run over "
            "every node and its victims) for each pending preemptor, whose victims are then deleted in the "
            "background (SchedulerAsyncPreemption, on in both); each preemptor waits among the unschedulable pods "
            "until the deletions of its victims reach the scheduler, and the pods not yet tried come first, so the "
            "time to the first binding decides the ratio.")
    scale = _pair(records, "SchedulingBasic/15000Nodes", "kubesched", "kube-scheduler")
    headline = _pair(records, HEADLINE, "kubesched", "kube-scheduler")
    if scale and headline:
        lines.append(f"- Peak RSS: kubesched {scale[0]['peak_rss_mb']:,.0f} MB against kube-scheduler's "
                     f"{scale[1]['peak_rss_mb']:,.0f} MB at 15,000 nodes, {headline[0]['peak_rss_mb']:,.0f} MB against "
                     f"{headline[1]['peak_rss_mb']:,.0f} MB at 5,000; kubesched's two API child processes cost the "
                     "same whatever the cluster's size.")
    missed = [target for target, _shown, met in _target_rows(records) if met is False]
    if missed:
        lines.append("- Targets missed: " + "; ".join(missed) + ".")
    return [""] + lines if lines else []


def markdown_table(document: dict) -> str:
    quiet = [r for r in document["records"] if is_quiet(r)]
    records = [r for r in quiet if not is_loop_only(r) and not is_whatif(r)]
    loop_records = [r for r in quiet if is_loop_only(r)]
    excluded = [r for r in document["records"] if not is_quiet(r)]
    labels = session_labels(document, quiet)
    lines = [
        TABLE_BEGIN,
        "",
        f"Measured on {document['host']['cpus']} cores, {document['host']['memory_gib']} GiB; only records from "
        "runs in which no other process used the machine (last column: the 1-minute load average's range during "
        "the run, and the CPU seconds other processes used). Sessions:",
        "",
        *(_session_line(document, labels) or ["- none yet: run `make bench` on a quiet machine"]),
    ]
    if records:
        lines += ["", "| workload | qps/burst | scheduler | session | nodes | pods | bound | pods/s | p50 ms | p99 ms "
                      "| start-up s | CPU s | peak RSS MB | load / others' CPU |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in records:
        qps = f"{r['qps']}/{r['burst']}"
        if r.get("rate_per_s"):
            qps += f", {r['rate_per_s']:g} pods/s arriving"
            if r.get("achieved_rate_per_s"):
                qps += f" ({r['achieved_rate_per_s']:g} achieved)"
        bound = _cell(r["bound"]) + ("" if r["complete"] else " ⚠")
        lines.append(f"| {r['workload']} | {qps} | {r['scheduler']} | {labels.get(r.get('session') or '', '–')} "
                     f"| {_cell(r['nodes'])} | {_cell(r['pods'])} "
                     f"| {bound} | {_cell(r['pods_per_s'], 1)} | {_cell(r['p50_ms'])} | {_cell(r['p99_ms'])} "
                     f"| {_cell(r['startup_s'], 2)} | {_cell(r['cpu_s'], 1)} | {_cell(r['peak_rss_mb'])} "
                     f"| {_load_cell(r)} |")
    if not all(r["complete"] for r in records):
        lines += ["", "⚠: not every pod was bound (the run timed out or the scheduler exited); see `failure` in "
                      "`tests/bench/results/latest.json`."]
    lines += loop_table(loop_records)
    lines += whatif_table([r for r in quiet if is_whatif(r)], labels)
    lines += upstream_table(records)
    lines += targets_table(quiet)
    if records:
        lines += ["", "Throughput ratios (pods/s):", "",
                  "| workload | qps/burst | kubesched ÷ kube-scheduler | kubesched ÷ raw binder "
                  "| kube-scheduler ÷ raw binder |",
                  "|---|---|---:|---:|---:|"]
    pairs = sorted({(r["workload"], r["qps_profile"]) for r in records},
                   key=lambda pair: _order({"workload": pair[0], "scheduler": "", "qps_profile": pair[1]}))
    for workload, qps_profile in pairs:
        sample = next(r for r in records if r["workload"] == workload and r["qps_profile"] == qps_profile)
        lines.append(f"| {workload} | {sample['qps']}/{sample['burst']} "
                     f"| {_ratio_cell(records, workload, 'kubesched', 'kube-scheduler', qps_profile)} "
                     f"| {_ratio_cell(records, workload, 'kubesched', 'raw-binder', qps_profile)} "
                     f"| {_ratio_cell(records, workload, 'kube-scheduler', 'raw-binder', qps_profile)} |")
    if records:
        lines += ["", "†: the two records come from different sessions or commits, so they are not compared; "
                      "measure the workload's schedulers in one `make bench`."]
    lines += ["", "What these records say:", *(_reading(quiet) or ["", "- nothing yet: no quiet record."])]
    lines += _excluded_note(excluded)
    lines += ["", "![Throughput per workload](../tests/bench/results/throughput.png)", "", TABLE_END]
    return "\n".join(lines)


def full_session(document: dict) -> dict | None:
    """The latest session that ran every workload the bench has with every scheduler."""
    every = {w.name for w in WORKLOADS if not w.smoke}
    full = [s for s in document["sessions"].values()
            if every <= set(s.get("workloads") or []) and set(SCHEDULER_NAMES) <= set(s.get("schedulers") or [])]
    return max(full, key=lambda s: s["id"], default=None)


def session_block(document: dict) -> str:
    session = full_session(document)
    if session:
        text = (f"A full `make bench` (every workload, each scheduler) took {session['seconds'] / 60:.0f} minutes "
                f"in the last session that ran one (started {session['id'].rsplit('-', 1)[0]}, "
                f"{document['host']['cpus']} cores).")
    else:
        text = "No full `make bench` is in the results file yet, so how long one takes is not known here."
    return "\n".join([begin_marker("session"), text + " `python -m tests.bench --list` prints the runs a selection "
                      "makes and how long they should take, from the durations in the results file.",
                      end_marker("session")])


def workloads_block() -> str:
    lines = [begin_marker("workloads"), "",
             "| workload | nodes | pods measured | pods bound before | other pods and churn | what "
             "| scheduler_perf threshold pods/s |",
             "|---|---:|---:|---:|---|---|---:|"]
    for w in WORKLOADS:
        if w.smoke:
            continue
        beside = [f"{count:,} pending, not measured" for count, _build in w.unmeasured_pods]
        beside += [type(operation).__name__ for operation in w.operations]
        threshold = f"{w.upstream.threshold:,.0f} ({w.upstream.config})" if w.upstream else "–"
        lines.append(f"| {w.name} | {w.node_count:,} | {w.pods:,} | {w.init_pods:,} | {', '.join(beside) or '–'} "
                     f"| {w.description} | {threshold} |")
    return "\n".join([*lines, "", end_marker("workloads")])


BLOCKS = {"session": session_block, "workloads": lambda _document: workloads_block(), "results": markdown_table}

DOC_SKELETON = """# Performance

How fast kubesched schedules, side by side with upstream kube-scheduler and with a raw
binder that measures the API server's own ceiling, on the same API server. `make bench`
regenerates the generated parts below.

{session}

## Workloads

{workloads}

## Results

{results}
"""


def render_page(text: str | None, document: dict) -> str:
    """The page with each generated block rendered from the results, the hand-written text
    around them kept; a new page from the skeleton."""
    if text is None:
        return DOC_SKELETON.format(**{name: render(document) for name, render in BLOCKS.items()})
    for name, render in BLOCKS.items():
        begin, end = begin_marker(name), end_marker(name)
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + render(document) + rest.split(end, 1)[1]
        elif name == "results":
            text = text.rstrip("\n") + "\n\n" + render(document) + "\n"
    return text


def write_docs(path: str, document: dict) -> None:
    text = None
    if os.path.exists(path):
        with open(path) as handle:
            text = handle.read()
    text = render_page(text, document)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def write_plot(path: str, document: dict) -> None:
    """Grouped bars: throughput per workload, one bar per scheduler, one panel per qps profile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in document["records"] if r.get("pods_per_s") and is_quiet(r) and not is_loop_only(r)]
    profiles = [p for p in QPS_ORDER if any(r["qps_profile"] == p for r in records)]
    if not profiles:
        # Never leave an older plot standing for figures the table no longer shows.
        figure = plt.figure(figsize=(6, 2))
        figure.text(0.5, 0.5, "No record from a quiet machine yet: run `make bench` when the machine is idle.",
                    ha="center", va="center", fontsize=9, wrap=True)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        figure.savefig(path, dpi=110)
        plt.close(figure)
        return
    colours = {"kubesched": "#E8A33D", "kube-scheduler": "#326CE5", "raw-binder": "#999999"}
    widths = [max(2, len({r["workload"] for r in records if r["qps_profile"] == p})) for p in profiles]
    figure, axes = plt.subplots(1, len(profiles), figsize=(sum(widths) * 1.6 + 2, 5.5), squeeze=False,
                                gridspec_kw={"width_ratios": widths})
    for axis, profile in zip(axes[0], profiles):
        subset = [r for r in records if r["qps_profile"] == profile]
        workloads = sorted({r["workload"] for r in subset}, key=lambda w: _order(
            {"workload": w, "scheduler": "", "qps_profile": profile}))
        bar_width = 0.8 / len(SCHEDULER_NAMES)
        for offset, scheduler in enumerate(SCHEDULER_NAMES):
            values = [next((r["pods_per_s"] for r in subset if r["workload"] == w and r["scheduler"] == scheduler), 0)
                      for w in workloads]
            positions = [i + (offset - (len(SCHEDULER_NAMES) - 1) / 2) * bar_width for i in range(len(workloads))]
            bars = axis.bar(positions, values, bar_width, label=scheduler, color=colours[scheduler])
            axis.bar_label(bars, labels=[f"{v:.0f}" if v else "" for v in values], fontsize=7, padding=2)
        sample = subset[0]
        axis.set_title(f"qps {sample['qps']} / burst {sample['burst']}")
        axis.set_xticks(range(len(workloads)))
        axis.set_xticklabels([w.replace("/", "\n") for w in workloads], fontsize=8)
        axis.set_ylabel("pods bound per second")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Scheduling throughput on one kube-apiserver ({document['host']['cpus']} cores), "
                    f"{document['generated']}")
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
