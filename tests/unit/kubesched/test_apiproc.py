"""The hand-off between the scheduling process and its API children (kubesched/apiproc.py):
records applied in order, every waiting message read at once, a listing's difference, a handler failure asking for a relist,
request failures raised in the caller, the token bucket kept, and no child left behind."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
from multiprocessing.connection import Connection

import pytest

from kubesched import jsoncodec
from kubesched.apiproc import WRITER_CONCURRENCY, ApiProcesses, ChildLost, read_messages
from kubesched.backend.informer import Informer
from kubesched.client import ClusterCredentials
from kubesched.framework.handle import Handle
from kubesched.framework.types import PodInfo
from kubesched.plugins.default_binder import DefaultBinder


def obj(name, rv, uid="u"):
    return {"metadata": {"name": name, "resourceVersion": rv, "uid": uid}}


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never answers: requests hang until killed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener.getsockname()[1]
    listener.close()


@pytest.fixture
def closed_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture
def processes(closed_port):
    started = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{closed_port}"), qps=0, burst=0)
    yield started
    started.close()


def informer_on(processes, seen):
    client = processes.client(qps=0, burst=0, user_agent="test", watches=True)
    informer = Informer(client, "/api/v1/nodes", name="nodes",
                        on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                        on_update=lambda old, new: seen.append(("update", new["metadata"]["name"])),
                        on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    processes.informers[99] = informer
    return informer


def test_records_reach_the_informer_in_order_and_move_its_resource_version(processes):
    seen = []
    informer = informer_on(processes, seen)
    processes._on_records(jsoncodec.dumps([
        [99, "L", [obj("a", "9")], True, "10"],
        [99, "E", "ADDED", obj("b", "11"), "11"], [99, "E", "MODIFIED", obj("a", "12"), "12"],
        [99, "E", "BOOKMARK", {"metadata": {"resourceVersion": "15"}}, "15"],
        [99, "E", "DELETED", obj("b", "16"), "16"]]))
    assert seen == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "b")]
    assert list(informer.store) == ["a"] and informer.resource_version == "16" and informer.synced.is_set()


def test_a_relisting_arrives_as_its_difference(processes):
    seen = []
    informer = informer_on(processes, seen)
    processes._on_records(jsoncodec.dumps([[99, "L", [obj("a", "1"), obj("b", "1")], True, None],
                                           [99, "L", [obj("c", "1")], False, "10"]]))
    # After a 410 Gone the watch process lists again: b changed, c went, d came, a was re-created.
    processes._on_records(jsoncodec.dumps([[99, "L", [obj("a", "1", uid="u2"), obj("b", "2"), obj("d", "3")], True, "50"]]))
    assert seen[3:] == [("delete", "c"), ("delete", "a"), ("add", "a"), ("update", "b"), ("add", "d")]
    assert informer.relists == 2 and informer.resource_version == "50"


def test_a_failing_handler_asks_for_a_relist_and_later_records_still_apply(processes, monkeypatch):
    seen = []
    informer = informer_on(processes, seen)
    relisted = []
    monkeypatch.setattr(processes, "_start_reflector", lambda informer_id, inf: relisted.append((informer_id, inf)))

    def failing_add(raw):
        raise RuntimeError("handler bug")

    informer.on_add = failing_add
    processes._on_records(jsoncodec.dumps([[99, "E", "ADDED", obj("a", "1"), "1"],
                                           [99, "E", "MODIFIED", obj("a", "2"), "2"]]))
    assert relisted == [(99, informer)]
    assert seen == [("update", "a")] and informer.resource_version == "2"


def test_records_of_a_stopped_informer_are_dropped(processes):
    seen = []
    informer = informer_on(processes, seen)
    informer.stop.set()
    processes._on_records(jsoncodec.dumps([[99, "E", "ADDED", obj("a", "1"), "1"]]))
    assert seen == [] and informer.store == {}


def test_a_failed_request_raises_in_the_caller_and_fails_the_bind(processes):
    client = processes.client(qps=0, burst=0, user_agent="test")
    with pytest.raises(ChildLost, match="POST /api/v1/namespaces/ns/pods/p/binding"):
        client.bind("ns", "p", "uid-1", "node-1")
    # The Bind plugin turns it into an error status, so the runtime forgets and requeues the pod.
    handle = Handle(client=client)
    pod = PodInfo({"metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"}, "spec": {}})
    status = DefaultBinder(None, handle).bind(None, pod, "node-1")
    assert status is not None and not status.is_success() and "binding" in status.message()


def test_requests_in_flight_fail_when_the_writer_dies_and_it_is_started_again(silent_server):
    processes = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{silent_server}"), qps=0, burst=0)
    try:
        client = processes.client(qps=0, burst=0, user_agent="test")
        failures = []

        def bind():
            try:
                client.bind("ns", "p", "uid-1", "node-1")
            except ChildLost as err:
                failures.append(str(err))

        caller = threading.Thread(target=bind)
        caller.start()
        deadline = time.monotonic() + 10
        while not processes._pending and time.monotonic() < deadline:
            time.sleep(0.01)
        first = processes.writer.process
        first.kill()
        caller.join(timeout=10)
        assert failures == ["the API writer process exited before answering"]
        deadline = time.monotonic() + 10
        while processes.writer.process is first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes.writer.process is not first and processes.writer.process.poll() is None
    finally:
        processes.close()


def test_qps_and_burst_still_throttle_requests(processes):
    client = processes.client(qps=5, burst=1, user_agent="test")
    started = time.monotonic()
    for attempt in range(4):
        with pytest.raises(ChildLost, match=f"attempt-{attempt}"):
            client.bind("ns", f"attempt-{attempt}", "uid-1", "node-1")
    assert time.monotonic() - started >= 0.55  # 1 at once, 3 more at 5 per second


def test_retry_now_cuts_short_the_watch_process_wait_before_its_next_attempt():
    """The server drops every connection: the reflector's waits double (0.8 s, 1.6 s, 3.2 s...).
    After its third attempt it would wait at least 3.2 s; woken, it tries again at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    attempts: list[float] = []

    def drop_each_connection():
        while True:
            try:
                conn, _address = listener.accept()
            except OSError:
                return
            attempts.append(time.monotonic())
            conn.close()

    threading.Thread(target=drop_each_connection, daemon=True).start()
    processes = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{listener.getsockname()[1]}"),
                             qps=0, burst=0)
    try:
        informer = informer_on(processes, [])
        processes.informers.clear()
        processes.watch(informer)
        deadline = time.monotonic() + 15
        while len(attempts) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(attempts) == 3
        informer.retry_now()
        while len(attempts) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(attempts) == 4 and attempts[3] - attempts[2] < 2.5
    finally:
        processes.close()
        listener.close()


