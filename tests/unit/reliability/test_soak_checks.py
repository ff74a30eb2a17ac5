"""The soak's end-of-run checks: memory flatness per process and role, and the cache dumps of
both schedulers (kube-scheduler's klog writes a multi-line value as key=<...>, kubesched's as one
quoted line) set beside the API's objects."""

from tests.reliability.soak.cache_check import compare, differences, in_flux, parse_dump
from tests.reliability.soak.processes import cpu_summary, judge

KUBE_SCHEDULER_DUMP = """I1126 00:06:55.618700    5189 comparer.go:64] "Cache mismatch" missedPods=["u9"] redundantPods=[]
I1126 00:06:55.618742    5189 dumper.go:52] "Dump of cached NodeInfo" nodes=<
\tNode name: n1
\tDeleted: false
\tRequested Resources: &{MilliCPU:100 Memory:0 EphemeralStorage:0 AllowedPodNumber:0 ScalarResources:map[]}
\tAllocatable Resources:&{MilliCPU:4000 Memory:17179869184 EphemeralStorage:0 AllowedPodNumber:110 ScalarResources:map[]}
\tScheduled Pods(number: 1):
\tname: a, namespace: soak, uid: 0a-1, phase: Running, nominated node:
\tNominated Pods(number: 1):
\tname: b, namespace: soak, uid: 0b-2, phase: Pending, nominated node: n1
\t
\t
\tNode name: n2
\tDeleted: false
\tRequested Resources: &{MilliCPU:0 Memory:0 EphemeralStorage:0 AllowedPodNumber:0 ScalarResources:map[]}
\tAllocatable Resources:&{MilliCPU:4000 Memory:17179869184 EphemeralStorage:0 AllowedPodNumber:110 ScalarResources:map[]}
\tScheduled Pods(number: 0):
 >
I1126 00:06:55.618781    5189 dumper.go:62] "Dump of scheduling queue" summary="activeQ:0; backoffQ:0; unschedulableEntities:1" pods=<
\tname: b, namespace: soak, uid: 0b-2, phase: Pending, nominated node: n1
 >
"""

KUBESCHED_DUMP = (
    'I1126 00:06:55.618742    5189 debugger.py:70] "Dump of cached NodeInfo" nodes="Node name: n1\\nDeleted: false\\n'
    'Requested Resources: &{MilliCPU:100}\\nAllocatable Resources:&{MilliCPU:4000}\\nScheduled Pods(number: 1):\\n'
    'name: a, namespace: soak, uid: 0a-1, phase: Running, nominated node: \\n\\n\\nNode name: n2\\nDeleted: false\\n'
    'Scheduled Pods(number: 0):\\n"\n'
    'I1126 00:06:55.618781    5189 debugger.py:77] "Dump of scheduling queue" '
    'summary="activeQ:0; backoffQ:0; unschedulableEntities:1" '
    'pods="name: b, namespace: soak, uid: 0b-2, phase: Pending, nominated node: n1\\n"\n')


def api(node_names, pods):
    nodes = [{"metadata": {"name": n}} for n in node_names]
    objects = [{"metadata": {"uid": uid, "name": uid}, "spec": {"nodeName": node, "schedulerName": "s"},
                "status": {"phase": "Running" if node else "Pending"}} for uid, node in pods]
    return nodes, objects


def test_both_dump_formats_read_the_same():
    upstream, ours = parse_dump(KUBE_SCHEDULER_DUMP), parse_dump(KUBESCHED_DUMP)
    for dump in (upstream, ours):
        assert dump.nodes == {"n1": {"0a-1"}, "n2": set()}
        assert dump.queue == {"0b-2"}
        assert dump.queue_summary == "activeQ:0; backoffQ:0; unschedulableEntities:1"
    assert upstream.nominated == {"n1": {"0b-2"}}
    assert len(upstream.mismatches) == 1 and ours.mismatches == []
    assert parse_dump(KUBE_SCHEDULER_DUMP.split("Dump of scheduling queue", maxsplit=1)[0]) is None  # not complete yet


