"""tests/reliability/results/soak.json (one entry per scheduler), its plot, and its section of
docs/reliability.md (tests/reliability/report.py places the section)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab.private_lab import ROOT
from tests.reliability.soak.plan import FAULT_KINDS

RESULTS = ROOT / "tests" / "reliability" / "results" / "soak.json"
PLOT = ROOT / "tests" / "reliability" / "results" / "soak.png"
ORDER = ("kubesched", "kube-scheduler")


def load(path: Path = RESULTS) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def record(result: dict, commit: str, path: Path = RESULTS) -> dict:
    """Put one scheduler's run in the file, replacing its previous one."""
    data = load(path) or {"runs": {}}
    result = {**result, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit}
    data["runs"][result["scheduler"]] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def _series(run: dict) -> tuple[list[float], list[int], list[float], dict[str, list]]:
    """Minutes, pods pending, bindings per second, and each instance slot's RSS (MB, None while down)."""
    series = run.get("series") or []
    minutes = [s["t"] / 60 for s in series]
    pending = [s["pending"] for s in series]
    rate = [0.0] + [(b["binds"] - a["binds"]) / max(1e-3, b["t"] - a["t"]) for a, b in zip(series, series[1:])]
    slots = sorted({slot for s in series for slot in s["instances"]})
    rss = {slot: [(s["instances"].get(slot) or {}).get("rss_mb") for s in series] for slot in slots}
    return minutes, pending, rate, rss


def plot(data: dict, path: Path = PLOT) -> None:
    """Per scheduler, one column: the faults as bars on a time line, then pods pending, bindings
    per second and each instance's RSS, with a thin line where each fault began."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [data["runs"][name] for name in ORDER if name in data.get("runs", {})]
    if not runs:
        return
    kinds = list(FAULT_KINDS)
    figure, axes = plt.subplots(4, len(runs), figsize=(7.5 * len(runs), 10), sharex="col", squeeze=False,
                                gridspec_kw={"height_ratios": [1.6, 1, 1, 1]})
    for column, run in enumerate(runs):
        minutes, pending, rate, rss = _series(run)
        faults = run.get("faults") or []
        timeline = axes[0][column]
        for fault in faults:
            row = kinds.index(fault["kind"]) if fault["kind"] in kinds else len(kinds)
            width = max(fault["ended"] - fault["began"], 3.0) / 60
            timeline.barh(row, width, left=fault["began"] / 60, height=0.6,
                          color="tab:red" if not fault.get("ok") else "tab:blue")
        timeline.set_yticks(range(len(kinds)), kinds, fontsize=7)
        timeline.invert_yaxis()
        timeline.grid(axis="x", alpha=0.3)
        busy = " (busy machine)" if run.get("busy") else ""
        timeline.set_title(f"{run['scheduler']}: {run['settings']['minutes']:g} min, {run['settings']['rate']:g} "
                           f"pods/s, {run['settings']['nodes']} nodes, seed {run['settings']['seed']}{busy}")
        axes[1][column].plot(minutes, pending, linewidth=1.0, color="black")
        axes[1][column].set_ylabel("pods pending")
        axes[2][column].plot(minutes, rate, linewidth=1.0, color="black")
        axes[2][column].set_ylabel("bindings per second")
        for slot, values in rss.items():
            axes[3][column].plot(minutes, [v if v is not None else float("nan") for v in values], linewidth=1.0,
                                 label=f"instance {slot}")
        axes[3][column].set_ylabel("RSS, MB (children included)")
        axes[3][column].legend(fontsize=7, loc="lower right")
        axes[3][column].set_xlabel("minutes")
        for ax in axes[1:, column]:
            for fault in faults:
                ax.axvline(fault["began"] / 60, color="tab:blue", alpha=0.25, linewidth=0.8)
            ax.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def section(path: Path = RESULTS) -> list[str]:
    """The soak's section of docs/reliability.md, from soak.json."""
    from tests.reliability.soak.run import verdicts

    lines = ["## Soak: thirty minutes of overlapping faults (`make soak`)", "",
             "Three instances of each scheduler with leader election on the full lab (etcd, kube-apiserver, "
             "kube-controller-manager, kwok nodes), a steady mixed arrival of pods and a seeded schedule of "
             "overlapping faults; the same plan for both schedulers, each on its own private lab "
             "(tests/reliability/soak/, design below). Generated from `tests/reliability/results/soak.json`; a "
             "5-minute smoke of kubesched runs in `make test` (tests/integration/reliability/test_soak.py).", ""]
    data = load(path)
    if not data or not data.get("runs"):
        return lines + ["No soak has been committed yet: `make soak` on a quiet machine writes the results, the "
                        "plot and this section.", ""] + _design()
    runs = [data["runs"][name] for name in ORDER if name in data["runs"]]
    busy = [r["scheduler"] for r in runs if r.get("busy")]
    if busy:
        lines += [f"**Measured on a busy machine ({', '.join(busy)}): the figures below are not final; "
                  "`make soak` on a quiet machine replaces them.**", ""]
    lines += ["| | " + " | ".join(r["scheduler"] for r in runs) + " |", "|---|" + "---|" * len(runs)]

    def row(label: str, value) -> None:
        lines.append(f"| {label} | " + " | ".join(str(value(r)) for r in runs) + " |")

    row("run", lambda r: f"{r['settings']['minutes']:g} min, {r['settings']['rate']:g} pods/s, "
                         f"{r['settings']['nodes']} nodes, seed {r['settings']['seed']}, plan {r['plan_digest']}, "
                         f"commit {r.get('commit')}, {r.get('finished_at')}")
    row("pods arrived (planned)",
        lambda r: f"{sum((r.get('arrivals_made') or {}).values()):,} ({sum((r.get('arrivals_planned') or {}).values()):,})")
    row("plan paused while kwok was behind", lambda r: f"{r.get('arrivals_held_s', 0):g} s in "
                                                       f"{len(r.get('arrival_holds') or [])} pauses")
    row("bindings", lambda r: f"{r.get('binds', 0):,}")
    row("CPU used (cores on average)", _cpu)
    row("faults carried out", lambda r: f"{sum(1 for f in r.get('faults') or [] if f.get('ok'))} of "
                                        f"{len(r.get('faults') or [])}")
    row("leader hand-overs, longest gap", lambda r: f"{len(r.get('handovers') or [])}, "
                                                    f"{max((g['gap_s'] for g in r.get('handovers') or []), default='-')} s")
    row("exits on their own (lost Lease)", lambda r: len(r.get("unplanned_exits") or []))
    row("scheduling latency p50 / p99, bare pods", lambda r: _latency(r, "bare"))
    row("races counted apart", lambda r: ", ".join(f"{k} {v}" for k, v in (r.get("races") or {}).items()))
    for index, (name, _held, _detail) in enumerate(verdicts(runs[0])):
        row(name, lambda r, index=index: ("held" if verdicts(r)[index][1] else "**broke**") + ": "
            + verdicts(r)[index][2].replace("|", "/")[:320])
    lines += ["", f"![the faults on a time line; pods pending, bindings per second and each instance's RSS]"
                  f"({_relative(PLOT)})", ""]
    lines += _design()
    for run in runs:
        lines += [f"Faults in the {run['scheduler']} run (seconds from the start):", ""]
        lines += [f"- {f['began']:.0f}-{f['ended']:.0f} s {f['kind']}"
                  + (f" ({f.get('error') or f.get('skipped')})" if not f.get("ok") or f.get("skipped") else "")
                  + _fault_detail(f) for f in run.get("faults") or []]
        lines.append("")
    return lines


