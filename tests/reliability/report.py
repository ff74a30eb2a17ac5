"""tests/reliability/results/latest.json and docs/reliability.md from the suites' results."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path

from lab.private_lab import ROOT
from tests.reliability.soak.results import section as soak_section

RESULTS = ROOT / "tests" / "reliability" / "results" / "latest.json"
DOC = ROOT / "docs" / "reliability.md"
# Hand-written reading of the latest results (causes found, fixes proposed), placed in the doc
# after the targets it explains; rewrite it with each committed run.
ANALYSIS = ROOT / "tests" / "reliability" / "results" / "analysis.md"

# The headline figures: failover takeover times, pods lost, double binds.
HEADLINE = ("takeover_s_sigkill", "takeover_s_sigterm", "pods_lost", "double_binds")


# What the suites run: a change here that is not committed makes the run's commit "+dirty".
MEASURED_PATHS = ("kubesched", "roles", "playbooks", "plugins", "tests/reliability", "lab", "pyproject.toml",
                  ":(exclude)tests/reliability/results")


def commit() -> str:
    """The checkout's commit, with +dirty when what the suites run has uncommitted changes."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                          check=False)
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *MEASURED_PATHS],
                             capture_output=True, text=True, cwd=ROOT, check=False)
    return done.stdout.strip() + ("+dirty" if changed.stdout.strip() else "")


def build(suites: list[dict], settings: dict) -> dict:
    """The results document from suite dicts (SuiteResult.to_dict(), or a previous run's)."""
    figures: dict = {}
    for suite in suites:
        figures.update(suite["figures"])
    lost = [figures.get(k) for k in ("pods_lost", "pods_lost_restart", "pods_lost_reset")]
    doubles = [figures.get(k) for k in ("double_binds", "double_binds_restart", "double_binds_reset")]
    summary = {key: figures.get(key) for key in HEADLINE}
    if any(v is not None for v in lost):
        summary["pods_lost"] = sum(v for v in lost if v is not None)
    if any(v is not None for v in doubles):
        summary["double_binds"] = sum(v for v in doubles if v is not None)
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit(),
        "machine": {"cpus": _cpus(), "python": platform.python_version(), "system": platform.platform()},
        "settings": settings,
        "passed": all(s["passed"] for s in suites),
        "summary": summary,
        "figures": figures,
        "suites": suites,
    }


def merge(previous: dict | None, fresh: list[dict]) -> list[dict]:
    """The previous run's suites with the freshly run ones replacing theirs (a partial run)."""
    if not previous:
        return fresh
    by_name = {s["name"]: s for s in fresh}
    merged = [by_name.pop(s["name"], s) for s in previous.get("suites") or []]
    return merged + list(by_name.values())


