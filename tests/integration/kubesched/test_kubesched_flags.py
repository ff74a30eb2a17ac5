"""Every flag the pinned kube-scheduler lists in --help is accepted by kubesched, and explained.

The list is read from `kube-scheduler --help` at test time, so a flag upstream adds is a
failure here until kubesched knows it. Each flag goes through kubesched's parser alone; then
all of them at once through the real `kubesched` command with --write-config-to, which must
exit 0, warn once for each flag it ignores, and carry the flags it honours into the file.

--feature-gates is judged as the pinned kube-scheduler judges it: the same values go to both
commands (with --version, which both print only after the gates were set), which must agree
on the exit status and the error; and kubesched's table of the gates v1.37 knows
(kubesched/kube_features.py) is checked against the binary: every gate at its default is
accepted, every gate flipped is refused exactly for the gates locked to their default, and
the alpha and beta gates with their defaults are the ones `kube-scheduler --help` lists.
(test_kubesched_metrics.py checks the full list against kube-scheduler's
kubernetes_feature_enabled metric.)
"""

import json
import re
import subprocess

import pytest
import yaml
from kubesched_lab import KUBESCHED
from placement_agreement import KUBE_SCHEDULER

from kubesched import cli, flags
from kubesched.kube_features import KNOWN

# "      --name type   description" or "  -v, --v Level   description"; bool flags have no type.
FLAG_LINE = re.compile(r"^\s+(?:-\w, )?--(?P<name>[a-z0-9][a-z0-9-]*)(?: (?P<type>[A-Za-z0-9.]+)(?:\[=\w+\])?)?(?:\s{2,}|$)")
NOT_RUN = {"help", "version"}  # they print and exit; --version is checked on its own below
VALUE_FOR_NAME = {  # values that are valid, not just well-formed, so that the command runs
    "logging-format": "text", "tls-min-version": "VersionTLS12", "leader-elect-resource-lock": "leases",
    "tls-cipher-suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "master": "https://127.0.0.1:1",
    "leader-elect-lease-duration": "20s", "leader-elect-renew-deadline": "15s", "leader-elect-retry-period": "3s",
    "secure-port": "0", "bind-address": "127.0.0.1", "emulated-version": "kube=1.37",
    "feature-gates": "kube:InPlacePodVerticalScaling=true", "min-compatibility-version": "kube=1.36", "config": "",
}
VALUE_FOR_TYPE = {
    "string": "x", "int": "3", "int32": "3", "float": "3", "float32": "3", "uint": "3", "duration": "7s",
    "strings": "a,b", "stringSlice": "a,b", "stringArray": "a", "mapStringBool": "A=true", "stringToString": "a=b",
    "colonSeparatedMultimapStringString": "kube:A=true", "int32Slice": "23,29",
    "namedCertKey": "c.crt,c.key", "Level": "2", "pattern": "file=2", "moduleSpec": "file=2", "ip": "127.0.0.1",
    "quantity": "1",
}


def upstream_flags() -> list[tuple[str, str]]:
    done = subprocess.run([KUBE_SCHEDULER, "--help"], capture_output=True, text=True, timeout=60, check=False)
    found = []
    for line in (done.stdout + done.stderr).splitlines():
        match = FLAG_LINE.match(line)
        if match:
            found.append((match["name"], match["type"] or "bool"))
    assert len(found) > 50, f"could not read kube-scheduler --help:\n{done.stdout[:2000]}{done.stderr[:2000]}"
    return found


def argv_for(name: str, kind: str) -> list[str]:
    if kind == "bool":
        return [f"--{name}"]
    value = VALUE_FOR_NAME.get(name, VALUE_FOR_TYPE.get(kind))
    assert value is not None, f"no sample value for --{name} of type {kind}: add one to this test"
    return [f"--{name}={value}"]


@pytest.fixture(scope="module")
def every_flag():
    return [(n, k) for n, k in upstream_flags() if n not in NOT_RUN]


def test_each_upstream_flag_is_accepted_by_the_parser(every_flag):
    refused = []
    for name, kind in every_flag:
        try:
            cli.parse_flags(argv_for(name, kind))
        except flags.FlagError as err:
            refused.append(f"--{name} ({kind}): {err}")
    assert not refused, "kubesched refuses kube-scheduler flags:\n" + "\n".join(refused)


