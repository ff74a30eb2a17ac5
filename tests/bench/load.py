"""Is the machine quiet enough to measure, and did it stay quiet while the bench measured?

The judge is the machine's own CPU clock. /proc/stat counts the busy time of every core,
whoever spent it; the run counts the CPU time of its own processes: the bench, its lab
(etcd, kube-apiserver, kube-controller-manager), the schedulers and every child any of them
ever had. What is left over was spent by someone else, however briefly their processes
lived: a compiler or a test runner that starts and ends between two samples is invisible
in the process table, never in /proc/stat. A run in which others spent more than a tenth of
a core on average, or a quarter of a core over any one sample interval, is disturbed: its
record is marked busy, the bench measures it again once the machine is quiet, and the docs
never show a busy record.

How the run's own CPU time is counted, exited processes included: a process's
/proc/<pid>/stat carries its own CPU time (all its threads, ended ones too) and the CPU
time of every child it has waited for (cutime, cstime), which in turn includes theirs.
So the run's total is the sum of own + waited-for time over the processes now in its tree:
a process that ended and was reaped moved its time into its parent's counters, still in
the tree. The lab's daemons leave the tree when lab/lab.sh, their parent, exits; the bench
therefore makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so orphaned
descendants are re-parented to it instead of to init, and lab.private_lab reaps the ones it
stops. A cgroup (cpuacct.usage, or cpu.stat in cgroup v2) would count the same without a
subreaper, but making one needs root or a delegated cgroup v2 subtree, which a workstation
running `make bench` under systemd does not give an ordinary user; /proc needs neither.

How closely the two clocks agree: `python -m tests.bench.load --noise 120` compares, every
sample interval, /proc/stat with the sum over every process on the machine. On this 2-core
machine, loaded by other work, they differed by -0.21 to +0.15 cores over 60 two-second
intervals (median -0.005, 95th percentile +0.075): /proc/stat charges each tick to whatever
runs then, a process's own times are exact. Kernel threads add a few hundredths of a core to
what a run counts as others'. The thresholds sit above both.
"""

from __future__ import annotations

import ctypes
import glob
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from tests.bench.measure import percentile

