"""Every flag the pinned kube-scheduler lists in --help is accepted by kubesched.

The list is read from `kube-scheduler --help` at test time, so a flag upstream adds is a
failure here until kubesched knows it. Each flag goes through kubesched's parser alone; then
all of them at once through the real `kubesched` command with --write-config-to, which must
exit 0, warn once for each flag it ignores, and carry the flags it honours into the file.
"""

import re
import subprocess

import pytest
import yaml
from kubesched_lab import KUBESCHED
from placement_agreement import KUBE_SCHEDULER

from kubesched import cli, flags

# "      --name type   description" or "  -v, --v Level   description"; bool flags have no type.
FLAG_LINE = re.compile(r"^\s+(?:-\w, )?--(?P<name>[a-z0-9][a-z0-9-]*)(?: (?P<type>[A-Za-z0-9.]+)(?:\[=\w+\])?)?(?:\s{2,}|$)")
NOT_RUN = {"help", "version"}  # they print and exit; --version is checked on its own below
VALUE_FOR_NAME = {  # values that are valid, not just well-formed, so that the command runs
    "logging-format": "text", "tls-min-version": "VersionTLS12", "leader-elect-resource-lock": "leases",
    "tls-cipher-suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "master": "https://127.0.0.1:1",
    "leader-elect-lease-duration": "20s", "leader-elect-renew-deadline": "15s", "leader-elect-retry-period": "3s",
    "secure-port": "0", "bind-address": "127.0.0.1", "emulated-version": "kube=1.37",
    "feature-gates": "kube:SchedulerQueueingHints=true", "min-compatibility-version": "kube=1.36", "config": "",
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
