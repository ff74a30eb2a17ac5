"""The three scheduler instances of a soak run: kubesched or the pinned kube-scheduler, host
processes started with the flags the scheduler role gives the service.

Both implementations get the same command line: one KubeSchedulerConfiguration per instance
(leader election on one Lease, one profile, the extender), a serving certificate signed by
the cluster CA, a client CA bundle (the cluster CA and the soak's rotating CA), and the
kubeconfig for delegated authentication and authorization. Each reaches the API server
through the resetting relay.

A supervisor plays systemd's part (Restart=on-failure, RestartSec): an instance that exits
on its own (a leader that lost its Lease exits 1, by design, in both) is started again after
RESTART_DELAY_S. A fault that stops an instance holds its slot until the fault's duration has
passed, then starts it again. Every process an instance slot ran is kept in its history, so
memory is judged per process.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab.binaries import binary
from tests.reliability.instances import KUBESCHED, KubeschedInstance, free_port, scheduler_config, wait_until

IMPLEMENTATIONS = ("kubesched", "kube-scheduler")
KUBE_SCHEDULER = binary("kube-scheduler")
RESTART_DELAY_S = 2.0
INSTANCES = 3
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 6.0, 4.0, 1.0


def command(implementation: str, config_path, port: int, auth_kubeconfig: str, *flags: str) -> list[str]:
    """The command line of one instance of either scheduler: the same flags for both, klog at -v=2."""
    program = str(KUBESCHED) if implementation == "kubesched" else KUBE_SCHEDULER
    return [program, "--config", str(config_path), "--secure-port", str(port), "--bind-address", "127.0.0.1",
            "--authentication-kubeconfig", auth_kubeconfig, "--authorization-kubeconfig", auth_kubeconfig, *flags,
            "-v=2"]


@dataclass
class ProcessRecord:
    pid: int
    slot: int
    started: float            # time.monotonic()
    log: str
    config: str
    ended: float | None = None
    exit_code: int | None = None
    why: str = ""             # "fault:<kind>", "rollout", "exited" (on its own), "end"


@dataclass
class Slot:
    index: int
    name: str
    port: int
    config_path: Path
    process: KubeschedInstance | None = None
    held: bool = False        # a fault or the rollout owns it; the supervisor leaves it alone
    lock: threading.Lock = field(default_factory=threading.Lock)
    restarts: int = 0


class SchedulerSet:
    def __init__(self, implementation: str, workdir: Path, *, kubeconfig: str, auth_kubeconfig: str,
                 scheduler_name: str, lease_name: str, serving: tuple[str, str], client_ca_file: str,
                 extenders: list[dict], clock_origin: float):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"unknown scheduler {implementation!r}: one of {', '.join(IMPLEMENTATIONS)}")
        self.implementation = implementation
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = kubeconfig
        self.auth_kubeconfig = auth_kubeconfig
        self.scheduler_name = scheduler_name
        self.lease_name = lease_name
        self.serving = serving
        self.client_ca_file = client_ca_file
        self.origin = clock_origin
        self.config = scheduler_config(kubeconfig, scheduler_name, lease_name=lease_name,
                                       lease_duration=LEASE_DURATION_S, renew_deadline=RENEW_DEADLINE_S,
                                       retry_period=RETRY_PERIOD_S, extenders=extenders)
        self.slots = [Slot(i, f"{implementation}-{i}", free_port(), self.workdir / f"{implementation}-{i}.yaml")
                      for i in range(INSTANCES)]
        self.history: list[ProcessRecord] = []
        self.unplanned_exits: list[dict] = []
        self._stop = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

    # -- processes ----------------------------------------------------------------------

    def command(self, slot: Slot) -> list[str]:
        cert, key = self.serving
        return command(self.implementation, slot.config_path, slot.port, self.auth_kubeconfig,
                       "--tls-cert-file", cert, "--tls-private-key-file", key, "--client-ca-file", self.client_ca_file)

    def _start(self, slot: Slot, config: dict | None = None) -> None:
        if config is not None or not slot.config_path.exists():
            slot.config_path.write_text(yaml.safe_dump(config or self.config), encoding="utf-8")
        log = self.workdir / f"{slot.name}.{len([r for r in self.history if r.slot == slot.index])}.log"
        slot.process = KubeschedInstance(self.command(slot), slot.port, log, name=slot.name)
        self.history.append(ProcessRecord(slot.process.pid, slot.index, time.monotonic(), str(log),
                                          str(slot.config_path)))

    def _ended(self, slot: Slot, why: str) -> None:
        process = slot.process
        if process is None:
            return
        for record in self.history:
            if record.pid == process.pid and record.ended is None:
                record.ended = time.monotonic()
                record.exit_code = process.proc.returncode
                record.why = why
        slot.process = None

    def start(self, ready_timeout: float = 120.0) -> None:
        for slot in self.slots:
            self._start(slot, self.config)
        for slot in self.slots:
            slot.process.wait_ready(ready_timeout)
        self._supervisor.start()

    def _supervise(self) -> None:
        while not self._stop.wait(0.5):
            for slot in self.slots:
                if slot.held or not slot.lock.acquire(blocking=False):
                    continue
                try:
                    process = slot.process
                    if process is not None and not process.alive():
                        code = process.proc.returncode
                        self.unplanned_exits.append({"slot": slot.index, "pid": process.pid, "exit_code": code,
                                                     "at": round(time.monotonic() - self.origin, 1),
                                                     "log_tail": process.log()[-600:]})
                        process.stop()
                        self._ended(slot, "exited")
                        time.sleep(RESTART_DELAY_S)
                        if not self._stop.is_set():
                            self._start(slot)
                            slot.restarts += 1
                finally:
                    slot.lock.release()

    def close(self) -> None:
        self._stop.set()
        if self._supervisor.is_alive():
            self._supervisor.join(10)
        # All at once: stopped one by one, each standby took the Lease in turn and scheduled
        # on (the last run's pods "lost" at the end were mostly bound so, after the settle).
        for slot in self.slots:
            with slot.lock:
                if slot.process is not None and slot.process.alive():
                    slot.process.send(signal.SIGTERM)
        for slot in self.slots:
            with slot.lock:
                if slot.process is not None:
                    slot.process.stop()
                    self._ended(slot, "end")

    # -- what the faults and checks ask -------------------------------------------------

    def alive(self) -> list[Slot]:
        return [s for s in self.slots if s.process is not None and s.process.alive()]

    def leaders(self) -> list[Slot]:
        return [s for s in self.alive() if s.process.is_leader()]

    def leader(self, timeout: float = 30.0) -> Slot | None:
        """The one instance whose leader gauge says so, waiting up to timeout for there to be one."""
        def single():
            found = self.leaders()
            return found[0] if len(found) == 1 else None
        return wait_until(single, timeout, 0.5)

    def root_pids(self) -> dict[int, int]:
        """slot -> the pid of its running process."""
        return {s.index: s.process.pid for s in self.alive()}

    def stop_for(self, slot: Slot, sig: int, hold_s: float, why: str) -> dict:
        """Signal one instance, wait for it to exit, keep it down for hold_s, start it again."""
        with slot.lock:
            slot.held = True
            try:
                process = slot.process
                if process is None:
                    return {"slot": slot.index, "skipped": "not running"}
                signalled = time.monotonic()
                process.send(sig)
                code = process.wait_exit(30)
                exited_s = round(time.monotonic() - signalled, 2) if code is not None else None
                process.stop(signal.SIGKILL)
                self._ended(slot, why)
                self._stop.wait(max(0.0, hold_s - (time.monotonic() - signalled)))
                if not self._stop.is_set():
                    self._start(slot)
                return {"slot": slot.index, "pid": process.pid, "signal": signal.Signals(sig).name,
                        "exit_code": process.proc.returncode, "exited_after_s": exited_s}
            finally:
                slot.held = False

    def roll_out(self, change: dict, ready_timeout: float = 120.0) -> list[dict]:
        """The role's rollout with a changed configuration: each standby, then the leader, is
        stopped (SIGTERM), given the new file, started and waited for (/readyz) before the next."""
        new = copy.deepcopy(self.config)
        new.update(change)
        self.config = new
        leader = self.leader(timeout=10)
        order = [s for s in self.slots if s is not leader] + ([leader] if leader is not None else [])
        steps = []
        for slot in order:
            with slot.lock:
                slot.held = True
                try:
                    began = time.monotonic()
                    if slot.process is not None:
                        slot.process.stop(signal.SIGTERM, timeout=30)
                        self._ended(slot, "rollout")
                    self._start(slot, new)
                    ready = True
                    try:
                        slot.process.wait_ready(ready_timeout)
                    except RuntimeError:
                        ready = False
                    steps.append({"slot": slot.index, "was_leader": slot is leader, "ready": ready,
                                  "seconds": round(time.monotonic() - began, 2)})
                finally:
                    slot.held = False
        return steps

    def signal_all(self, sig: int) -> dict[int, tuple[int, str, int]]:
        """Send sig to every running instance: slot -> (pid, log path, log size before)."""
        sent = {}
        for slot in self.alive():
            log = slot.process.log_path
            sent[slot.index] = (slot.process.pid, str(log), os.path.getsize(log))
            slot.process.send(sig)
        return sent