def test_a_dump_that_matches_the_api_and_each_kind_of_difference():
    nodes, pods = api(["n1", "n2"], [("0a-1", "n1"), ("0b-2", "")])
    agreed = compare(parse_dump(KUBESCHED_DUMP), nodes, pods, "s")
    assert differences(agreed) == 0, agreed
    nodes, pods = api(["n1", "n3"], [("0a-1", "n3"), ("0c-3", "n1"), ("0d-4", "")])
    diff = compare(parse_dump(KUBESCHED_DUMP), nodes, pods, "s")
    assert diff["nodes_missing"] == ["n3"] and diff["nodes_extra"] == ["n2"]
    assert diff["pods_missing"] == ["0c-3"] and diff["pods_on_wrong_node"] == ["0a-1"]
    assert diff["queue_missing"] == ["0d-4"] and diff["queue_extra"] == ["0b-2"]
    # kube-scheduler's own comparison counts too.
    nodes, pods = api(["n1", "n2"], [("0a-1", "n1"), ("0b-2", "")])
    assert differences(compare(parse_dump(KUBE_SCHEDULER_DUMP), nodes, pods, "s")) == 1


def samples(pid, values, leader_from=None, every=10.0):
    return [{"pid": pid, "t": i * every, "rss_mb": v, "threads": 20, "fds": 40,
             "leader": leader_from is not None and i >= leader_from} for i, v in enumerate(values)]