def _design() -> list[str]:
    return [
        "How the soak is made (tests/reliability/soak/):",
        "",
        "- **One seed, one plan.** `plan.py` turns the seed, the minutes, the rate and the node count into every "
        "arrival and every fault before anything starts; both schedulers get the same plan (its digest is in the "
        "table). Arrivals come per half-second tick at the rate's share per class: bare pods (50-200m CPU, deleted "
        "after an exponential lifetime), pods the extender filters, Jobs (kwok completes their pods, their TTL "
        "collects them), Deployments scaled up and down by a random walk, one spread over zones (maxSkew 1), one "
        "with required anti-affinity per node, StatefulSets on local PersistentVolumes (WaitForFirstConsumer; "
        "released volumes are made Available again, as a local static provisioner does), pods with a "
        "ResourceClaim for one GPU of the fake DRA driver, high-priority Jobs that preempt the low-priority "
        "fillers of a tainted batch pool, and pods no node can take. Each fault kind has a count per 30 minutes "
        "(at least one in any run) and a duration range; each occurrence starts at a uniform time between the "
        "warm-up and the quiet tail, so faults overlap as they fall. What the machine makes of them (how long a "
        "restart takes) is measured, not planned.",
        "- **The instances** are host processes with the flags the scheduler role gives the service (a serving "
        "certificate from the cluster CA, `--client-ca-file`, delegated authentication and authorization), each "
        "with its own configuration file, reaching the API server through a relay that can reset every "
        "connection (a process of its own, so a busy harness never holds the schedulers' requests back). "
        "A supervisor starts an instance that exits again after 2 s (systemd's Restart=on-failure): "
        "a leader that loses its Lease exits 1 in both schedulers. The configuration rollout is the role's order "
        "(the standbys, then the leader, each stopped with SIGTERM, given the new file, started and waited for on "
        "/readyz, the role's health gate) run by the harness: `site.yml` on container masters is left out of the "
        "soak, because three systemd containers and a playbook run (80-95 s of both cores for two masters, "
        "tests/reliability/roles.py) beside 50 pods/s do not fit two cores; the roles suite of `make "
        "reliability` runs the real rollout and its failure modes.",
        "- **Certificate rotation** replaces the files under the running instances, the serving pair first and "
        "then the client CA bundle (the cluster CA and a rotating CA whose client certificate may read /metrics), "
        "and asks each instance what it serves and whom it accepts until both changed (at most 75 s; upstream "
        "re-reads both files at least once a minute).",
        "- **Invariants all through the run** come from the API's own objects, watched in order (`ledger.py`): a "
        "nodeName never changes; at the moment a binding appears, the node's other unfinished pods (terminating "
        "ones count) plus the new one fit its allocatable CPU, memory and pod count, its node selector matches, "
        "its static taints are tolerated and no other pod of the anti-affinity group is there (not-ready and "
        "unreachable taints that arrive between a decision and its binding are races, counted apart); no device "
        "is in two allocated claims; no PersistentVolume is the volume of two claims; and each Lease hand-over's "
        "gap (the new holder's acquireTime against the last renewTime) stays within leaseDuration + 2 x 1.2 x "
        "retryPeriod + 3 s, plus whatever part of it the API server or etcd was down.",
        "- **At the end**, with arrivals stopped and every fault over: the run waits until nothing but the "
        "never-fitting pods is pending (up to 330 s, past upstream's 5-minute retry of pods no event moved); what "
        "is still pending is offered to a fresh instance of the same scheduler, and a pod it binds was lost by the "
        "long-running ones, unless its node lost a pod after they stopped (kwok may still be finishing pods: that "
        "room is new, and such binds are counted apart). A fresh instance shares its scheduler's faults, so the "
        "devices are also counted from the API's own objects: a ResourceClaim that holds a device while reserved "
        "for no pod still there and unfinished has lost that device to every pod, and breaks the check. "
        "Each instance's cache is read with upstream's own cache debugger (SIGUSR2: kube-"
        "scheduler's `Cache mismatch` lines and its dump of every cached node, pod and queued pod; kubesched "
        "answers the same signal with the same lines) and set beside the API's nodes and pods. The API is "
        "listed 15 s before the dump and again after it; a pod or node that changed between the two lists is in "
        "flux and left out, every other one must be in the cache as the API has it. "
        "A pending pod still nominated to a node is a stale nomination, unless a lower-priority pod is "
        "terminating there (upstream lets a preemptor wait for its victims to go).",
        "- **Memory** is read from /proc every 5 s: RSS, threads and open files of each instance, its child "
        "processes included (kubesched's watch and writer processes). Each process is judged per stretch of one "
        "role (a standby that takes the lead builds its scheduling state then): from minute 5 of the run, or a "
        "minute after the stretch began, to its end, when that lasts at least a fifth of the run; the median of "
        "its last tenth against the median of its first tenth must not grow by more than 10%. A scheduler holds "
        "every pod, so its RSS may grow as fast as the API's pod count over the same tenths did (shown beside it), "
        "and no faster; threads and open files get no such allowance. The CPU each instance (by role), each lab "
        "process and the harness used comes from the same samples, reported and not judged.",
        "- **kwok keeps up, or the plan waits.** kwok plays every node's kubelet in one process: when it is more "
        "than 1,000 pods behind (bound and not started after 10 s, a Job pod not finished 15 s after its binding, "
        "a deleted pod not removed 5 s past its grace period), the plan pauses, deletions included, until it is "
        "down to 250. A cluster whose kubelets fall behind grows without end and says nothing about a scheduler. "
        "The pauses move the rest of the arrivals later (the faults keep their times); what the end of the run "
        "cuts off is not made (arrivals made against planned, and the pauses, are in the table).",
        "",
    ]


