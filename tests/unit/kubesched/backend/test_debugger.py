"""The cache debugger (SIGUSR2): the comparison with the informers and the dump, as upstream's."""

import io
import signal
import threading

import pytest
from kubesched_fakes import node_raw, pod_raw

from kubesched import klog
from kubesched.backend.debugger import COMPARE_SIGNAL, CacheComparer, CacheDumper, compare_strings, listen_for_signal
from kubesched.config import parse_config
from kubesched.scheduler import Scheduler


@pytest.fixture
def log():
    stream = io.StringIO()
    before = klog.verbosity()
    klog.set_verbosity(0, stream)
    yield stream
    klog.set_verbosity(before, __import__("sys").stderr)


def make(nodes=(), pods=()):
    """A scheduler with the default plugins, fed nodes and pods as its informers would."""
    sched = Scheduler(parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}),
                      None)
    for raw in nodes:
        sched.on_node_add(raw)
    for raw in pods:
        sched.on_pod_add(raw)
    return sched


def _with_informers(sched, nodes, pods):
    """The informers' stores hold exactly these objects (the cache keeps what make() fed it)."""
    node_store, pod_store = sched.informers.store("nodes"), sched.informers.store("pods")
    node_store.clear()
    node_store.update({n["metadata"]["name"]: n for n in nodes})
    pod_store.clear()
    pod_store.update({f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods})
    return sched


def test_compare_strings_as_upstream():
    assert compare_strings(["a", "b", "c"], ["b", "c", "d"]) == (["a"], ["d"])
    assert compare_strings([], []) == ([], [])


def test_a_cache_that_agrees_with_the_informers_reports_no_mismatch(log):
    nodes = [node_raw("n1"), node_raw("n2")]
    bound, pending = pod_raw("bound", node="n1"), pod_raw("pending")
    done = pod_raw("done", node="n2", phase="Succeeded")  # terminal: neither in the cache nor compared
    sched = make(nodes=nodes, pods=[bound, pending, done])
    _with_informers(sched, nodes, [bound, pending, done])
    assert CacheComparer(sched).compare() == (([], []), ([], []))
    assert "Cache mismatch" not in log.getvalue()


def test_a_pod_the_cache_lost_and_a_node_it_kept_are_reported(log):
    nodes = [node_raw("n1"), node_raw("gone")]
    bound = pod_raw("bound", node="n1")
    sched = make(nodes=nodes, pods=[bound])
    # The informers saw the node deleted and a new bound pod whose event never reached the cache.
    lost = pod_raw("lost", node="n1")
    _with_informers(sched, [nodes[0]], [bound, lost])
    (missed_nodes, redundant_nodes), (missed_pods, redundant_pods) = CacheComparer(sched).compare()
    assert (missed_nodes, redundant_nodes) == ([], ["gone"])
    assert (missed_pods, redundant_pods) == ([lost["metadata"]["uid"]], [])
    assert log.getvalue().count('"Cache mismatch"') == 2


def test_the_dump_prints_what_upstream_prints(log):
    nodes = [node_raw("n1", cpu="2")]
    bound = pod_raw("web-1", "shop", node="n1", cpu="500m")
    pending = pod_raw("web-2", "shop")
    sched = make(nodes=nodes, pods=[bound, pending])
    CacheDumper(sched).dump_all()
    text = log.getvalue().replace("\\n", "\n")
    assert "Node name: n1\nDeleted: false\nRequested Resources: &{MilliCPU:500 Memory:0" in text
    assert "Allocatable Resources:&{MilliCPU:2000" in text
    assert "Scheduled Pods(number: 1):\n" in text
    assert (f"name: web-1, namespace: shop, uid: {bound['metadata']['uid']}, phase: Pending, nominated node: \n"
            in text)
    assert 'summary="activeQ:1; backoffQ:0; unschedulableEntities:0"' in text
    assert f"name: web-2, namespace: shop, uid: {pending['metadata']['uid']}" in text


def test_sigusr2_compares_and_dumps_on_a_thread_of_its_own(log):
    nodes = [node_raw("n1")]
    sched = make(nodes=nodes)
    _with_informers(sched, nodes, [])
    handlers = {}
    listen_for_signal(sched, threading.Event(), install=lambda signum, handler: handlers.update({signum: handler}))
    assert list(handlers) == [COMPARE_SIGNAL] == [signal.SIGUSR2]
    before = set(threading.enumerate())
    handlers[COMPARE_SIGNAL](COMPARE_SIGNAL, None)
    for thread in set(threading.enumerate()) - before:
        thread.join(5)
    assert '"Dump of cached NodeInfo"' in log.getvalue() and '"Dump of scheduling queue"' in log.getvalue()