def test_close_ends_both_children(closed_port):
    processes = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{closed_port}"), qps=0, burst=0)
    children = [processes.watcher.process, processes.writer.process]
    processes.close()
    assert [child.poll() for child in children] == [0, 0]


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_children_die_with_their_parent(closed_port, signum):
    parent_code = textwrap.dedent(f"""
        import sys, time
        from kubesched.apiproc import ApiProcesses
        from kubesched.client import ClusterCredentials
        processes = ApiProcesses(ClusterCredentials(server="http://127.0.0.1:{closed_port}"), qps=0, burst=0)
        print(processes.watcher.process.pid, processes.writer.process.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    children = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(children) == 2
    parent.send_signal(signum)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    alive = children
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in children if _running(pid)]
        time.sleep(0.05)
    assert alive == [], f"children {alive} outlived their parent after {signum.name}"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


class CountingSocket:
    """A socket whose recv calls are counted and may be cut short, to split messages anywhere."""

    def __init__(self, sock, most=None):
        self.sock, self.most, self.calls = sock, most, 0

    def recv(self, size):
        self.calls += 1
        return self.sock.recv(min(size, self.most or size))


def test_read_messages_returns_each_message_whole_however_the_bytes_arrive():
    ours, theirs = socket.socketpair()
    sizes = [0, 1, 3, 4, 5, 700, 16384, 16385, 70000, 2]
    sent = [bytes([n % 251]) * n for n in sizes]

    def send():
        conn = Connection(theirs.detach())
        for message in sent:
            conn.send_bytes(message)
        conn.close()

    writer = threading.Thread(target=send)
    writer.start()
    received = list(read_messages(CountingSocket(ours, most=7)))  # 7 bytes a recv: headers split too
    writer.join()
    ours.close()
    assert received == sent


def test_read_messages_takes_every_waiting_message_in_one_recv():
    ours, theirs = socket.socketpair()
    conn = Connection(theirs.detach())
    for n in range(100):  # all of them fit in the socket's buffer (each small send takes about 1 kB of it)
        conn.send_bytes(jsoncodec.dumps([n, "E", "MODIFIED", obj(f"n{n}", str(n)), str(n)]))
    conn.close()
    counting = CountingSocket(ours)
    received = [jsoncodec.loads(message)[0] for message in read_messages(counting)]
    ours.close()
    assert received == list(range(100))
    # recv_bytes would make 200 calls, each a GIL hand-back a busy scheduling loop makes
    # the reader wait 5 ms for (tests/bench/micro/busy_reader.py); here: the data, then EOF.
    assert counting.calls <= 3


def test_read_messages_ends_when_the_socket_is_shut_down():
    ours, theirs = socket.socketpair()
    done = threading.Event()
    threading.Thread(target=lambda: (list(read_messages(ours)), done.set()), daemon=True).start()
    ours.shutdown(socket.SHUT_RDWR)
    assert done.wait(5)
    ours.close()
    theirs.close()


def test_the_writer_keeps_at_most_its_concurrency_of_requests_and_connections_open():
    """A burst beyond WRITER_CONCURRENCY waits in the writer: the server never sees more
    connections than that (each HTTP/1.1 request in flight holds one)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    held: list[socket.socket] = []

    def accept_and_hold():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_hold, daemon=True).start()
    processes = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{listener.getsockname()[1]}"),
                             qps=0, burst=0)
    client = processes.client(qps=0, burst=0, user_agent="test")

    def bind(name):
        with pytest.raises(ChildLost):
            client.bind("ns", name, "uid", "node-1")

    callers = [threading.Thread(target=bind, args=(f"p{i}",)) for i in range(WRITER_CONCURRENCY + 20)]
    try:
        for caller in callers:
            caller.start()
        deadline = time.monotonic() + 10
        while len(held) < WRITER_CONCURRENCY and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # the other 20 have been sent to the writer by now
        assert len(processes._pending) == WRITER_CONCURRENCY + 20
        assert len(held) == WRITER_CONCURRENCY
    finally:
        processes.close()
        for caller in callers:
            caller.join(timeout=10)
        listener.close()
        for conn in held:
            conn.close()