def test_all_upstream_flags_at_once_run_the_command(every_flag, tmp_path):
    out = tmp_path / "effective.yaml"
    argv = [a for name, kind in every_flag if name not in ("config", "write-config-to") for a in argv_for(name, kind)]
    done = subprocess.run([str(KUBESCHED), *argv, f"--write-config-to={out}"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    given = {name for name, _kind in every_flag}
    for name in sorted(given & set(flags.UNSUPPORTED)):
        assert f"flag --{name} is accepted and ignored" in done.stderr, f"no warning for --{name}:\n{done.stderr}"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("W")]
    assert len(warnings) == len({w.split('"')[1] for w in warnings}), "a warning is repeated"
    doc = yaml.safe_load(out.read_text())
    le, cc = doc["leaderElection"], doc["clientConnection"]
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == ("20s", "15s", "3s")
    assert (cc["qps"], cc["burst"], cc["kubeconfig"]) == (3, 3, "x")  # deprecated flags apply without --config
    assert doc["enableProfiling"] is True


def test_version_flag_prints_and_exits(kubesched_cli):
    code, out, _err = kubesched_cli("--version")
    assert code == 0 and out.startswith("kubesched ")


def test_every_upstream_flag_has_help_text(every_flag):
    helps = {option[2:]: action.help for action in flags.build_parser()._actions for option in action.option_strings}
    silent = sorted(name for name, _kind in every_flag if not (helps.get(name) or "").strip())
    assert silent == [], f"flags without help text in kubesched --help: {silent}"


def test_help_lists_the_commands(kubesched_cli):
    code, out, _err = kubesched_cli("--help")
    assert code == 0
    for command in ("validate-config", "explain", "kubesched [flags]"):
        assert command in out


# --- feature gates ------------------------------------------------------------------------------

def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _refusal(stderr: str) -> set[str]:
    """The errors of a `"command failed" err="..."` line, as a set (Go lists an aggregate in map order)."""
    line = next((x for x in stderr.splitlines() if '"command failed" err=' in x), None)
    if line is None:
        return set()
    text = json.loads(line.split('"command failed" err=', 1)[1])
    if text.startswith("[") and text.endswith("]"):
        return set(re.split(r", (?=cannot set|\w+ is enabled, but)", text[1:-1]))
    return {text}


def _gate_warnings(stderr: str) -> list[str]:
    return sorted(x.split("] ", 1)[1] for x in stderr.splitlines() if "feature gate. It will be removed" in x)


GATE_CASES = [
    ["NoSuchGate=true"],
    ["kube:NoSuchGate=true"],
    ["NoEquals"],
    ["OpportunisticBatching=maybe"],
    ["wardle:A=true"],
    ["OpportunisticBatching=true", "kube:OpportunisticBatching=false"],
    ["DynamicResourceAllocation=false"],
    ["DRAAdminAccess=true,DynamicResourceAllocation=false,CRDValidationRatcheting=false"],
    ["DRAPartitionableDevicesType=true"],
    ["OpportunisticBatching=false"],
    ["kube:AllBeta=false", "kube:InPlacePodVerticalScaling=true"],
    ["AllowServiceExternalIPs=true,InPlacePodVerticalScaling=TRUE"],
    [""],
]


@pytest.mark.parametrize("gates", GATE_CASES, ids=lambda gates: " ".join(gates) or "empty")
def test_feature_gates_are_judged_as_kube_scheduler_judges_them(gates):
    argv = [f"--feature-gates={value}" for value in gates] + ["--version"]
    upstream = _run([KUBE_SCHEDULER, *argv])
    ours = _run([str(KUBESCHED), *argv])
    assert (ours.returncode, _refusal(ours.stderr)) == (upstream.returncode, _refusal(upstream.stderr)), \
        f"kube-scheduler:\n{upstream.stderr}\nkubesched:\n{ours.stderr}"
    assert _gate_warnings(ours.stderr) == _gate_warnings(upstream.stderr)
    if upstream.returncode:  # one line for the error (after any the gates logged)
        assert len(ours.stderr.strip().splitlines()) == 1 + len(_gate_warnings(ours.stderr)), ours.stderr


def _gates(values: dict[str, bool]) -> str:
    return "--feature-gates=" + ",".join(f"{name}={str(value).lower()}" for name, value in values.items())


def test_every_gate_kubesched_knows_is_one_kube_scheduler_knows():
    at_default = {name: default for name, (default, _locked, _stage) in KNOWN.items()}
    for command in ([KUBE_SCHEDULER], [str(KUBESCHED)]):
        done = _run([*command, _gates(at_default), "--version"])
        assert done.returncode == 0, done.stderr[-2000:]


def test_the_gates_locked_to_their_default_are_the_ones_kube_scheduler_locks():
    flipped = {name: not default for name, (default, _locked, _stage) in KNOWN.items()}
    expected = {f"cannot set feature gate {name} to {str(not default).lower()}, feature is locked to "
                f"{str(default).lower()}" for name, (default, locked, _stage) in KNOWN.items() if locked}
    upstream = _run([KUBE_SCHEDULER, _gates(flipped), "--version"])
    ours = _run([str(KUBESCHED), _gates(flipped), "--version"])
    assert upstream.returncode == ours.returncode == 1
    assert _refusal(upstream.stderr) == expected
    assert _refusal(ours.stderr) == expected


def test_the_alpha_and_beta_gates_are_the_ones_kube_scheduler_lists():
    done = _run([KUBE_SCHEDULER, "--help"])
    listed = dict(re.findall(r"kube:(\w+)=true\|false \((ALPHA|BETA) - default=(?:true|false)\)", done.stdout))
    defaults = {name: value == "true" for name, value in
                re.findall(r"kube:(\w+)=true\|false \((?:ALPHA|BETA) - default=(true|false)\)", done.stdout)}
    assert len(listed) > 100, done.stdout[:2000]
    ours = {name: stage for name, (_default, _locked, stage) in KNOWN.items() if stage in ("ALPHA", "BETA")}
    assert ours == listed
    assert {name: KNOWN[name][0] for name in ours} == defaults