def _cpu(run: dict) -> str:
    used = run.get("cpu") or {}
    return ", ".join(f"{part} {figures['cores']:.2f}" for part, figures in used.items()
                     if figures.get("cores") is not None) or "-"


def _latency(run: dict, cls: str) -> str:
    figures = (run.get("bind_latency_s") or {}).get(cls) or {}
    return f"{figures.get('p50', '-')} / {figures.get('p99', '-')} s" if figures else "-"


def _fault_detail(fault: dict) -> str:
    if fault["kind"] == "ca_rotation":
        serving, client_ca = ((fault.get(part) or {}).get("instances") or {} for part in ("serving", "client_ca"))
        return ": seconds until each instance served the new certificate / took the new CA: " + ", ".join(
            f"{k}: {serving.get(k)} / {client_ca.get(k)}" for k in sorted(set(serving) | set(client_ca)))
    if "outage_s" in fault:
        return f": API away {fault['outage_s']} s"
    if "steps" in fault:
        return ": " + ", ".join(f"instance {s['slot']}{' (leader)' if s['was_leader'] else ''} "
                                f"{'ready' if s['ready'] else 'NOT ready'} in {s['seconds']} s" for s in fault["steps"])
    return ""


def _relative(path: Path) -> str:
    return "../" + str(path.relative_to(ROOT))
