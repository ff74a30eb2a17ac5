"""Suite 4 (command line part): a catalogue of bad KubeSchedulerConfigurations.

Each case is run twice, as `kubesched validate-config FILE` and as `kubesched --config FILE`.
Both must exit non-zero, print exactly one line on stderr that names what to fix (no
traceback), and agree. The kubeconfig points at 127.0.0.1:1, where nothing listens, so a
case that reached for the cluster instead of failing would hang and time out.

The role's part (a config that fails validation never replaces the running one) is checked
by the roles suite on a container master.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from lab.private_lab import ROOT
from tests.reliability.instances import KUBESCHED
from tests.reliability.result import SuiteResult

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def _score(name: str, **extra) -> dict:
    return {"profiles": [{"schedulerName": "default-scheduler",
                          "plugins": {"score": {"enabled": [{"name": name, **extra}]}}}]}


def _args(plugin: str, args: dict) -> dict:
    return {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{"name": plugin, "args": args}]}]}


# (case id, what is wrong, document fields merged over BASE or raw file text, text the line must hold)
CASES: list[tuple[str, str, dict | str | None, str]] = [
    ("api-version", "an old apiVersion", {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion"),
    ("kind", "the wrong kind", {"kind": "KubeProxyConfiguration"}, "kind"),
    ("unknown-top-field", "a misspelt top-level field", {"percentageOfNodeToScore": 50}, "percentageOfNodeToScore"),
    ("unknown-profile-field", "a misspelt profile field",
     {"profiles": [{"schedulerName": "a", "plugin": {}}]}, "profiles[0].plugin"),
    ("unknown-extension-point", "a misspelt extension point",
     {"profiles": [{"schedulerName": "a", "plugins": {"filters": {}}}]}, "profiles[0].plugins.filters"),
    ("unknown-plugin", "a plugin that does not exist", _score("NodeResourcesFitt"), "NodeResourcesFitt"),
    ("negative-weight", "a negative score weight", _score("ImageLocality", weight=-1), "weight"),
    ("huge-weight", "a weight whose product with MaxNodeScore overflows",
     _score("ImageLocality", weight=2**62), "weight"),
    ("weight-type", "a weight that is not a number", _score("ImageLocality", weight="high"), "weight"),
    ("duplicate-scheduler-name", "two profiles with one schedulerName",
     {"profiles": [{"schedulerName": "twin"}, {"schedulerName": "twin"}]}, "schedulerName"),
    ("empty-scheduler-name", "an empty schedulerName", {"profiles": [{"schedulerName": ""}]}, "schedulerName"),
    ("lease-vs-deadline", "renewDeadline not shorter than leaseDuration",
     {"leaderElection": {"leaderElect": True, "leaseDuration": "10s", "renewDeadline": "10s"}}, "leaderElection"),
    ("bad-duration", "a duration without a unit",
     {"leaderElection": {"leaderElect": True, "retryPeriod": "2"}}, "retryPeriod"),
    ("percentage-range", "percentageOfNodesToScore over 100", {"percentageOfNodesToScore": 101},
     "percentageOfNodesToScore"),
    ("parallelism-zero", "parallelism 0", {"parallelism": 0}, "parallelism"),
    ("backoff-order", "podMaxBackoffSeconds below podInitialBackoffSeconds",
     {"podInitialBackoffSeconds": 10, "podMaxBackoffSeconds": 5}, "BackoffSeconds"),
    ("fit-strategy", "an unknown NodeResourcesFit scoring strategy",
     _args("NodeResourcesFit", {"scoringStrategy": {"type": "Cheapest"}}), "scoringStrategy"),
    ("spread-constraint", "a default spread constraint with a bad whenUnsatisfiable",
     _args("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
         {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "Sometimes"}]}),
     "whenUnsatisfiable"),
    ("preemption-percentage", "DefaultPreemption minCandidateNodesPercentage over 100",
     _args("DefaultPreemption", {"minCandidateNodesPercentage": 150}), "minCandidateNodesPercentage"),
    ("unreadable-kubeconfig", "a kubeconfig path that does not exist",
     {"clientConnection": {"kubeconfig": "/nonexistent/scheduler.kubeconfig"}}, "kubeconfig"),
    ("garbage-kubeconfig", "a kubeconfig that is not a kubeconfig", {"clientConnection": {"kubeconfig": "@GARBAGE@"}},
     "kubeconfig"),
    ("yaml-syntax", "a YAML syntax error",
     "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [\n", "YAML"),
    ("not-a-mapping", "a document that is a list", "- apiVersion: kubescheduler.config.k8s.io/v1\n", ""),
    ("missing-file", "a configuration file that does not exist", None, ""),
]


def _unreachable_kubeconfig(directory: Path) -> str:
    path = directory / "unreachable.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1",
                                               "certificate-authority": str(ROOT / "tests" / "reliability" / "__init__.py")}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}), encoding="utf-8")
    return str(path)


def _write_case(directory: Path, case_id: str, content: dict | str | None, kubeconfig: str) -> Path:
    path = directory / f"{case_id}.yaml"
    if content is None:
        return path  # never written: the missing-file case
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
        return path
    doc = {**BASE, "clientConnection": {"kubeconfig": kubeconfig}, "leaderElection": {"leaderElect": False}}
    for key, value in content.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    if doc["clientConnection"]["kubeconfig"] == "@GARBAGE@":
        garbage = directory / "garbage.kubeconfig"
        garbage.write_text("this: [is not\n", encoding="utf-8")
        doc["clientConnection"]["kubeconfig"] = str(garbage)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _run(*args: str, timeout: float = 20.0) -> tuple[int | None, str, float]:
    started = time.monotonic()
    try:
        done = subprocess.run([str(KUBESCHED), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              check=False, env={**os.environ, "KUBECONFIG": ""})
        return done.returncode, done.stderr, time.monotonic() - started
    except subprocess.TimeoutExpired:
        return None, f"(no exit within {timeout:.0f} s: it must have tried the cluster)", timeout


def _judge(code: int | None, stderr: str, expected: str) -> tuple[bool, str, str]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    line = lines[0] if lines else ""
    if code is None or code == 0:
        return False, line, f"exit code {code}"
    if len(lines) != 1 or "Traceback" in stderr:
        return False, line, f"{len(lines)} lines on stderr"
    if expected and expected not in line:
        return False, line, f"the line does not name {expected!r}"
    return True, line, ""


def run(workdir: str) -> SuiteResult:
    result = SuiteResult("bad_configs", "Bad scheduler configurations")
    directory = Path(workdir) / "bad-configs"
    directory.mkdir(parents=True, exist_ok=True)
    kubeconfig = _unreachable_kubeconfig(directory)
    for case_id, what, content, expected in CASES:
        path = _write_case(directory, case_id, content, kubeconfig)
        v_code, v_err, _seconds = _run("validate-config", str(path))
        r_code, r_err, r_seconds = _run("--config", str(path), "--secure-port", "0", "--bind-address", "127.0.0.1")
        v_ok, v_line, v_why = _judge(v_code, v_err, expected)
        r_ok, r_line, r_why = _judge(r_code, r_err, expected)
        agree = v_line == r_line
        passed = v_ok and r_ok and agree
        result.cases.append({"id": case_id, "what": what, "validate_config_exit": v_code, "run_exit": r_code,
                             "message": r_line, "validate_config_message": v_line,
                             "run_seconds": round(r_seconds, 2), "passed": passed})
        why = "; ".join(w for w in (v_why and f"validate-config: {v_why}", r_why and f"--config: {r_why}",
                                    "" if agree else "the two commands print different lines") if w)
        result.check(f"{case_id}: {what}", passed, why or r_line)
    result.figures["bad_config_cases"] = len(CASES)
    result.figures["bad_config_cases_passed"] = sum(1 for c in result.cases if c["passed"])
    return result.finish()