# A machine is busy when its 1-minute load average exceeds this many runnable tasks per core
# (judged before the bench starts: during a run the run itself keeps both cores busy)...
MAX_LOAD_PER_CORE = 0.5
# ...or when other processes use more than this many cores on average over a sample or a run...
MAX_OTHER_CORES = 0.10
# ...or more than this over any one sample interval during a run (a compiler, a test runner).
MAX_OTHER_BURST_CORES = 0.25
# Below this many CPU seconds, others' CPU never makes a window busy on average: what the two
# clocks' disagreement can add up to over a window of a few seconds (module docstring).
MIN_OTHER_CPU_S = 0.5
# How long the check before the bench (and before a run measured again) watches the machine.
START_SAMPLE_S = 5.0
# How long a run waits for the machine to be quiet before it starts (or is measured again):
# the 1-minute load average a previous run leaves takes about 1.5 minutes to fall under 0.5
# per core, and a busy machine gets ten minutes to settle.
QUIET_WAIT_S = 600
# How often a run samples the machine and its own processes.
RUN_SAMPLE_S = 2.0
# Processes named in a report: at most this many, each with at least this much CPU.
NAMED_PROCESSES = 5
NAMED_PROCESS_CPU_S = 0.05

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants (the lab's daemons once lab.sh exits) are re-parented to this
    process instead of init, so their CPU time stays in the run's tree until they are reaped
    here. False where the kernel refuses (not Linux, or older than 3.4)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def load_average() -> float:
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


@dataclass(frozen=True)
class MachineCpu:
    """CPU seconds of every core since boot, from the first line of /proc/stat: what ran in
    processes (user, nice, system) and what the hypervisor gave to other guests (steal)."""

    busy_s: float
    stolen_s: float


def read_machine() -> MachineCpu:
    with open("/proc/stat") as handle:
        fields = handle.readline().split()
    # cpu user nice system idle iowait irq softirq steal guest guest_nice; guest time is in user.
    user, nice, system, steal = (int(fields[i]) for i in (1, 2, 3, 8))
    return MachineCpu((user + nice + system) * TICK_S, steal * TICK_S)


@dataclass(frozen=True)
class ProcessCpu:
    """One process's CPU seconds: its own (every thread, ended ones too) and those of the
    children it has waited for (which include theirs)."""

    pid: int
    ppid: int
    own_s: float
    reaped_s: float

    @property
    def total_s(self) -> float:
        return self.own_s + self.reaped_s


def read_processes() -> dict[int, ProcessCpu]:
    found: dict[int, ProcessCpu] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command name: state, ppid, ..., utime, stime, cutime, cstime (12th to 15th).
        found[int(entry)] = ProcessCpu(int(entry), int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S,
                                       (int(fields[13]) + int(fields[14])) * TICK_S)
    return found


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        if command:
            return command
        with open(f"/proc/{pid}/comm") as handle:
            return f"[{handle.read().strip()}]"
    except OSError:
        return "(exited)"


def descendants(processes: dict[int, ProcessCpu], roots: Iterable[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for process in processes.values():
        children.setdefault(process.ppid, []).append(process.pid)
    tree: set[int] = set()
    todo = [pid for pid in roots if pid in processes]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def pid_file_processes(directory: str) -> Callable[[], list[int]]:
    """The processes a lab started by lab/lab.sh in directory runs (its *.pid files): the
    run's own when the bench uses an API server it did not start (--kubeconfig)."""

    def read() -> list[int]:
        pids = []
        for path in glob.glob(os.path.join(directory, "*.pid")):
            try:
                with open(path) as handle:
                    pids.append(int(handle.read().strip()))
            except (OSError, ValueError):
                continue
        return pids

    return read


@dataclass(frozen=True)
class Sample:
    """The machine's CPU clock and the process table at one moment."""

    at: float
    machine: MachineCpu
    processes: dict[int, ProcessCpu]
    ours: frozenset[int]
    load1: float

    @property
    def ours_s(self) -> float:
        return sum(self.processes[pid].total_s for pid in self.ours)


def sample(extra_roots: Callable[[], Iterable[int]] = lambda: ()) -> Sample:
    """Machine first, then the processes: a process's counter can only be ahead of the
    machine's by the few milliseconds the scan takes."""
    machine, processes = read_machine(), read_processes()
    ours = frozenset(descendants(processes, [os.getpid(), *extra_roots()]))
    return Sample(time.monotonic(), machine, processes, ours, load_average())


def others_between(before: Sample, after: Sample) -> dict[int, tuple[float, float]]:
    """(own, reaped) CPU seconds each process outside the run spent between two samples: its
    own, and the whole lives of children that ended and it waited for meanwhile; a process
    that appeared in between counts whole. Only for naming: the judgement is the machine's
    clock."""
    spent = {}
    for pid, process in after.processes.items():
        if pid in after.ours or pid in before.ours:
            continue
        earlier = before.processes.get(pid)
        own = process.own_s - (earlier.own_s if earlier else 0.0)
        reaped = process.reaped_s - (earlier.reaped_s if earlier else 0.0)
        if own > 0 or reaped > 0:
            spent[pid] = (max(own, 0.0), max(reaped, 0.0))
    return spent


@dataclass
class NamedProcess:
    pid: int
    own_s: float
    reaped_s: float
    command: str

    @property
    def cpu_s(self) -> float:
        return self.own_s + self.reaped_s

    def describe(self, seconds: float) -> str:
        command = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        text = f"pid {self.pid}, {self.own_s:.1f} CPU-s ({self.own_s / seconds:.0%} of a core)"
        if self.reaped_s >= NAMED_PROCESS_CPU_S:
            text += f" and {self.reaped_s:.1f} CPU-s of children that ended"
        return f"{text}: {command}"

    def as_record(self) -> dict:
        return {"pid": self.pid, "cpu_s": round(self.own_s, 2), "children_cpu_s": round(self.reaped_s, 2),
                "command": self.command[:120]}


@dataclass
class Window:
    """What the machine did over a stretch of time (a start check, or one run): its CPU time,
    the run's own, the rest, and the load average's range."""

    cores: int
    first: Sample
    last: Sample
    peak_other_cores: float = 0.0
    min_load1: float = 0.0
    max_load1: float = 0.0
    spent_by_others: dict[int, tuple[float, float]] = field(default_factory=dict)
    commands: dict[int, str] = field(default_factory=dict)

    @classmethod
    def opened(cls, first: Sample, cores: int) -> "Window":
        return cls(cores, first, first, min_load1=first.load1, max_load1=first.load1)

    def add(self, current: Sample) -> None:
        previous = self.last
        elapsed = current.at - previous.at
        if elapsed > 0:
            self.peak_other_cores = max(self.peak_other_cores, _other_s(previous, current) / elapsed)
        for pid, (own, reaped) in others_between(previous, current).items():
            total_own, total_reaped = self.spent_by_others.get(pid, (0.0, 0.0))
            self.spent_by_others[pid] = (total_own + own, total_reaped + reaped)
            if pid not in self.commands and own + reaped >= NAMED_PROCESS_CPU_S:
                self.commands[pid] = command_of(pid)
        self.min_load1 = min(self.min_load1, current.load1)
        self.max_load1 = max(self.max_load1, current.load1)
        self.last = current

    @property
    def seconds(self) -> float:
        return self.last.at - self.first.at

    @property
    def machine_s(self) -> float:
        return self.last.machine.busy_s - self.first.machine.busy_s

    @property
    def ours_s(self) -> float:
        return self.last.ours_s - self.first.ours_s

    @property
    def stolen_s(self) -> float:
        return self.last.machine.stolen_s - self.first.machine.stolen_s

    @property
    def other_s(self) -> float:
        return _other_s(self.first, self.last)

    @property
    def other_cores(self) -> float:
        return self.other_s / self.seconds if self.seconds > 0 else 0.0

    def named(self) -> list[NamedProcess]:
        ranked = sorted(self.spent_by_others.items(), key=lambda item: -sum(item[1]))
        return [NamedProcess(pid, own, reaped, self.commands.get(pid) or command_of(pid))
                for pid, (own, reaped) in ranked[:NAMED_PROCESSES] if own + reaped >= NAMED_PROCESS_CPU_S]

    def as_record(self) -> dict:
        return {"seconds": round(self.seconds, 1), "min_load1": round(self.min_load1, 2),
                "max_load1": round(self.max_load1, 2), "machine_cpu_s": round(self.machine_s, 2),
                "ours_cpu_s": round(self.ours_s, 2), "other_cpu_s": round(self.other_s, 2),
                "stolen_cpu_s": round(self.stolen_s, 2), "other_cores": round(self.other_cores, 3),
                "peak_other_cores": round(self.peak_other_cores, 3),
                "busy_processes": [process.as_record() for process in self.named()]}


def _other_s(before: Sample, after: Sample) -> float:
    """CPU seconds the machine spent outside the run between two samples, stolen time
    included (a neighbouring guest took the core); never negative, since the two clocks
    disagree by a tick or two."""
    machine = after.machine.busy_s - before.machine.busy_s + after.machine.stolen_s - before.machine.stolen_s
    return max(0.0, machine - (after.ours_s - before.ours_s))


@dataclass
class LoadReport:
    """A judged window: the check before the bench, or one run."""

    window: Window
    max_load_per_core: float = MAX_LOAD_PER_CORE
    max_other_cores: float = MAX_OTHER_CORES
    max_burst_cores: float | None = None  # judged during runs only
    judge_load: bool = True  # before anything starts; during a run the run itself loads the machine

    @property
    def load1(self) -> float:
        return self.window.last.load1

    @property
    def cores(self) -> int:
        return self.window.cores

    @property
    def load_too_high(self) -> bool:
        return self.judge_load and self.load1 > self.max_load_per_core * self.cores

    @property
    def others_too_busy(self) -> bool:
        return self.window.other_s > max(self.max_other_cores * self.window.seconds, MIN_OTHER_CPU_S)

    @property
    def burst_too_high(self) -> bool:
        return self.max_burst_cores is not None and self.window.peak_other_cores > self.max_burst_cores

    @property
    def busy(self) -> bool:
        return self.load_too_high or self.others_too_busy or self.burst_too_high

    def reasons(self) -> list[str]:
        window, reasons = self.window, []
        if self.load_too_high:
            reasons.append(f"1-minute load average {self.load1:.2f} is above {self.max_load_per_core * self.cores:.2f} "
                           f"({self.max_load_per_core:g} per core on {self.cores} cores)")
        if self.others_too_busy:
            reasons.append(f"other processes used {window.other_s:.1f} CPU-s in {window.seconds:.0f} s "
                           f"({window.other_cores:.2f} cores on average, more than {self.max_other_cores:g})")
        if self.burst_too_high:
            reasons.append(f"other processes used {window.peak_other_cores:.2f} cores over one "
                           f"{RUN_SAMPLE_S:g}-s interval (more than {self.max_burst_cores:g})")
        if reasons:
            named = window.named()
            reasons += [f"another process: {process.describe(window.seconds)}" for process in named]
            if not named:
                reasons.append("no process outside the run lived long enough to be named: short-lived ones, "
                               "reaped by a parent outside the run, or kernel threads")
        return reasons

    def as_record(self) -> dict:
        return {"load1": round(self.load1, 2), **self.window.as_record(), "busy": self.busy,
                "reasons": self.reasons()}


class LoadMonitor:
    """Samples the machine's CPU clock and the run's own processes (this process's tree, and
    with extra_roots the processes of a lab it did not start)."""

    def __init__(self, extra_roots: Callable[[], Iterable[int]] = lambda: (),
                 max_load_per_core: float = MAX_LOAD_PER_CORE, max_other_cores: float = MAX_OTHER_CORES,
                 max_burst_cores: float = MAX_OTHER_BURST_CORES, cores: int | None = None):
        self.extra_roots = extra_roots
        self.max_load_per_core = max_load_per_core
        self.max_other_cores = max_other_cores
        self.max_burst_cores = max_burst_cores
        self.cores = cores or os.cpu_count() or 1
        self._run: Window | None = None
        self._session: Sample | None = None

    def sample(self) -> Sample:
        return sample(self.extra_roots)

    def check(self, sample_s: float = START_SAMPLE_S) -> LoadReport:
        """A fresh look before anything starts: the load average, and other processes' CPU
        over sample_s seconds."""
        window = Window.opened(self.sample(), self.cores)
        time.sleep(sample_s)
        window.add(self.sample())
        return LoadReport(window, self.max_load_per_core, self.max_other_cores)

    def wait_until_quiet(self, timeout_s: float, on_busy: Callable[[LoadReport], None]) -> LoadReport:
        """Check until the machine is quiet or timeout_s has passed; returns the last check."""
        deadline = time.monotonic() + timeout_s
        while True:
            report = self.check()
            if not report.busy or time.monotonic() >= deadline:
                return report
            on_busy(report)
            time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))

    def start_session(self) -> None:
        self._session = self.sample()

    def session_report(self) -> LoadReport | None:
        """The whole session so far: the CPU other processes used from start_session() to now."""
        if self._session is None:
            return None
        window = Window.opened(self._session, self.cores)
        window.add(self.sample())
        return LoadReport(window, self.max_load_per_core, self.max_other_cores, judge_load=False)

    def start_run(self) -> None:
        self._run = Window.opened(self.sample(), self.cores)

    def sample_run(self) -> None:
        if self._run is not None:
            self._run.add(self.sample())

    def run_report(self) -> LoadReport | None:
        """The run so far, judged; call sample_run() first for an up-to-date end."""
        if self._run is None:
            return None
        return LoadReport(self._run, self.max_load_per_core, self.max_other_cores, self.max_burst_cores,
                          judge_load=False)


def refusal_message(report: LoadReport) -> str:
    return ("bench: the machine is busy, so its figures would not be comparable:\n  - "
            + "\n  - ".join(report.reasons())
            + "\nWait until it is quiet, or run with --allow-busy to measure anyway "
              "(every record is then marked busy: true and left out of docs/performance.md).")


def clock_noise(seconds: float, interval_s: float = RUN_SAMPLE_S) -> list[float]:
    """Per interval, in cores: /proc/stat's busy time minus the sum of every process's own and
    waited-for time; what the machine's clock and the processes' disagree by."""
    def everything() -> tuple[float, float, float]:
        machine = read_machine()
        return (time.monotonic(), machine.busy_s + machine.stolen_s,
                sum(process.total_s for process in read_processes().values()))

    differences, previous = [], everything()
    end = previous[0] + seconds
    while previous[0] < end:
        time.sleep(interval_s)
        current = everything()
        differences.append(((current[1] - previous[1]) - (current[2] - previous[2])) / (current[0] - previous[0]))
        previous = current
    return differences


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.bench.load",
                                     description="How far the machine's CPU clock and its processes' disagree.")
    parser.add_argument("--noise", type=float, required=True, metavar="SECONDS", help="how long to watch")
    args = parser.parse_args(argv)
    differences = clock_noise(args.noise)
    print(f"{len(differences)} intervals of {RUN_SAMPLE_S:g} s; /proc/stat minus the processes, in cores: "
          f"min {min(differences):.3f}, median {percentile(differences, 0.5):.3f}, "
          f"95th percentile {percentile(differences, 0.95):.3f}, max {max(differences):.3f}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
