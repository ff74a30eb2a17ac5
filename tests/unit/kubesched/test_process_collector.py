"""process_* cover the scheduler process and its children, and the CPU counter never goes down
when a child ends (test_kubesched_metrics.py compares the families with kube-scheduler's)."""

from __future__ import annotations

import subprocess
import sys
import time

from kubesched.process_collector import ProcessTreeCollector

CHILD = """
import sys, time
block = bytearray(80 * 1024 * 1024)  # resident: every page written
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 0.5
while time.process_time() < end:
    pass
sys.stdout.write("ready\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def values(collector: ProcessTreeCollector) -> dict[str, float]:
    return {family.samples[0].name: family.samples[0].value for family in collector.collect()}


def test_a_child_counts_while_it_runs_and_its_cpu_stays_once_it_is_gone():
    collector = ProcessTreeCollector()
    before = values(collector)
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        running = values(collector)
        assert running["process_resident_memory_bytes"] - before["process_resident_memory_bytes"] > 70 * 2**20
        assert running["process_cpu_seconds_total"] - before["process_cpu_seconds_total"] >= 0.45
    finally:
        child.stdin.close()
        child.wait(10)
    time.sleep(0.05)
    after = values(collector)
    assert after["process_cpu_seconds_total"] >= running["process_cpu_seconds_total"]  # reaped: still counted
    assert after["process_resident_memory_bytes"] < running["process_resident_memory_bytes"] - 70 * 2**20
    assert after["process_open_fds"] >= 3 and after["process_max_fds"] >= after["process_open_fds"]
    assert abs(after["process_start_time_seconds"] - time.time()) < 24 * 3600


def test_the_cpu_counter_never_goes_down(monkeypatch):
    """A child reaped between reading our children's stat and RUSAGE_CHILDREN counts in neither read."""
    import resource

    collector = ProcessTreeCollector()
    first = values(collector)["process_cpu_seconds_total"]

    class NoReaped:
        ru_utime = ru_stime = -1000.0  # as if a child's time had vanished

    monkeypatch.setattr(resource, "getrusage", lambda _who: NoReaped)
    assert values(collector)["process_cpu_seconds_total"] == first


def test_registering_reads_nothing_and_a_hidden_proc_stat_costs_only_the_boot_time(monkeypatch):
    """The role's unit hides /proc/stat (ProcSubset=pid): kubesched must still start and report."""
    import builtins

    from prometheus_client import CollectorRegistry

    real_open = builtins.open

    def sandboxed_open(path, *args, **kwargs):
        if str(path) == "/proc/stat":
            raise FileNotFoundError(2, "No such file or directory", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", sandboxed_open)
    collector = ProcessTreeCollector()

    def read_at_registration():
        raise AssertionError("the registry read /proc while registering")

    monkeypatch.setattr(collector, "collect", read_at_registration)
    CollectorRegistry(auto_describe=True).register(collector)
    monkeypatch.undo()
    monkeypatch.setattr(builtins, "open", sandboxed_open)
    figures = values(ProcessTreeCollector())
    assert abs(figures["process_start_time_seconds"] - time.time()) < 3600
    assert figures["process_cpu_seconds_total"] > 0
