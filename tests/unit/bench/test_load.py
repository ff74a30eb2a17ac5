"""The bench refuses a busy machine, records the load, and the docs show only quiet records."""

from __future__ import annotations

import os

import pytest

from tests.bench import cli, load, report
from tests.bench.load import BusyProcess, LoadMonitor, LoadReport, ProcessCpu
from tests.bench.runner import Progress, RunContext, load_fields


class FakeMachine:
    """A process table whose CPU counters advance by what each test says, and a load average."""

    def __init__(self, monkeypatch, load1: float = 0.1):
        self.load1 = load1
        self.cpu: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.commands: dict[int, str] = {}
        self.parents: dict[int, int] = {}
        monkeypatch.setattr(load, "read_processes", self.read)
        monkeypatch.setattr(load, "load_average", lambda: self.load1)
        monkeypatch.setattr(load.time, "sleep", self.advance)
        self.clock = 1000.0
        monkeypatch.setattr(load.time, "monotonic", lambda: self.clock)

    def add(self, pid: int, command: str, cores: float, parent: int = 1) -> None:
        self.cpu[pid], self.rate[pid], self.commands[pid], self.parents[pid] = 0.0, cores, command, parent

    def advance(self, seconds: float) -> None:
        self.clock += seconds
        for pid, cores in self.rate.items():
            self.cpu[pid] += cores * seconds

    def read(self) -> dict[int, ProcessCpu]:
        return {pid: ProcessCpu(pid, self.parents[pid], self.cpu[pid], self.commands[pid]) for pid in self.cpu}


def test_a_quiet_machine_is_not_busy(monkeypatch):
    machine = FakeMachine(monkeypatch, load1=0.3)
    machine.add(100, "sshd", 0.01)
    found = LoadMonitor(cores=2).check()
    assert not found.busy and found.reasons() == []


def test_a_high_load_average_is_busy_and_says_so(monkeypatch):
    FakeMachine(monkeypatch, load1=3.5)
    found = LoadMonitor(cores=2).check()
    assert found.busy
    assert "1-minute load average 3.50 is above 1.00" in found.reasons()[0]


def test_another_cpu_heavy_process_is_named(monkeypatch):
    machine = FakeMachine(monkeypatch)
    machine.add(4242, "python -m pytest tests/integration", 0.9)
    found = LoadMonitor(cores=2).check()
    assert [p.pid for p in found.busy_processes] == [4242]
    assert "pid 4242 at 90% of a core: python -m pytest tests/integration" in found.reasons()[0]


def test_the_runs_own_processes_never_count(monkeypatch):
    machine = FakeMachine(monkeypatch)
    machine.add(os.getpid(), "python -m tests.bench", 0.5)
    machine.add(5001, "kubesched --config x", 1.0, parent=os.getpid())  # our child
    machine.add(5002, "etcd --data-dir /tmp/benchwork/lab/etcd-data", 0.8)  # the lab, reparented to init
    found = LoadMonitor(ours=["/tmp/benchwork"], cores=2).check()
    assert not found.busy


def test_a_busy_machine_is_refused_before_anything_starts(monkeypatch, capsys):
    machine = FakeMachine(monkeypatch, load1=6.0)
    machine.add(777, "go build ./...", 1.0)

    def must_not_start(*_args, **_kwargs):
        raise AssertionError("the bench started a lab on a busy machine")

    monkeypatch.setattr(cli.PrivateLab, "on_free_ports", must_not_start)
    monkeypatch.setattr(cli, "available", lambda name: None)
    assert cli.main(["--workload", "SchedulingBasic/500Nodes", "--scheduler", "raw-binder"]) == 2
    message = capsys.readouterr().err
    assert "the machine is busy" in message
    assert "load average 6.00" in message and "go build ./..." in message
    assert "--allow-busy" in message


def _context(allow_busy: bool, start: LoadReport, monitor: LoadMonitor) -> RunContext:
    context = RunContext(None, "ns", "/tmp", None, Progress(quiet=True), 60)
    context.load_monitor, context.start_load, context.allow_busy = monitor, start, allow_busy
    return context


def test_records_carry_the_load_and_allow_busy_marks_every_one(monkeypatch):
    machine = FakeMachine(monkeypatch, load1=0.2)
    monitor = LoadMonitor(cores=2)
    quiet = monitor.check()
    monitor.reset_run()
    monitor.sample_run()
    machine.advance(2)
    monitor.sample_run()
    fields = load_fields(_context(False, quiet, monitor))
    assert fields["busy"] is False
    assert fields["load"] == {"start": {"load1": 0.2, "busy_processes": []},
                              "during": {"max_load1": 0.2, "busy_processes": []}}
    assert load_fields(_context(True, quiet, monitor))["busy"] is True


