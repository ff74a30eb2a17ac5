"""What each scheduler process holds, read from /proc: resident memory, threads, open files,
and the CPU it has used (reported, not judged).

An instance is its main process and every process under it (kubesched's watch and writer
processes, kubesched/apiproc.py), summed. ``judge`` says whether a process's figures stayed
flat: the median of the last tenth of its judged window against the median of the first
tenth, after a warm-up. A window starts again when the process becomes leader (a standby
that takes over builds its scheduling state then, which is a step, not a leak). Growth of at
most GROWTH_LIMIT is flat. A scheduler holds every pod, so its RSS may grow as fast as the
API's pod count over the same tenths did, and no faster: a cluster that grew (kwok behind on
a busy machine) is not a leak, memory that outgrows the pods it holds is.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from tests.bench.load import ProcessCpu

FIGURES = ("rss_mb", "threads", "fds")
GROWTH_LIMIT = 0.10


def descendants(pid: int) -> list[int]:
    """pid and every process below it (children of every thread, recursively)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as fh:
                    todo.extend(int(child) for child in fh.read().split())
            except OSError:
                continue
    return found


def read_process(pid: int) -> dict | None:
    """{rss_mb, threads, fds} of one process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return {"rss_mb": int(fields.get("VmRSS", "0 kB").split()[0]) / 1024.0, "threads": int(fields["Threads"]),
            "fds": fds}


def part_name(pid: int, root: int) -> str:
    """"main" for the instance's own process, kubesched's API children by their name ("watch",
    "writer": the argument before their socket's fd), "other" for anything else below it."""
    if pid == root:
        return "main"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")[:-1]
    except OSError:
        return "other"
    if len(argv) >= 2 and any(b"kubesched.apiproc import child_main" in arg for arg in argv):
        return argv[-2].decode(errors="replace")
    return "other"


def read_instance(pid: int, cpu: dict[int, ProcessCpu] | None = None) -> dict | None:
    """The figures of a process and everything below it, summed, and each part's own (parts:
    {main, watch, writer, ...: figures}); None when it is gone. With cpu (tests/bench/load.py's
    read_processes), also the CPU seconds they have used (cpu_s)."""
    total = {name: 0.0 for name in FIGURES}
    parts: dict[str, dict[str, float]] = {}
    seen, cpu_s = 0, 0.0
    for each in descendants(pid):
        figures = read_process(each)
        if figures is None:
            continue
        seen += 1
        part = parts.setdefault(part_name(each, pid), {name: 0.0 for name in FIGURES})
        for name in FIGURES:
            total[name] += figures[name]
            part[name] += figures[name]
        if cpu is not None and each in cpu:
            cpu_s += cpu[each].total_s
    if not seen:
        return None
    total["rss_mb"] = round(total["rss_mb"], 1)
    total["processes"] = seen
    total["parts"] = {name: {**part, "rss_mb": round(part["rss_mb"], 1)} for name, part in parts.items()}
    if cpu is not None:
        total["cpu_s"] = round(cpu_s, 2)
    return total


@dataclass(frozen=True)
class Verdict:
    pid: int
    role: str
    window_s: tuple[float, float]
    start: dict
    end: dict
    growth: dict
    pods: dict | None = None  # the API's pods at the start and end of the window, and their growth
    parts: dict | None = None  # each part's growth ({main, watch, writer: {figure: growth}}), where sampled

    @property
    def limits(self) -> dict[str, float]:
        """The growth each figure may show: GROWTH_LIMIT, and for RSS the pods' growth if more."""
        pods = self.pods["growth"] if self.pods else 0.0
        return {name: max(GROWTH_LIMIT, pods) if name == "rss_mb" else GROWTH_LIMIT for name in FIGURES}

    @property
    def flat(self) -> bool:
        return all(self.growth[name] <= limit for name, limit in self.limits.items())


def judge(samples: list[dict], *, warmup_s: float, min_window_s: float, run_warmup_until: float) -> list[Verdict]:
    """Verdicts for one process's samples ({t, rss_mb, threads, fds, leader}), one per stretch
    of one role that lasts at least min_window_s after its warm-up (warmup_s after it began,
    and never before run_warmup_until)."""
    stretches: list[list[dict]] = []
    for sample in samples:
        if not stretches or stretches[-1][-1]["leader"] != sample["leader"]:
            stretches.append([])
        stretches[-1].append(sample)
    verdicts = []
    for stretch in stretches:
        begin = max(stretch[0]["t"] + warmup_s, run_warmup_until)
        judged = [s for s in stretch if s["t"] >= begin]
        if not judged or judged[-1]["t"] - judged[0]["t"] < min_window_s:
            continue
        tenth = max(1, len(judged) // 10)
        start, end = _medians(judged[:tenth]), _medians(judged[-tenth:])
        growth = _growth(start, end)
        pods = None
        if all(s.get("pods") is not None for s in judged):
            first, last = (statistics.median(s["pods"] for s in part) for part in (judged[:tenth], judged[-tenth:]))
            pods = {"start": first, "end": last, "growth": round(last / first - 1.0, 3) if first else 0.0}
        names = set.intersection(*(set(s.get("parts") or ()) for s in judged))
        parts = {name: _growth(_medians([s["parts"][name] for s in judged[:tenth]]),
                               _medians([s["parts"][name] for s in judged[-tenth:]]))
                 for name in sorted(names)} or None
        verdicts.append(Verdict(stretch[0]["pid"], "leader" if stretch[0]["leader"] else "standby",
                                (judged[0]["t"], judged[-1]["t"]), start, end, growth, pods, parts))
    return verdicts


def _medians(samples: list[dict]) -> dict[str, float]:
    return {name: statistics.median(s[name] for s in samples) for name in FIGURES}


def _growth(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """Each figure's growth from start to end."""
    return {name: round(end[name] / start[name] - 1.0, 3) if start[name] else 0.0 for name in FIGURES}


def cpu_summary(samples: list[dict]) -> dict[str, dict]:
    """Where the CPU went between the first and the last sample: the schedulers as leader and as
    standby (each process's counter, split by the role it had at each sample), and each part of
    the lab and the harness ({t, instances: {slot: {pid, cpu_s, leader}}, cpu_s: {name: s}}).
    A counter that went down is a process started again: its new value is all new."""
    used: dict[str, float] = {}
    last: dict[tuple, float] = {}

    def add(part: str, key: tuple, value: float | None) -> None:
        if value is None:
            return
        before = last.get(key, 0.0)
        used[part] = used.get(part, 0.0) + (value - before if value >= before else value)
        last[key] = value

    for sample in samples:
        for figures in sample["instances"].values():
            add("schedulers as leader" if figures.get("leader") else "schedulers as standby",
                ("instance", figures["pid"]), figures.get("cpu_s"))
        for name, value in (sample.get("cpu_s") or {}).items():
            add(name, ("part", name), value)
    seconds = samples[-1]["t"] - samples[0]["t"] if len(samples) > 1 else 0.0
    return {part: {"cpu_s": round(value, 1), "cores": round(value / seconds, 3) if seconds else None}
            for part, value in sorted(used.items(), key=lambda item: -item[1])}