def test_flat_memory_passes_and_a_leak_does_not():
    flat = judge(samples(1, [100 + (i % 3) for i in range(60)]), warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert len(flat) == 1 and flat[0].flat
    leak = judge(samples(2, [100 + i for i in range(60)]), warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert len(leak) == 1 and not leak[0].flat and leak[0].growth["rss_mb"] > 0.3


def test_rss_may_grow_as_fast_as_the_pods_it_holds_and_no_faster():
    rss = [100 + i for i in range(60)]  # about +50% over the judged window
    held = [dict(sample, pods=1000 + 40 * i) for i, sample in enumerate(samples(5, rss))]
    verdict, = judge(held, warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert verdict.pods["growth"] > verdict.growth["rss_mb"] > 0.3 and verdict.flat
    slower = [dict(sample, pods=1000 + 5 * i) for i, sample in enumerate(samples(5, rss))]
    verdict, = judge(slower, warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert verdict.growth["rss_mb"] > verdict.pods["growth"] > 0.1 and not verdict.flat
    # Threads and open files get no such allowance.
    threads = [dict(sample, pods=1000 + 40 * i, threads=10 + i) for i, sample in enumerate(samples(5, [100] * 60))]
    verdict, = judge(threads, warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert not verdict.flat
    assert judge(samples(6, [100] * 60), warmup_s=60, min_window_s=200, run_warmup_until=0)[0].pods is None


def test_the_verdict_says_which_process_of_an_instance_grew():
    parted = [dict(sample, parts={"main": {"rss_mb": 60.0, "threads": 12, "fds": 30},
                                  "watch": {"rss_mb": sample["rss_mb"] - 60.0, "threads": 8, "fds": 10}})
              for sample in samples(7, [100 + i for i in range(60)])]
    verdict, = judge(parted, warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert verdict.parts["main"]["rss_mb"] == 0.0 and verdict.parts["watch"]["rss_mb"] > 1.0
    assert not verdict.flat
    # A part missing from any judged sample (a child started again meanwhile) is left out.
    parted[-1]["parts"].pop("watch")
    verdict, = judge(parted, warmup_s=60, min_window_s=200, run_warmup_until=0)
    assert list(verdict.parts) == ["main"]
    assert judge(samples(8, [100] * 60), warmup_s=60, min_window_s=200, run_warmup_until=0)[0].parts is None


def test_an_instance_names_its_processes():
    import os
    import subprocess
    import sys

    from tests.reliability.soak.processes import read_instance

    # A child started as kubesched/apiproc.py starts them: named by the argument before its fd.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)  # kubesched.apiproc import "
                              "child_main", "watch", "7"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        parent = read_instance(os.getpid())
        assert parent is not None and parent["processes"] >= 3
        assert {"main", "watch", "other"} <= set(parent["parts"])
        assert parent["parts"]["main"]["threads"] >= 1
        assert sum(part["threads"] for part in parent["parts"].values()) == parent["threads"]
    finally:
        child.kill()
        other.kill()
        child.wait()
        other.wait()


def test_taking_the_lead_starts_a_new_window_and_short_stretches_are_not_judged():
    # A standby at 100 MB takes the lead at sample 30 and settles at 130 MB: a step, not a leak.
    values = [100.0] * 30 + [130.0] * 40
    verdicts = judge(samples(3, values, leader_from=30), warmup_s=30, min_window_s=150, run_warmup_until=0)
    assert [(v.role, v.flat) for v in verdicts] == [("standby", True), ("leader", True)]
    assert judge(samples(4, [100.0] * 10), warmup_s=30, min_window_s=150, run_warmup_until=0) == []


def test_what_changed_around_the_dump_is_not_judged_and_what_stood_still_is():
    # The API listed before the window and after the dump: 0c-3 was bound and 0e-5 deleted in
    # between, so a cache may hold either state of them; 0a-1 stood still on n1.
    _nodes, before = api(["n1", "n2"], [("0a-1", "n1"), ("0c-3", ""), ("0e-5", "n2")])
    nodes, after = api(["n1", "n2"], [("0a-1", "n1"), ("0c-3", "n1"), ("0b-2", "")])
    moving = in_flux(before, after)
    assert moving == {"0c-3", "0e-5", "0b-2"}
    dump = parse_dump(KUBESCHED_DUMP)  # holds 0a-1 on n1 and 0b-2 queued
    assert differences(compare(dump, nodes, after, "s", moving)) == 0
    # Without the window the same dump shows 0c-3 as missing from n1.
    assert compare(dump, nodes, after, "s")["pods_missing"] == ["0c-3"]
    # A pod that stood still and is not where the API has it is a difference all the same.
    nodes, after = api(["n1", "n2"], [("0a-1", "n2"), ("0b-2", "")])
    assert compare(dump, nodes, after, "s", in_flux(after, after))["pods_on_wrong_node"] == ["0a-1"]
    # A node made or removed in the window is left out too.
    assert in_flux([{"metadata": {"name": "n1"}}], [{"metadata": {"name": "n2"}}]) == {"n1", "n2"}


def test_a_fresh_bind_where_a_pod_left_after_the_stop_is_not_counted_as_lost():
    from tests.reliability.soak.run import split_fresh_binds

    def pod(uid, node, phase="Running"):
        return {"metadata": {"uid": uid}, "spec": {"nodeName": node}, "status": {"phase": phase}}

    at_stop = {"n1": {"a"}, "n2": {"b"}, "n3": {"c"}}
    # After the stop, kwok finished a (n1) and deleted c (n3); b stayed on n2. w is still
    # pending and v went (a finished Job's pod, collected): neither was bound.
    now = [pod("a", "n1", "Succeeded"), pod("b", "n2"), pod("x", "n1"), pod("y", "n2"), pod("z", "n3"),
           pod("w", "")]
    lost, room_freed = split_fresh_binds({"x", "y", "z", "w", "v"}, at_stop, now)
    assert lost == {"y"} and room_freed == {"x", "z"}


def test_only_what_is_pending_at_the_stop_is_offered():
    from tests.reliability.soak.run import pending_uids

    def pod(uid, node="", phase="Pending", deleting=False):
        return {"metadata": {"uid": uid, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})},
                "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    # Bound by the long-running leader after the settle, finished, going, and still pending.
    pods = [pod("bound", "n1"), pod("done", phase="Failed"), pod("going", deleting=True), pod("waiting")]
    assert pending_uids(pods) == {"waiting"}


def test_the_instances_are_all_signalled_before_any_is_waited_for(tmp_path):
    """Stopped one by one, each standby took the Lease and scheduled on while the one before it
    shut down."""
    import signal
    import types

    from tests.reliability.soak.schedulers import SchedulerSet

    calls = []

    class Fake:
        def __init__(self, pid):
            self.pid, self.proc = pid, types.SimpleNamespace(returncode=None)

        def alive(self):
            return self.proc.returncode is None

        def send(self, sig):
            calls.append(("send", self.pid, sig))

        def stop(self):
            calls.append(("stop", self.pid))
            self.proc.returncode = 0

    schedulers = SchedulerSet("kubesched", tmp_path, kubeconfig="k", auth_kubeconfig="k", scheduler_name="s",
                              lease_name="l", serving=("c", "k"), client_ca_file="ca", extenders=[], clock_origin=0.0)
    for index, slot in enumerate(schedulers.slots):
        slot.process = Fake(100 + index)
    schedulers.close()
    pids = [100 + i for i in range(len(schedulers.slots))]
    assert calls == [("send", pid, signal.SIGTERM) for pid in pids] + [("stop", pid) for pid in pids]
    assert all(slot.process is None for slot in schedulers.slots)


def test_a_restart_whose_lab_up_times_out_once_is_tried_again(monkeypatch):
    import types

    from tests.reliability.soak import faults as soak_faults
    from tests.reliability.soak.faults import FaultDriver

    monkeypatch.setattr(soak_faults.time, "sleep", lambda _seconds: None)
    ups = []

    def up():
        ups.append(1)
        if len(ups) == 1:
            raise RuntimeError("lab.sh up failed: the serviceaccount controller made no 'default' ServiceAccount")

    lab = types.SimpleNamespace(stop_apiserver=lambda _sig: None, up=up)
    driver = FaultDriver(None, lab=lab, cluster=types.SimpleNamespace(ready=lambda: True), schedulers=None,
                         extender=None, proxy=None, certificates=None, origin=0.0)
    record = driver.apiserver_restart(types.SimpleNamespace(duration=0.0))
    assert len(ups) == 2 and record["api_answered_again"] and len(driver.outages) == 1


def test_a_pod_in_a_scheduling_attempt_at_one_dump_is_not_missing_and_one_missing_from_both_is():
    # 0d-4 was being scheduled at the first dump (in neither the cache nor the queue) and back in
    # the queue at the second; 0e-5 is in neither dump.
    nodes, pods = api(["n1", "n2"], [("0a-1", "n1"), ("0b-2", ""), ("0d-4", ""), ("0e-5", "")])
    first = parse_dump(KUBESCHED_DUMP)
    second = parse_dump(KUBESCHED_DUMP.replace("uid: 0b-2, phase: Pending, nominated node: n1\\n",
                                               "uid: 0b-2, phase: Pending, nominated node: n1\\n"
                                               "name: d, namespace: soak, uid: 0d-4, phase: Pending, nominated node: \\n"))
    assert second.queue == {"0b-2", "0d-4"}
    assert compare(first, nodes, pods, "s")["queue_missing"] == ["0d-4", "0e-5"]
    assert compare(first, nodes, pods, "s", again=second)["queue_missing"] == ["0e-5"]


def test_a_mismatch_the_scheduler_reports_counts_when_both_dumps_report_it():
    nodes, pods = api(["n1", "n2"], [("0a-1", "n1"), ("0b-2", "")])
    line = 'I1129 21:52:55.508393     892 debugger.py:56] "Cache mismatch" missedPods="[' + "'{}'" + ']" redundantPods="[]"\n'
    in_flight, other, lost = line.format("0f-6"), line.format("0g-7"), line.format("0h-8")
    first, second = parse_dump(in_flight + lost + KUBESCHED_DUMP), parse_dump(other + lost + KUBESCHED_DUMP)
    assert len(first.mismatches) == 2
    assert compare(first, nodes, pods, "s", again=second)["scheduler_reported_mismatches"] == [lost.strip()]
    once = parse_dump(other + KUBESCHED_DUMP)
    assert differences(compare(first, nodes, pods, "s", again=once)) == 0
    # Go's format reads the same.
    upstream = parse_dump(KUBE_SCHEDULER_DUMP)
    assert compare(upstream, nodes, pods, "s", again=upstream)["scheduler_reported_mismatches"] == \
        [KUBE_SCHEDULER_DUMP.splitlines()[0]]


def test_cpu_is_split_by_role_and_a_restarted_part_counts_from_zero():
    rows = [
        {"t": 0.0, "instances": {"0": {"pid": 7, "cpu_s": 2.0, "leader": False}}, "cpu_s": {"kwok": 10.0}},
        {"t": 5.0, "instances": {"0": {"pid": 7, "cpu_s": 3.0, "leader": False}}, "cpu_s": {"kwok": 12.0}},
        # The standby takes the lead; kwok is started again (its counter starts over).
        {"t": 10.0, "instances": {"0": {"pid": 7, "cpu_s": 7.0, "leader": True}}, "cpu_s": {"kwok": 1.5}},
        # The leader is killed; a new process in its slot.
        {"t": 20.0, "instances": {"0": {"pid": 9, "cpu_s": 0.5, "leader": False}}, "cpu_s": {"kwok": 2.0}},
    ]
    used = cpu_summary(rows)
    assert used["schedulers as standby"]["cpu_s"] == 3.5 and used["schedulers as leader"]["cpu_s"] == 4.0
    assert used["kwok"] == {"cpu_s": 14.0, "cores": 0.7}
    assert list(used)[0] == "kwok"  # the largest first
    assert cpu_summary(rows[:1])["kwok"]["cores"] is None


def test_an_instance_sums_its_processes_cpu_when_given_the_table():
    import os

    from tests.bench.load import read_processes
    from tests.reliability.soak.processes import read_instance

    plain = read_instance(os.getpid())
    assert plain is not None and "cpu_s" not in plain
    with_cpu = read_instance(os.getpid(), read_processes())
    assert with_cpu is not None and with_cpu["cpu_s"] > 0