def load(path: Path = RESULTS) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def write_json(data: dict, path: Path = RESULTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def _fmt(value) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _suite(data: dict, name: str) -> dict:
    return next((s for s in data["suites"] if s["name"] == name), {})


def render(data: dict) -> str:
    f = data["figures"]
    s = data["summary"]
    dur = f.get("durations") or {}
    lease, retry = dur.get("leaseDuration_s"), dur.get("retryPeriod_s")
    out = [
        "# Reliability and security",
        "",
        "Measured by `make reliability` (`.venv/bin/python -m tests.reliability`), which runs every suite",
        "against a private lab API server (lab/lab.sh with its own directory and ports, so one suite",
        "may restart it) and writes `tests/reliability/results/latest.json`. This page is generated from",
        f"that file: written {data['generated_at']} at commit {data['commit']}, on {data['machine']['cpus']} CPUs",
        "(each suite's section says when it ran; a partial run replaces only the suites it ran).",
        "The fast suites also run in `make test` (tests/integration/reliability/).",
        "",
        "## The figures",
        "",
        "| figure | measured | target |",
        "|---|---|---|",
        f"| takeover after SIGKILL of the leader (new Lease holder) | {_fmt(s.get('takeover_s_sigkill'))} s | "
        f"leaseDuration + retryPeriod = {_fmt((lease or 0) + (retry or 0)) if lease else '?'} s |",
        f"| takeover after SIGTERM of the leader | {_fmt(s.get('takeover_s_sigterm'))} s | about one retryPeriod "
        f"= {_fmt(retry)} s |",
        f"| first binding by the new leader after SIGKILL | {_fmt(f.get('first_bind_after_sigkill_s'))} s | |",
        f"| first binding by the new leader after SIGTERM | {_fmt(f.get('first_bind_after_sigterm_s'))} s | |",
        f"| pods lost (failover, API server restart, connection resets) | {_fmt(s.get('pods_lost'))} | 0 |",
        f"| double binds | {_fmt(s.get('double_binds'))} | 0 |",
        f"| binds refused by the API server during failover (SIGKILL / SIGTERM) | "
        f"{_fmt(f.get('bind_conflicts_sigkill'))} / {_fmt(f.get('bind_conflicts_sigterm'))} | |",
        f"| API server outage survived (restart, real 410s) | {_fmt(f.get('apiserver_outage_s'))} s, "
        f"{_fmt(f.get('watch_410_relists'))} relists after 410 Gone | kubesched keeps running |",
        f"| connections reset mid-drain | {_fmt(f.get('connections_reset'))} | kubesched keeps running |",
        f"| bad scheduler configs rejected with one clear line | {_fmt(f.get('bad_config_cases_passed'))} of "
        f"{_fmt(f.get('bad_config_cases'))} | >= 15, all |",
        f"| bad module inputs rejected, cluster unchanged | {_fmt(f.get('bad_module_input_cases_passed'))} of "
        f"{_fmt(f.get('bad_module_input_cases'))}; unchanged: {_fmt(f.get('cluster_unchanged_after_bad_inputs'))}"
        f" | >= 20, all |",
        f"| `systemd-analyze security` exposure of the installed unit | {_fmt(f.get('systemd_analyze_exposure'))} "
        f"{f.get('systemd_analyze_rating') or ''} | as low as the service allows |",
        "",
        f"Leader election in the failover runs: leaseDuration {_fmt(lease)} s, renewDeadline "
        f"{_fmt(dur.get('renewDeadline_s'))} s, retryPeriod {_fmt(retry)} s (upstream's defaults are 15/10/2 s; "
        "shorter durations keep the suite fast and change nothing in the logic).",
        "",
    ]
    out += _targets(data)
    if ANALYSIS.exists():
        out += [ANALYSIS.read_text(encoding="utf-8").rstrip(), ""]
    for suite in data["suites"]:
        out += _suite_section(suite)
    out += soak_section()
    out += _left_to_do(data)
    out += _method()
    return "\n".join(out).rstrip() + "\n"


def _targets(data: dict) -> list[str]:
    f = data["figures"]
    dur = f.get("durations") or {}
    lease, retry = dur.get("leaseDuration_s"), dur.get("retryPeriod_s")
    lines = ["## Targets missed, and why", ""]
    missed = False
    kill = f.get("takeover_s_sigkill")
    if kill is not None and lease is not None and kill > lease + retry:
        missed = True
        lines += [
            f"- SIGKILL takeover {kill:.2f} s > leaseDuration + retryPeriod ({lease + retry:g} s). client-go's",
            "  rule, which kubesched follows, lets a standby take the lease only when leaseDuration has passed",
            "  since it last *saw the record change*; it polls every retryPeriod x [1, 1.2). The last renewal",
            "  it saw can be up to one jittered retryPeriod after the kill, and its first try after expiry up",
            f"  to one more, so the worst case is leaseDuration + 2.4 x retryPeriod = {lease + 2.4 * retry:.1f} s.",
            "  kube-scheduler has the same bound. Tried: measuring from the Lease itself at 50 ms resolution",
            "  (the figure is when the new holder appears, not when a log line says so).",
        ]
    term = f.get("takeover_s_sigterm")
    if term is not None and retry is not None and term > retry:
        missed = True
        lines += [
            f"- SIGTERM takeover {term:.2f} s > one retryPeriod ({retry:g} s). The leader first stops",
            "  scheduling and lets its in-flight binds finish (so no bind lands after the release), then",
            "  releases; the standbys poll every retryPeriod x [1, 1.2), so a takeover lands between the",
            f"  release and 1.2 x retryPeriod after it; the release itself took {_fmt(f.get('release_s'))} s.",
        ]
    failed = [(s["title"], c) for s in data["suites"] for c in s["checks"] if not c["passed"]]
    for title, check in failed:
        missed = True
        lines.append(f"- {title}: **{check['name']}** failed: {check['detail']}")
    if not missed:
        lines.append("None: every check passed and every figure met its target in this run.")
    return lines + [""]


def _suite_section(suite: dict) -> list[str]:
    status = "passed" if suite["passed"] else "FAILED"
    lines = [f"## {suite['title']} ({status}, {suite['seconds']} s, run {suite.get('finished_at', '?')})", ""]
    catalogue = suite["name"] in ("bad_configs", "bad_module_inputs")
    if catalogue:
        passed = sum(1 for c in suite["checks"] if c["passed"])
        lines.append(f"{passed} of {len(suite['checks'])} checks passed; each case is in the table below.")
    for check in suite["checks"]:
        if catalogue and check["passed"]:
            continue
        mark = "ok" if check["passed"] else "**FAILED**"
        detail = f": {check['detail']}" if check["detail"] else ""
        lines.append(f"- {mark} {check['name']}{detail[:400]}")
    lines.append("")
    if suite["name"] == "bad_configs":
        lines += ["| case | what is wrong | the one line kubesched prints |", "|---|---|---|"]
        for case in suite["cases"]:
            message = case["message"].split(".yaml: ", 1)[-1].replace("|", "\\|")
            lines.append(f"| {case['id']} | {case['what']} | `{message[:160]}` |")
        lines.append("")
    elif suite["name"] == "bad_module_inputs":
        lines += ["| module | input | message (start) |", "|---|---|---|"]
        for case in suite["cases"]:
            args = json.dumps(case["args"], sort_keys=True).replace("|", "\\|")[:70]
            lines.append(f"| {case['module']} | `{args}` | {case['message'][:110].replace('|', '/')} |")
        lines.append("")
    elif suite["name"] == "roles":
        lines += ["| case | exit | failed at | masters touched | the first master after the run | first failure |",
                  "|---|---|---|---|---|---|"]
        for case in suite["cases"]:
            first = (case["failed_hosts"] or [""])[0]
            state, earlier = case["after"].get(first, {}), case["before"].get(first, {})
            same_inputs = state.get("inputs_sha256") == earlier.get("inputs_sha256")
            restored = ("untouched" if first not in case["masters_touched"] else
                        f"{state.get('active', '?')}, inputs {'as before' if same_inputs else 'CHANGED'}, "
                        f"/healthz {case.get('first_master_healthz_after', '?')}")
            lines.append(f"| {case['case']} | {case['exit_code']} | {', '.join(case['failed_hosts']) or 'none'} | "
                         f"{', '.join(case['masters_touched']) or 'none'} | {restored} | "
                         f"{case['message'][:160].replace('|', '/')} |")
        lines.append("")
        for case in suite["cases"]:
            if case.get("final_message") and case["final_message"] != case["message"]:
                lines.append(f"- {case['case']}, the role's last word: {case['final_message'][:400].replace('|', '/')}")
        lines.append("")
    elif suite["name"] == "security":
        items = suite["figures"].get("systemd_analyze_open_items") or []
        if items:
            lines += ["What `systemd-analyze security` still counts against the unit:", ""]
            lines += [f"    {item}" for item in items]
            lines.append("")
        lines += _hardening(suite["figures"])
    for note in suite["notes"]:
        lines.append(f"Note: {note}")
    if suite["notes"]:
        lines.append("")
    return lines


def _hardening(figures: dict) -> list[str]:
    probes = figures.get("hardening_candidates") or []
    if not probes:
        return []
    lines = [f"Sandbox settings the unit does not set yet, each tried on the installed service through a drop-in "
             f"(exposure as installed: {_fmt(figures.get('systemd_analyze_exposure'))}). \"works\" means the "
             "service restarted with it is active, answers /readyz over verified TLS, joined the leader election "
             "and logged no permission or address-family error:", "",
             "| candidate | settings | works | exposure with it | detail |", "|---|---|---|---|---|"]
    for probe in probes:
        settings = "; ".join(f"{key}={' '.join(values)}" for key, values in (probe.get("settings") or {}).items())
        works = {True: "yes", False: "**no**", None: "-"}[probe["works"]] + (" (a trade)" if probe.get("trade") else "")
        lines.append(f"| {probe['candidate']} | `{settings}` | {works} | {_fmt(probe.get('exposure'))} | "
                     f"{str(probe.get('detail', ''))[:200].replace('|', '/')} |")
    return lines + [""]


def _failed_cases(suite: dict, check_phrase: str) -> list[str]:
    """The cases (the part of a check's name before ':') whose check with this phrase failed."""
    return [c["name"].split(":", 1)[0] for c in suite.get("checks", [])
            if check_phrase in c["name"] and not c["passed"]]


def _left_to_do(data: dict) -> list[str]:
    """What the measured results still leave open, from the results themselves."""
    lines = ["## Left to do", ""]
    roles = _suite(data, "roles")
    unrolled = _failed_cases(roles, "back on its previous inputs")
    if unrolled:
        lines += [f"- The first master did not come back from a failed update in: {', '.join(unrolled)}. The rollout",
                  "  still stops there, so no other master follows, but that master is left down until a corrected",
                  "  run. What the role and the service said is under 'Targets missed'."]
    on_disk = _failed_cases(roles, "keep their previous inputs on disk")
    if on_disk:
        lines += [f"- Masters the rollout never reached had a service input changed on disk in: {', '.join(on_disk)}.",
                  "  Their running service is untouched, but a crash or reboot would start it on inputs no gate",
                  "  checked. What changed is under 'Targets missed'."]
    probes = (data["figures"].get("hardening_candidates") or [])
    working = [p for p in probes if p["works"] and not p.get("trade") and not p["candidate"].startswith("all")]
    broken = [p for p in probes if p["works"] is False]
    if working:
        together = next((p for p in probes if p["candidate"].startswith("all") and p["works"]), None)
        lines += [f"- Sandbox settings that worked on the container master and are not in the unit yet: "
                  f"{', '.join(p['candidate'] for p in working)}"
                  + (f" (exposure {_fmt(data['figures'].get('systemd_analyze_exposure'))} -> "
                     f"{_fmt(together['exposure'])} with all of them)" if together else "")
                  + ". IPAddressAllow must then list the API server's and the metrics scrapers' addresses, which are "
                    "site-specific (the lab's are all on localhost)."]
    if broken:
        lines += [f"- Sandbox settings the service does not run with here: "
                  f"{', '.join(p['candidate'] + ' (' + str(p['detail'])[:120] + ')' for p in broken)}."]
    items = data["figures"].get("systemd_analyze_open_items") or []
    if items:
        lines += ["- The rest of what `systemd-analyze security` counts (see the security section) is what a networked",
                  "  service needs: the host's network (PrivateNetwork), Internet sockets (AF_INET/AF_INET6) and the",
                  "  host's root directory (RootDirectory/RootImage)."]
    if len(lines) == 2:
        lines.append("Nothing: every suite passed and every proposal measured is in place.")
    return lines + [""]


def _method() -> list[str]:
    return [
        "## How each figure is measured",
        "",
        "- **Takeover**: a monitor watches the Lease and polls the leader gauge",
        "  (`leader_election_master_status`) of every instance every 200 ms. The takeover time runs",
        "  from the signal to the new holder's `acquireTime`, as the new holder wrote it (a watch on a",
        "  loaded machine delivers late); the first new binding is the first \"Successfully bound\" line",
        "  in a surviving instance's log (only a leader binds).",
        "- **Pods lost**: pods still without `spec.nodeName` when the drain ends (a final list, not the",
        "  watch).",
        "- **Double binds**: a watch over the namespace (relisting after any disconnect) counts every",
        "  change of `spec.nodeName` after the first; the Scheduled events per pod are counted too",
        "  (series included). A second `pods/binding` on a bound pod is refused by the API server with",
        "  409, so the refused binds in each instance's log are reported beside them: they show the",
        "  would-be double binds the API server stopped. The old leader's log is also read for binds it",
        "  made after the new holder appeared (there must be none).",
        "- **API server restart**: the private lab's kube-apiserver is killed, etcd is compacted past",
        "  every revision kubesched has seen, and the API server is started again; resumed watches get",
        "  a real 410 Gone from it.",
        "- **Connection reset**: kubesched talks to the API server through a TCP relay on 127.0.0.1",
        "  that resets every connection (RST) three times in a row mid-drain.",
        "- **Races**: kubesched's client is throttled (qps 3) so decisions are taken long before their",
        "  binds; meanwhile the harness deletes some pending pods and binds others itself.",
        "- **Role failure modes**: two systemd containers (rel-master1, rel-master2, host network on",
        "  127.0.3.x) converged by playbooks/site.yml against the private lab, then site.yml again with",
        "  one input broken. Before and after, each master's unit state, systemd invocation ID and one",
        "  digest over every file the service reads (unit, config, kubeconfig, CA, keys and",
        "  certificates) are compared; /healthz is asked over TLS verified against the cluster CA.",
        "- **Exposure**: `systemd-analyze security kube-scheduler.service` on the first master. Each",
        "  candidate setting is added as a drop-in, the unit restarted and checked (active, /readyz over",
        "  verified TLS, leader election joined, no permission or address-family error in this",
        "  invocation's journal), scored, and the drop-in removed again.",
        "- **Key material**: every log this run wrote (kubesched's, the masters' journals, the Ansible",
        "  outputs, the first converge run with `--diff -v`) is searched for PEM and base64 private key",
        "  headers, a filled `client-key-data`, and pieces of the keys themselves (the lab's CA and",
        "  admin keys, the keys the role issued) in both PEM and kubeconfig form.",
        "",
        "## Behaviours these suites guard",
        "",
        "- A leader that stops on SIGTERM drops the binds still queued behind its client's rate limiter",
        "  and releases the Lease only after the binds in flight have finished, so no pod is bound by",
        "  the old leader after the new one took over (kubesched/schedule_one.py, kubesched/cli.py; the",
        "  SIGTERM failover counts such binds). A leader that loses its Lease exits at once, as",
        "  kube-scheduler does, so a bind held up at the API server (etcd restarting) is dropped with its",
        "  connection instead of landing after another instance took over (found by the soak; the",
        "  failover test with a stopped etcd checks it, for kube-scheduler too).",
        "- A profile with an empty `schedulerName` is rejected (`Required value`), as upstream rejects",
        "  it, instead of claiming every default-scheduler pod (kubesched/config/load.py; bad configs).",
        "",
    ]


def write_doc(data: dict, path: Path = DOC) -> None:
    path.write_text(render(data), encoding="utf-8")


def summary_lines(data: dict) -> list[str]:
    lines = []
    for suite in data["suites"]:
        passed = sum(1 for c in suite["checks"] if c["passed"])
        lines.append(f"{'PASS' if suite['passed'] else 'FAIL'}  {suite['title']}: {passed}/{len(suite['checks'])} "
                     f"checks ({suite['seconds']} s)")
        for check in suite["checks"]:
            if not check["passed"]:
                lines.append(f"      failed: {check['name']}: {check['detail'][:300]}")
    lines.append("")
    for key, value in data["summary"].items():
        lines.append(f"{key} = {_fmt(value)}")
    return lines
