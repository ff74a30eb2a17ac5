"""Is the machine quiet enough to measure? The 1-minute load average and the other processes
that burn CPU, sampled before the bench starts and all through each run.

On a shared machine a run measured beside a test suite says more about the suite than about
the scheduler (issue #17: the committed figures were taken at load 8-15 and overstated
kubesched's lead by 1.8x). So `make bench` refuses a busy machine unless told --allow-busy,
every record carries the load it was measured under, and the docs show only quiet records.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

# A machine is busy when its 1-minute load average exceeds this many runnable tasks per core...
MAX_LOAD_PER_CORE = 0.5
# ...or when any process outside the run uses more than this share of one core.
BUSY_PROCESS_CPU = 0.10
# How long a start-up check watches the processes' CPU.
START_SAMPLE_S = 2.0


def load_average() -> float:
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


@dataclass(frozen=True)
class ProcessCpu:
    """A process's CPU seconds so far, its parent and what it runs."""

    pid: int
    ppid: int
    cpu_s: float
    command: str


def read_processes() -> dict[int, ProcessCpu]:
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, ProcessCpu] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                name_part, rest = handle.read().rsplit(")", 1)
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = rest.split()
        # After the command name: state, ppid, ..., utime and stime are the 12th and 13th.
        found[int(entry)] = ProcessCpu(int(entry), int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks,
                                       command or name_part.split("(", 1)[-1])
    return found


def descendants(processes: dict[int, ProcessCpu], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for process in processes.values():
        children.setdefault(process.ppid, []).append(process.pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    return tree


@dataclass
class BusyProcess:
    pid: int
    command: str
    cpu: float  # share of one core over the sample

    def describe(self) -> str:
        command = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        return f"pid {self.pid} at {self.cpu:.0%} of a core: {command}"


@dataclass
class LoadReport:
    """What a sample found: the load average and the busy processes outside the run."""

    load1: float
    cores: int
    busy_processes: list[BusyProcess] = field(default_factory=list)
    max_load_per_core: float = MAX_LOAD_PER_CORE

    @property
    def load_too_high(self) -> bool:
        return self.load1 > self.max_load_per_core * self.cores

    @property
    def busy(self) -> bool:
        return self.load_too_high or bool(self.busy_processes)

    def reasons(self) -> list[str]:
        reasons = []
        if self.load_too_high:
            reasons.append(f"1-minute load average {self.load1:.2f} is above {self.max_load_per_core * self.cores:.2f} "
                           f"({self.max_load_per_core:g} per core on {self.cores} cores)")
        reasons += [f"another process is busy: {process.describe()}" for process in self.busy_processes]
        return reasons

    def as_record(self) -> dict:
        return {"load1": round(self.load1, 2), "busy_processes": [
            {"pid": p.pid, "cpu": round(p.cpu, 2), "command": p.command[:120]} for p in self.busy_processes]}


class LoadMonitor:
    """Samples the machine. `ours` says which processes belong to the run (the bench itself, its
    children, its lab and its scheduler): those never count as busy."""

    def __init__(self, ours: list[str] | None = None, max_load_per_core: float = MAX_LOAD_PER_CORE,
                 busy_cpu: float = BUSY_PROCESS_CPU, cores: int | None = None):
        self.markers = [marker for marker in ours or [] if marker]
        self.max_load_per_core = max_load_per_core
        self.busy_cpu = busy_cpu
        self.cores = cores or os.cpu_count() or 1
        self._previous: dict[int, ProcessCpu] = {}
        self._previous_at = 0.0
        self.reset_run()

    def _is_ours(self, process: ProcessCpu, own_tree: set[int]) -> bool:
        return process.pid in own_tree or any(marker in process.command for marker in self.markers)

    def _busy_since_last(self) -> list[BusyProcess]:
        now, current = time.monotonic(), read_processes()
        busy = []
        if self._previous:
            elapsed = max(now - self._previous_at, 1e-3)
            own_tree = descendants(current, os.getpid())
            for pid, process in current.items():
                before = self._previous.get(pid)
                if before is None or self._is_ours(process, own_tree):
                    continue
                share = (process.cpu_s - before.cpu_s) / elapsed
                if share > self.busy_cpu:
                    busy.append(BusyProcess(pid, process.command, share))
        self._previous, self._previous_at = current, now
        return sorted(busy, key=lambda p: -p.cpu)

    def check(self, sample_s: float = START_SAMPLE_S) -> LoadReport:
        """A fresh look: processes' CPU over sample_s seconds, and the load average."""
        self._previous = {}
        self._busy_since_last()
        time.sleep(sample_s)
        busy = self._busy_since_last()
        return LoadReport(load_average(), self.cores, busy, self.max_load_per_core)

    # During a run the load average counts the run itself (API server and scheduler keep both
    # cores busy), so only other processes mark a run busy; the load is recorded for the reader.
    def reset_run(self) -> None:
        self.run_max_load1 = 0.0
        self.run_busy: dict[int, BusyProcess] = {}

    def sample_run(self) -> None:
        self.run_max_load1 = max(self.run_max_load1, load_average())
        for process in self._busy_since_last():
            seen = self.run_busy.get(process.pid)
            if seen is None or process.cpu > seen.cpu:
                self.run_busy[process.pid] = process

    def run_record(self) -> dict:
        return {"max_load1": round(self.run_max_load1, 2), "busy_processes": [
            {"pid": p.pid, "cpu": round(p.cpu, 2), "command": p.command[:120]}
            for p in sorted(self.run_busy.values(), key=lambda p: -p.cpu)]}


def refusal_message(report: LoadReport) -> str:
    return ("bench: the machine is busy, so its figures would not be comparable:\n  - "
            + "\n  - ".join(report.reasons())
            + "\nWait until it is quiet, or run with --allow-busy to measure anyway "
              "(every record is then marked busy: true and left out of docs/performance.md).")
