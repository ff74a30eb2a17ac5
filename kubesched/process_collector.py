"""process_* metrics as the Go client exposes them (client_golang's process collector, which
component-base registers for every Kubernetes component): names, types and help texts of
v1.24.0, the version kube-scheduler v1.37.1 builds with.

kubesched is one scheduler process plus the API I/O processes it starts (apiproc.py), so the
figures a dashboard reads as "the scheduler's cost" cover the tree: process_cpu_seconds_total is
the CPU time of the scheduler process, of its live children and of the children it has already
reaped (a child restarted after a crash keeps counting; the counter never goes down), and the
resident and virtual memory are the sums over the scheduler process and its live children. The
per-process limits stay per process: process_open_fds and process_max_fds (and the address
space limit) are the scheduler process's own, so their ratio still says how close it is to its
limit; process_start_time_seconds is its start (where systemd hides /proc/stat, ProcSubset=pid,
the clock when kubesched's metrics were loaded, less than a second after it started).
process_network_*_bytes_total are, as in Go, the counters of the network namespace the process
runs in (/proc/self/net/netstat). Every figure is read from the process's own /proc/<pid>,
which the role's sandboxed unit leaves visible; what cannot be read is left out, as Go does.
Linux only, like Go's: elsewhere nothing is reported.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = resource.getpagesize()
# procfs reports an unlimited limit as the largest uint64, and so does Go's collector.
UNLIMITED = float(2**64 - 1)


def _stat(pid: str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def _children(pid: str) -> list[str]:
    """The children of every thread of pid (a child is a child of the thread that started it)."""
    found: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found.extend(fh.read().split())
        except OSError:  # the thread ended between listing and reading
            continue
    return found


def _boot_time() -> float | None:
    """btime of /proc/stat; None where it is hidden (systemd's ProcSubset=pid, as the role's unit has)."""
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _netstat_octets() -> tuple[float, float] | None:
    """IpExt InOctets and OutOctets of /proc/self/net/netstat (procfs Netstat, as Go reads it)."""
    try:
        with open("/proc/self/net/netstat") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("IpExt:"):
            row = dict(zip(names.split()[1:], values.split()[1:]))
            return float(row.get("InOctets", 0)), float(row.get("OutOctets", 0))
    return None


def _limit(kind: int) -> float:
    soft = resource.getrlimit(kind)[0]
    return UNLIMITED if soft == resource.RLIM_INFINITY else float(soft)


# Where /proc/stat is hidden: the clock when this module was imported, as kubesched started.
_IMPORTED_AT = time.time()


class ProcessTreeCollector:
    """The process_* families of the scheduler process and its children (see the module's docstring)."""

    def __init__(self, pid: str = "self"):
        self.pid = pid
        self._cpu_high_water = 0.0
        self._lock = threading.Lock()

    def describe(self) -> Iterable:
        """The families' names, without reading /proc (the registry asks at registration)."""
        for name in ("process_cpu_seconds_total", "process_network_receive_bytes_total",
                     "process_network_transmit_bytes_total"):
            yield CounterMetricFamily(name, "")
        for name in ("process_virtual_memory_bytes", "process_resident_memory_bytes", "process_start_time_seconds",
                     "process_open_fds", "process_max_fds", "process_virtual_memory_max_bytes"):
            yield GaugeMetricFamily(name, "")

    def collect(self) -> Iterable:
        own = _stat(self.pid)
        if own is None:  # no /proc: not Linux
            return
        utime, stime, start_ticks, vsize, rss = int(own[11]), int(own[12]), int(own[19]), int(own[20]), int(own[21])
        cpu = (utime + stime) / TICKS
        # Children already reaped: their CPU time stays in ours (RUSAGE_CHILDREN).
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu += reaped.ru_utime + reaped.ru_stime
        for child in _children(self.pid):
            fields = _stat(child)
            if fields is None:
                continue
            cpu += (int(fields[11]) + int(fields[12])) / TICKS
            vsize += int(fields[20])
            rss += int(fields[21])
        with self._lock:  # a child reaped between the two reads above would count in neither
            self._cpu_high_water = cpu = max(cpu, self._cpu_high_water)
        yield CounterMetricFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                                  value=cpu)
        yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", value=vsize)
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                value=rss * PAGE_SIZE)
        boot = _boot_time()
        yield GaugeMetricFamily("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                                value=_IMPORTED_AT if boot is None else boot + start_ticks / TICKS)
        try:
            open_fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            open_fds = None
        if open_fds is not None:
            yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", value=open_fds)
        yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.",
                                value=_limit(resource.RLIMIT_NOFILE))
        yield GaugeMetricFamily("process_virtual_memory_max_bytes",
                                "Maximum amount of virtual memory available in bytes.", value=_limit(resource.RLIMIT_AS))
        octets = _netstat_octets()
        if octets is not None:
            yield CounterMetricFamily("process_network_receive_bytes_total",
                                      "Number of bytes received by the process over the network.", value=octets[0])
            yield CounterMetricFamily("process_network_transmit_bytes_total",
                                      "Number of bytes sent by the process over the network.", value=octets[1])