def test_a_relisting_crosses_a_page_at_a_time_and_waits_for_the_scheduling_process():
    """The scheduling process decodes a message whole: a page goes alone, not with the rest of
    the listing (a relist after an API server restart sent every pod at once, and the leader's
    RSS kept the peak). While it does not read, the watch process lists no further than the
    pages it may queue, instead of holding the whole listing decoded."""
    # Pages of 300 objects (at least the batch limit, so each goes alone) and 2 MB (more than a
    # socket's buffer, so one being sent waits for the scheduling process to read it).
    pages, per_page, padding = 6, 300, "x" * 7_000
    asked: list[int] = []

    class Listing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if "watch" in query:
                time.sleep(30)  # a watch with nothing to say; the test ends before it does
                return
            page = int(query.get("continue", ["0"])[0])
            asked.append(page)
            items = [{"metadata": {"name": f"n{page}-{i}", "resourceVersion": "5", "uid": f"u{page}-{i}",
                                   "labels": {"pad": padding}}} for i in range(per_page)]
            meta = {"resourceVersion": "5"} if page == pages - 1 else {"continue": str(page + 1)}
            body = json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Listing)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    reading = threading.Event()
    messages: list[list[int]] = []  # per message: the items of each page in it
    apply_records = ApiProcesses._on_records

    def on_records(self, message):
        page_items = [len(record[2]) for record in jsoncodec.loads(message) if record[1] == "L"]
        if page_items:  # the request metrics records pass: only pages wait
            reading.wait(timeout=30)
            messages.append(page_items)
        apply_records(self, message)

    processes = None
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ApiProcesses, "_on_records", on_records)
            processes = ApiProcesses(ClusterCredentials(server=f"http://127.0.0.1:{server.server_address[1]}"),
                                     qps=0, burst=0)
        informer = Informer(processes.client(qps=0, burst=0, user_agent="test", watches=True), "/api/v1/nodes",
                            name="nodes", page_size=per_page, on_add=lambda o: None, on_update=lambda o, n: None,
                            on_delete=lambda o: None)
        processes.watch(informer)
        deadline = time.monotonic() + 10
        while len(asked) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # time enough to list the rest, if it did not wait
        # page 0 in the scheduling process, 1 being sent, 2 queued, 3 fetched and waiting its turn
        assert asked == [0, 1, 2, 3]
        reading.set()
        assert informer.synced.wait(timeout=20)
        assert len(informer.store) == pages * per_page and asked == list(range(pages))
        assert messages == [[per_page]] * pages  # one page per message
    finally:
        reading.set()
        if processes is not None:
            processes.close()
        server.shutdown()
        server.server_close()
