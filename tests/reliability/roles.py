"""Suite 6 (and the role's part of suite 4): the rollout stops at the first failure, and
the masters it did not reach keep running their previous service.

Two container masters are converged with playbooks/site.yml against the private lab. Then
site.yml is run again with one thing broken at a time:

- bad-config: a KubeSchedulerConfiguration naming a plugin that does not exist; the role
  validates it before installing it, so no master's file or service may change;
- ca-key-missing: the CA key path points nowhere while a certificate must be reissued
  (a new SAN), so signing fails before anything restarts;
- apiserver-unreachable: the masters are pointed at an API server address where nothing
  listens; the first master restarts, cannot sync, fails the health gate, and the rollout
  stops there;
- health-fails: the secure port is changed to one another process already holds on the
  master's address; the restarted service cannot bind it, so it neither stays active nor
  answers /healthz, and the rollout stops at the first master.

For each: the play fails for the reason the case expects, and every master other than the
first is untouched (same systemd invocation, same digest over every file the service reads,
active). In the first two cases the first master is untouched too. In the last two the first
master was restarted on the broken inputs, so it must be rolled back: the same digest as
before the run, active, and answering /healthz on its old address and port. A final clean
converge restores the masters.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import yaml

from lab.cluster import Cluster
from lab.private_lab import PrivateLab
from tests.reliability.instances import https_get, wait_until
from tests.reliability.masters import Masters
from tests.reliability.result import SuiteResult

SITE = "playbooks/site.yml"


def _fatal_line(output: str) -> str:
    """The first failure from ansible-playbook's output: its task, its message (and the first
    line of its stderr, where a validator prints its reason)."""
    task = ""
    first_error = ""
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line[len("TASK ["):].split("]", 1)[0]
        if line.startswith("[ERROR]") and not first_error:
            first_error = line[:400]
        if line.startswith("fatal:") or line.startswith("failed:"):
            match = re.search(r'"msg": "((?:[^"\\]|\\.)*)"', line)
            stderr = re.search(r'"stderr": "((?:[^"\\]|\\.)*)"', line)
            message = match.group(1) if match else line
            if stderr and stderr.group(1):
                message += ": " + stderr.group(1).split("\\n")[0]
            return f"[{task}] {message}"[:500]
    return first_error


def _last_fatal(output: str) -> str:
    """The message of the last failure: where the role says how the master was left."""
    messages = re.findall(r'^(?:fatal|failed): .*?"msg": "((?:[^"\\]|\\.)*)"', output, re.M)
    return messages[-1][:600] if messages else ""


def _failed_hosts(output: str) -> list[str]:
    hosts = []
    for line in output.splitlines():
        match = re.match(r"^(\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", line)
        if match and (int(match.group(2)) or int(match.group(3))):
            hosts.append(match.group(1))
    return hosts


def _unreachable_kubeconfig(lab: PrivateLab, directory: Path) -> str:
    with open(lab.kubeconfig, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    for entry in doc["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"
    path = directory / "unreachable.kubeconfig"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    path.chmod(0o600)
    return str(path)


class PortHolder:
    """Holds addr:port on the host network, so a master's service cannot bind it. Bound but
    not listening: a health probe there is refused at once instead of hanging on a silent
    listener for its whole timeout."""

    def __init__(self, addresses: list[str]):
        self.sockets = []
        first = socket.socket()
        first.bind((addresses[0], 0))
        self.port = first.getsockname()[1]
        self.sockets.append(first)
        for addr in addresses[1:]:
            sock = socket.socket()
            sock.bind((addr, self.port))
            self.sockets.append(sock)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def converge(result: SuiteResult, masters: Masters, label: str, *extra: str) -> bool:
    rc, output, seconds = masters.playbook(SITE, masters.inventory(), *extra)
    masters.converged = rc == 0
    result.figures[f"site_run_s_{label}"] = round(seconds, 1)
    return result.check(f"{label}: site.yml converges the masters", rc == 0,
                        _fatal_line(output) or f"{seconds:.0f} s")


def repair_if_needed(result: SuiteResult, masters: Masters, lab: PrivateLab, case: str) -> None:
    """A case that left a master down would skew the next one: converge again before it."""
    down = [name for name in masters.names
            if masters.service(name)["active"] != "active" or _healthz(masters, lab, name, timeout=5)[0] != 200]
    if down:
        result.note(f"{case} left {', '.join(down)} down; site.yml was run clean before the next case.")
        converge(result, masters, f"repair after {case}")


def failure_case(result: SuiteResult, masters: Masters, lab: PrivateLab, case: str, overrides: dict,
                 first_untouched: bool, expect: str) -> None:
    """Run site.yml with overrides that break it; expect: a regular expression the first failure
    (its task and message) must match. first_untouched: the failure comes before any
    restart, so no master may change at all; else the first master restarts on the broken
    inputs, fails its gate, and must be rolled back to the inputs it ran before."""
    before = {name: masters.service(name) for name in masters.names}
    masters.converged = False
    rc, output, seconds = masters.playbook(SITE, masters.inventory(**overrides))
    after = {name: masters.service(name) for name in masters.names}
    failed = _failed_hosts(output)
    message = _fatal_line(output)
    touched = [n for n in masters.names if before[n]["invocation"] != after[n]["invocation"]
               or before[n]["inputs_sha256"] != after[n]["inputs_sha256"]]
    first = failed[0] if failed else ""
    others = [n for n in masters.names if n != first and n != "localhost"]
    others_running = all(after[n]["active"] == "active" and before[n]["invocation"] == after[n]["invocation"]
                         for n in others)
    others_inputs = [f"{n} {path} ({before[n]['inputs'][path]} -> {after[n]['inputs'][path]})"
                     for n in others for path in after[n]["inputs"] if before[n]["inputs"][path] != after[n]["inputs"][path]]
    case_record = {"case": case, "overrides": {k: v for k, v in overrides.items() if "kubeconfig" not in k},
                   "exit_code": rc, "failed_hosts": failed, "message": message, "final_message": _last_fatal(output),
                   "masters_touched": touched, "before": before, "after": after, "seconds": round(seconds, 1)}
    result.cases.append(case_record)
    result.check(f"{case}: the rollout fails", rc != 0, message)
    result.check(f"{case}: the rollout failed for this reason, not another",
                 re.search(expect, message, re.IGNORECASE) is not None, f"expected /{expect}/ in: {message}")
    result.check(f"{case}: the masters it did not reach keep running their previous service",
                 others_running, f"failed at {failed or 'none'}; "
                 + "; ".join(f"{n}: {after[n]['active']}, invocation {before[n]['invocation'][:8]} -> "
                             f"{after[n]['invocation'][:8]}" for n in others))
    # Stricter than the running service: an input changed on disk is what the service starts
    # with after its next crash (Restart=on-failure) or reboot, untested by any gate.
    result.check(f"{case}: the masters it did not reach keep their previous inputs on disk",
                 not others_inputs, f"inputs (content, owner, mode) changed on: {others_inputs or 'none'}")
    if first_untouched:
        result.check(f"{case}: no master was restarted or reconfigured", not touched,
                     f"touched: {touched or 'none'}")
        return
    was, now = before.get(first, {}), after.get(first, {})
    result.check(f"{case}: the first master was restarted on the broken inputs (the rollback is exercised)",
                 bool(first) and was.get("invocation") != now.get("invocation"),
                 f"{first or '?'}: invocation {was.get('invocation', '?')[:8]} -> {now.get('invocation', '?')[:8]}")
    health = _healthz(masters, lab, first) if first else ("no failed host", "")
    case_record["first_master_healthz_after"] = health[0]
    differ = [f"{path} ({was['inputs'][path]} -> {now['inputs'][path]})"
              for path in now.get("inputs", {}) if was.get("inputs", {}).get(path) != now["inputs"][path]]
    rolled_back = (bool(first) and now.get("inputs_sha256") == was.get("inputs_sha256")
                   and now.get("active") == "active" and health[0] == 200)
    # Where the rollback did not bring the service back, the service's own last words say why.
    last_words = "" if rolled_back or not first else " / ".join(masters.exec(
        first, "journalctl", "--no-pager", "--output=cat", "-n", "3", "-u", "kube-scheduler.service",
        check=False).stdout.strip().splitlines())[-400:]
    result.check(f"{case}: the first master is back on its previous inputs, active and answering /healthz",
                 rolled_back,
                 f"{first or '?'}: inputs (content, owner, mode) {'as before' if not differ else 'differ: '}"
                 f"{'; '.join(differ)}, {now.get('active', '?')} (restarts {now.get('restarts', '?')}), "
                 f"/healthz {health[0]}; the role said: {case_record['final_message'][-300:]}"
                 + (f"; the service's journal: {last_words}" if last_words else ""))


def _healthz(masters: Masters, lab: PrivateLab, name: str, timeout: float = 20) -> tuple[int | str, str]:
    """/healthz of a master's service on its configured address and port, TLS verified against
    the cluster CA; retried a little, as the rollback restarted it moments ago."""
    url = f"https://{masters.addresses[name]}:{masters.secure_port}/healthz"
    answers: list[tuple[int | str, str]] = []

    def answered() -> bool:
        answers.append(https_get(url, lab.ca_cert))
        return answers[-1][0] == 200

    wait_until(answered, timeout, 1.0)
    return answers[-1]


def bring_up(result: SuiteResult, masters: Masters, reuse: bool = False) -> bool:
    """Container masters running the role's service from a clean converge of site.yml."""
    masters.start(reuse=reuse)
    rc, output = masters.prepare()
    if not result.check("the container masters are prepared (offline bundle installed)", rc == 0, output[-500:]):
        return False
    # --diff -v: the first install changes every file, keys and kubeconfig included, so this
    # output is where a missing no_log or diff: false would show key material (security suite).
    if not converge(result, masters, "baseline", "--diff", "-v"):
        return False
    masters.release_frozen = True
    return True