def test_a_process_busy_during_the_run_marks_the_record(monkeypatch):
    machine = FakeMachine(monkeypatch, load1=0.2)
    monitor = LoadMonitor(cores=2)
    quiet = monitor.check()
    monitor.reset_run()
    monitor.sample_run()
    machine.add(9000, "make molecule", 1.0)
    machine.advance(2)
    monitor.sample_run()  # first seen here: its CPU is counted from the next sample
    machine.advance(2)
    machine.load1 = 2.5
    monitor.sample_run()
    fields = load_fields(_context(False, quiet, monitor))
    assert fields["busy"] is True
    assert fields["load"]["during"]["max_load1"] == 2.5
    assert [p["command"] for p in fields["load"]["during"]["busy_processes"]] == ["make molecule"]


def _record(scheduler: str, busy: bool | None, pods_per_s: float) -> dict:
    record = {"workload": "SchedulingBasic/500Nodes", "mode": "backlog", "scheduler": scheduler, "nodes": 500,
              "pods": 1000, "bound": 1000, "complete": True, "qps_profile": "unthrottled", "qps": 5000,
              "burst": 5000, "pods_per_s": pods_per_s, "p50_ms": 1, "p99_ms": 2, "startup_s": 1.0,
              "makespan_s": 3.0, "cpu_s": 2.0, "peak_rss_mb": 100.0, "commit": "abc"}
    if busy is not None:
        record["busy"] = busy
        record["load"] = {"start": {"load1": 0.12, "busy_processes": []},
                          "during": {"max_load1": 2.1, "busy_processes": []}}
    return record


def test_the_docs_table_shows_only_quiet_records_and_names_the_rest():
    document = {"generated": "now", "host": {"cpus": 2, "memory_gib": 24},
                "records": [_record("kubesched", False, 111.1), _record("kube-scheduler", True, 999.9),
                            _record("raw-binder", None, 777.7)]}
    table = report.markdown_table(document)
    assert "111.1" in table and "0.12 / 2.1" in table
    assert "999.9" not in table and "777.7" not in table
    assert "Left out: 2 record(s)" in table
    assert "SchedulingBasic/500Nodes kube-scheduler unthrottled" in table
    assert "SchedulingBasic/500Nodes raw-binder unthrottled" in table


@pytest.mark.parametrize("cpu", [0.5, 0.11])
def test_busy_process_description_is_readable(cpu):
    text = BusyProcess(1, "x" * 200, cpu).describe()
    assert text.startswith(f"pid 1 at {cpu:.0%} of a core: ") and text.endswith("...") and len(text) < 120


def _at(record: dict, **fields) -> dict:
    return {**record, **fields}


def test_the_targets_are_judged_from_quiet_records_only():
    quiet = _record("kubesched", False, 0.0)
    records = [
        _at(quiet, workload="SchedulingBasic/5000Nodes", pods=10000, bound=10000, pods_per_s=400.0, cpu_s=20.0, main_cpu_s=10.0),
        _at(quiet, workload="SchedulingBasic/5000Nodes", scheduler="kube-scheduler", pods_per_s=250.0),
        _at(quiet, workload="SchedulingBasic/5000Nodes", scheduler="raw-binder", pods_per_s=500.0),
        _at(quiet, workload="SteadyArrival/500Nodes", pods=3000, bound=2980, p99_ms=60),
        _at(quiet, workload="SteadyArrival/500Nodes", scheduler="raw-binder", p99_ms=50),
        _at(quiet, workload="Preemption/500Nodes", pods_per_s=9.0),
        _at(quiet, workload="Preemption/500Nodes", scheduler="kube-scheduler", pods_per_s=10.0, busy=True),
    ]
    table = report.markdown_table({"generated": "now", "host": {"cpus": 2, "memory_gib": 24}, "records": records})
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert rows["SteadyArrival/500Nodes: kubesched binds ≥ 99% of arrivals"].endswith("| 99.3% (2,980 of 3,000) | yes |")
    assert rows["SteadyArrival/500Nodes: kubesched p99 ≤ 1.5× the raw binder's"].endswith("| 1.20× (60 ms against 50 ms) | yes |")
    assert rows["SchedulingBasic/5000Nodes: kubesched CPU per pod ≤ 1.3 ms"].endswith(
        "| 2.00 ms (all processes); 1.00 ms in the scheduling process | no |")
    assert rows["SchedulingBasic/5000Nodes: kubesched ≥ 70% of the raw binder"].endswith("| 80% (400.0 against 500.0 pods/s) | yes |")
    assert rows["SchedulingBasic/5000Nodes: kubesched ≥ 1.0× kube-scheduler"].endswith("| 1.60× (400.0 against 250.0 pods/s) | yes |")
    # kube-scheduler's Preemption record is busy: no target is judged on it.
    assert not any(key.startswith("Preemption/500Nodes:") for key in rows)
    assert not any("loop-only" in key for key in rows)
