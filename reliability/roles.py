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
  master's address; the restarted service cannot serve, /healthz never answers, and the
  rollout stops at the first master.

For each: the play fails, every master other than the first is untouched (same systemd
invocation, same configuration digest, active), and for the first two cases the first
master is untouched too. A final clean converge restores the masters.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import yaml

from reliability.cluster import Cluster, PrivateLab
from reliability.masters import Masters
from reliability.result import SuiteResult

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


def converge(result: SuiteResult, masters: Masters, label: str) -> bool:
    rc, output, seconds = masters.playbook(SITE, masters.inventory())
    masters.converged = rc == 0
    result.figures[f"site_run_s_{label}"] = round(seconds, 1)
    return result.check(f"{label}: site.yml converges the masters", rc == 0,
                        _fatal_line(output) or f"{seconds:.0f} s")


def failure_case(result: SuiteResult, masters: Masters, case: str, overrides: dict, first_untouched: bool,
                 expect: str) -> None:
    before = {name: masters.service(name) for name in masters.names}
    masters.converged = False
    rc, output, seconds = masters.playbook(SITE, masters.inventory(**overrides))
    after = {name: masters.service(name) for name in masters.names}
    failed = _failed_hosts(output)
    message = _fatal_line(output)
    touched = [n for n in masters.names if before[n]["invocation"] != after[n]["invocation"]
               or before[n]["config_sha256"] != after[n]["config_sha256"]]
    first = failed[0] if failed else ""
    others = [n for n in masters.names if n != first and n != "localhost"]
    others_ok = all(after[n]["active"] == "active" and n not in touched for n in others)
    result.cases.append({"case": case, "overrides": {k: v for k, v in overrides.items() if "kubeconfig" not in k},
                         "exit_code": rc, "failed_hosts": failed, "message": message,
                         "masters_touched": touched, "before": before, "after": after, "seconds": round(seconds, 1)})
    result.check(f"{case}: the rollout fails", rc != 0, message)
    result.check(f"{case}: the rollout failed for this reason, not another", expect.lower() in message.lower(),
                 f"expected {expect!r} in: {message}")
    result.check(f"{case}: the masters it did not reach keep their running service and configuration",
                 others_ok, f"failed at {failed or 'none'}; touched: {touched or 'none'}")
    if first_untouched:
        result.check(f"{case}: no master was restarted or reconfigured", not touched,
                     f"touched: {touched or 'none'}")
    else:
        state = after.get(first, {})
        result.note(f"{case}: the first master ({first or '?'}) was restarted with the broken input and was left "
                    f"{state.get('active', '?')} (restarts {state.get('restarts', '?')}); the role does not roll "
                    f"back a master that fails its health gate, it stops the rollout so no other master follows.")


def bring_up(result: SuiteResult, masters: Masters, reuse: bool = False) -> bool:
    """Container masters running the role's service from a clean converge of site.yml."""
    masters.start(reuse=reuse)
    rc, output = masters.prepare()
    if not result.check("the container masters are prepared (offline bundle installed)", rc == 0, output[-500:]):
        return False
    if not converge(result, masters, "baseline"):
        return False
    masters.release_frozen = True
    return True


