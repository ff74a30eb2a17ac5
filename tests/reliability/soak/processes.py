"""What each scheduler process holds, read from /proc: resident memory, threads, open files.

An instance is its main process and every process under it (kubesched's watch and writer
processes, kubesched/apiproc.py), summed. ``judge`` says whether a process's figures stayed
flat: the median of the last tenth of its judged window against the median of the first
tenth, after a warm-up. A window starts again when the process becomes leader (a standby
that takes over builds its scheduling state then, which is a step, not a leak). The API's
pod count over the same tenths is reported beside it: a scheduler holds every pod, so a
cluster that grew (kwok behind on a busy machine) grows it too. It is context, not judged.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

FIGURES = ("rss_mb", "threads", "fds")


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


def read_instance(pid: int) -> dict | None:
    """The figures of a process and everything below it, summed; None when it is gone."""
    total = {name: 0.0 for name in FIGURES}
    seen = 0
    for each in descendants(pid):
        figures = read_process(each)
        if figures is None:
            continue
        seen += 1
        for name in FIGURES:
            total[name] += figures[name]
    if not seen:
        return None
    total["rss_mb"] = round(total["rss_mb"], 1)
    total["processes"] = seen
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

    @property
    def flat(self) -> bool:
        return all(g <= 0.10 for g in self.growth.values())


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
        start = {name: statistics.median(s[name] for s in judged[:tenth]) for name in FIGURES}
        end = {name: statistics.median(s[name] for s in judged[-tenth:]) for name in FIGURES}
        growth = {name: round(end[name] / start[name] - 1.0, 3) if start[name] else 0.0 for name in FIGURES}
        pods = None
        if all(s.get("pods") is not None for s in judged):
            first, last = (statistics.median(s["pods"] for s in part) for part in (judged[:tenth], judged[-tenth:]))
            pods = {"start": first, "end": last, "growth": round(last / first - 1.0, 3) if first else 0.0}
        verdicts.append(Verdict(stretch[0]["pid"], "leader" if stretch[0]["leader"] else "standby",
                                (judged[0]["t"], judged[-1]["t"]), start, end, growth, pods))
    return verdicts