def run(lab: PrivateLab, cluster: Cluster, workdir: str, masters: Masters, reuse: bool = False) -> SuiteResult:
    result = SuiteResult("roles", "Role failure modes and the role's config validation")
    del cluster  # the masters reach the lab through their own kubeconfig
    try:
        if not bring_up(result, masters, reuse):
            return result.finish()
        failure_case(result, masters, lab, "bad-config",
                     {"scheduler_profiles": [{"schedulerName": "default-scheduler", "plugins": {
                         "score": {"enabled": [{"name": "NoSuchPlugin", "weight": 1}]}}}]},
                     first_untouched=True, expect=r"unknown plugin 'NoSuchPlugin'")
        repair_if_needed(result, masters, lab, "bad-config")
        failure_case(result, masters, lab, "ca-key-missing",
                     {"scheduler_ca_key_path": lab.ca_key + ".missing",
                      "scheduler_serving_extra_dns_names": ["reissue.example"]},
                     first_untouched=True, expect=r"ca\.key\.missing does not exist")
        repair_if_needed(result, masters, lab, "ca-key-missing")
        failure_case(result, masters, lab, "apiserver-unreachable",
                     {"scheduler_api_server": "https://127.0.0.1:1", "scheduler_health_timeout": 20},
                     first_untouched=False, expect=r"\[[^]]*joined the leader election\]")
        repair_if_needed(result, masters, lab, "apiserver-unreachable")
        holder = PortHolder(list(masters.addresses.values()))
        try:
            failure_case(result, masters, lab, "health-fails",
                         {"scheduler_secure_port": holder.port, "scheduler_health_timeout": 20},
                         first_untouched=False, expect=r"\[[^]]*(The unit is active|answers /healthz)\]")
        finally:
            holder.close()
        converge(result, masters, "restore")
    except Exception as err:  # noqa: BLE001
        result.check("run completes", False, repr(err)[:800])
    return result.finish()