def check_installed_service(result: SuiteResult, masters: Masters) -> None:
    """Key modes and owners, the non-root sandboxed service and its exposure score, on one master."""
    name = masters.names[0]
    user = "kube-scheduler"
    stats = masters.exec(name, "sh", "-c", "stat -c '%a %U %n' /etc/kubesched/kube-scheduler/pki/*.key "
                         "/etc/kubesched/kube-scheduler/kubeconfig", check=False).stdout.split("\n")
    stats = [line for line in stats if line.strip()]
    bad = [line for line in stats if not line.startswith(f"600 {user} ")]
    result.check("key files and the kubeconfig are 0600 and owned by the service user", bool(stats) and not bad,
                 "; ".join(stats))
    show = masters.exec(name, "systemctl", "show", "kube-scheduler.service", "-p", "MainPID", "-p", "User",
                        "-p", "NoNewPrivileges", "-p", "ProtectSystem", "-p", "CapabilityBoundingSet",
                        check=False).stdout
    props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
    running_as = masters.exec(name, "ps", "-o", "user=", "-p", props.get("MainPID", "0"), check=False).stdout.strip()
    result.check("the service runs as its own non-root user with NoNewPrivileges and ProtectSystem=strict",
                 running_as == user and props.get("NoNewPrivileges") == "yes" and props.get("ProtectSystem") == "strict",
                 f"process user {running_as!r}; {props}")
    # The masters share the host's network, and ProtectProc=invisible hides the service from
    # `ss -p`: so the configured address must be listening and no wildcard on the port.
    listening = masters.exec(name, "ss", "-Hltn", f"sport = :{masters.secure_port}", check=False).stdout
    local = [line.split()[3] for line in listening.splitlines() if len(line.split()) > 3]
    wildcard = [a for a in local if a.rsplit(":", 1)[0] in ("0.0.0.0", "*", "[::]")]
    result.check("the installed service's secure port binds to its configured address, not a wildcard",
                 f"{masters.addresses[name]}:{masters.secure_port}" in local and not wildcard,
                 f"scheduler_bind_address {masters.addresses[name]}; listening on the port: {local}")
    analysis = masters.exec(name, "systemd-analyze", "security", "--no-pager", "kube-scheduler.service",
                            check=False).stdout
    match = re.search(r"Overall exposure level for kube-scheduler\.service:\s*([\d.]+)\s*(\S+)", analysis)
    score = float(match.group(1)) if match else None
    result.figures["systemd_analyze_exposure"] = score
    result.figures["systemd_analyze_rating"] = match.group(2) if match else None
    result.figures["systemd_analyze_open_items"] = [line.strip() for line in analysis.splitlines()
                                                    if line.lstrip().startswith("✗")][:40]
    result.check("systemd-analyze security rates the unit (exposure score recorded)", score is not None,
                 f"{score} {match.group(2) if match else analysis[-300:]}")
    journal = masters.exec(name, "journalctl", "--no-pager", "-u", "kube-scheduler.service", check=False).stdout
    (masters.workdir / f"{name}-journal.log").write_text(journal, encoding="utf-8")


def run(lab: PrivateLab, cluster: Cluster, workdir: str, masters: Masters, reuse: bool = False) -> SuiteResult:
    result = SuiteResult("roles", "Role failure modes and the role's config validation")
    del cluster  # the masters reach the lab through their own kubeconfig
    try:
        if not bring_up(result, masters, reuse):
            return result.finish()
        failure_case(result, masters, "bad-config", {"scheduler_profiles": [
            {"schedulerName": "default-scheduler",
             "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin", "weight": 1}]}}}]},
            first_untouched=True, expect="unknown plugin 'NoSuchPlugin'")
        failure_case(result, masters, "ca-key-missing", {"scheduler_ca_key_path": lab.ca_key + ".missing",
                                                         "scheduler_serving_extra_dns_names": ["reissue.example"]},
                     first_untouched=True, expect=".missing")
        failure_case(result, masters, "apiserver-unreachable", {"scheduler_api_server": "https://127.0.0.1:1",
                                                                "scheduler_health_timeout": 20},
                     first_untouched=False, expect="election")
        holder = PortHolder(list(masters.addresses.values()))
        try:
            failure_case(result, masters, "health-fails", {"scheduler_secure_port": holder.port,
                                                           "scheduler_health_timeout": 20},
                         first_untouched=False, expect="Request failed")
        finally:
            holder.close()
        converge(result, masters, "restore")
    except Exception as err:  # noqa: BLE001
        result.check("run completes", False, repr(err)[:800])
    return result.finish()
