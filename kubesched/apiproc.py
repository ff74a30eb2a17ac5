"""The scheduler's API I/O in two child processes, so the scheduling loop keeps its GIL.

One Python process holds one GIL: when watch decoding and the binding, event and status
writes ran on threads of the scheduling process, every millisecond they took was a
millisecond the scheduling loop waited (docs/performance.md measures the split). So:

- the **watch process** runs every informer's Reflector (backend/informer.py ``reflect``):
  the list and watch HTTP, the JSON decoding and the trimming (backend/trim.py). It sends
  what it found back as batches of JSON records, ``[informer, "L", items, first, rv]`` for a
  page of a listing (rv null until the last page) and ``[informer, "E", type, object, rv]`` for a watch event, already trimmed, so
  the scheduling process decodes a fraction of the bytes once (orjson, no pickling). Each
  informer's records arrive in the order its watch delivered them; the scheduling process
  applies them on one thread (store, diff, event handlers) exactly as an in-process
  informer did. Its requests' rest_client_* figures come back the same way
  (``[0, "M", method, host, code, seconds, sent, received]``, ``[0, "T", method, host, seconds]``
  for a throttled one), so the scheduler's /metrics counts them.
- the **writer process** sends the requests of ``RemoteApiClient``: bindings, events, status
  patches. The calling thread keeps its place and its token bucket (``--kube-api-qps`` and
  ``--kube-api-burst`` are enforced before a request leaves), and waits for the answer: a
  failed bind still raises in the Bind plugin, so the pod is forgotten and requeued.

Both children exit when the scheduler's end of their pipe closes, which the kernel does when
the scheduler exits for any reason, SIGKILL included: no child outlives it. A child that
dies while the scheduler runs is started again: its informers relist (the difference
arrives as events, as after a 410 Gone) and the requests it held fail like lost connections.
"""

from __future__ import annotations

import itertools
import os
import queue
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from kubesched import gctuning, jsoncodec, klog, restclient_metrics
from kubesched.client import ApiClient, ClusterCredentials
from kubesched.workers import started_executor

if TYPE_CHECKING:
    from kubesched.backend.informer import Informer

# Objects per message: enough to amortise a pipe write, small enough to keep the events flowing.
# A page of a listing counts its items, so it goes alone: the scheduling process decodes a
# message whole, and a relist after an API server restart sent every pod at once (its RSS
# kept the peak, +15 MB in the soak).
_MAX_BATCH = 256
# Pages of listings waiting in the watch process to be sent: a reflector that lists faster than
# the scheduling process reads waits, rather than holding the whole listing decoded.
_PAGES_QUEUED = 2
METRICS_RECORD = 0  # the informer id of the watch process's rest_client_* records (informers count from 1)
RESTART_DELAY = 1.0
# multiprocessing.connection's framing: a signed 4-byte big-endian size, or -1 and an 8-byte one
_HEADER = struct.Struct("!i")
_LONG_HEADER = struct.Struct("!Q")


class ChildLost(ConnectionError):
    """The writer process exited before answering; the request may or may not have been sent."""


class _Child:
    """One child process and the scheduler's end of its socket, started again if it dies."""

    def __init__(self, name: str, init: tuple, on_message, on_restart=None):
        self.name = name
        self.init = init
        self.on_message = on_message
        self.on_restart = on_restart
        self.closing = threading.Event()
        self.send_lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.conn: Connection | None = None
        self._spawn()
        self.reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self.reader.start()

    def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        # A fresh interpreter that imports only this module and the client (not the whole
        # scheduler, as multiprocessing's spawn would by re-running the main script), and
        # inherits nothing but its socket: fork would copy threads and locks mid-use.
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from kubesched.apiproc import child_main; child_main()", self.name,
             str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=_child_environment())
        theirs.close()  # only the child may hold it, so the child's end sees EOF when we go
        self.sock = ours
        self.conn = Connection(os.dup(ours.fileno()))
        self.conn.send((self.name, klog.verbosity(), *self.init))

    def send(self, message: Any) -> None:
        with self.send_lock:
            self.conn.send(message)

    def _read(self) -> None:
        while not self.closing.is_set():
            for message in read_messages(self.sock):
                self.on_message(message)
            if self.closing.is_set():
                return
            # the child closed its end: it exited
            self.process.wait()
            klog.error("API child process exited; starting it again", process=self.name,
                       exitcode=self.process.returncode)
            time.sleep(RESTART_DELAY)
            if self.closing.is_set():
                return
            with self.send_lock:
                self.conn.close()
                self.sock.close()
                self._spawn()
            if self.on_restart is not None:
                self.on_restart()

    def close(self, timeout: float = 2.0) -> None:
        self.closing.set()
        # shutdown, not only close: our reader thread blocked in recv keeps a closed fd's
        # socket open, and the child would never read its EOF.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.sock.close()
        if self.process is not None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def read_messages(sock: socket.socket, chunk: int = 1 << 20):
    """The messages ``Connection.send_bytes`` wrote to sock, until EOF (or the socket is closed).

    One recv takes everything waiting, up to chunk bytes, however many messages that is.
    ``Connection.recv_bytes`` makes two recv calls per message, and each one gives up the GIL:
    while the scheduling loop computes, a thread that gives up the GIL waits a whole switch
    interval (5 ms) to have it back. A reader that paid that twice per message kept up with
    200 messages a second behind a busy loop but not with 1,000: the messages waited in the
    socket for 170 ms at the median, 400 ms at worst (tests/bench/micro/busy_reader.py
    measures both readers; tests/bench/results/busy-reader.txt).
    """
    buffer = bytearray()
    while True:
        try:
            data = sock.recv(chunk)
        except OSError:
            return
        if not data:
            return
        buffer += data
        start = 0
        with memoryview(buffer) as view:  # each message copied once, not sliced and then copied
            while True:
                available = len(buffer) - start
                if available < 4:
                    break
                (size,) = _HEADER.unpack_from(view, start)
                header = 4
                if size == -1:  # Connection's header for a message over 2 GiB
                    if available < 12:
                        break
                    (size,) = _LONG_HEADER.unpack_from(view, start + 4)
                    header = 12
                if available < header + size:
                    break
                yield bytes(view[start + header:start + header + size])
                start += header + size
        del buffer[:start]


def _child_environment() -> dict[str, str]:
    """The child imports kubesched from wherever this process did (a source tree on sys.path too)."""
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
    return env


# The writer's requests in flight at once: its threads, and so its HTTP/1.1 connections (one
# per request in flight; client-go multiplexes its requests over one HTTP/2 connection). As
# many as the scheduler's binding threads, shared with events, status patches and evictions,
# which wait their turn. In bench SchedulingBasic/5000Nodes_10000Pods, 32 bound 639 and 630
# pods/s against 587 and 593 with the 88 it had before (16: 594); and in a soak's busy minutes
# the connections a burst opens reach 32 again and again instead of a new high each time.
WRITER_CONCURRENCY = 32


class ApiProcesses:
    """The watch and writer processes of one scheduler; ``client()`` makes clients that use them."""

    def __init__(self, creds: ClusterCredentials, *, qps: float, burst: int, pool_size: int = WRITER_CONCURRENCY,
                 user_agent: str = "kubesched"):
        self.host = restclient_metrics.host_of(creds.server)
        self.informers: dict[int, Informer] = {}
        self._informer_ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        # Lists and watches are a handful of requests: the watch process gets the scheduler's
        # qps/burst for them (client-go's informers share the scheduler's client).
        self.watcher = _Child("watch", (creds, qps, burst, user_agent + " informers"),
                              self._on_records, on_restart=self._rewatch)
        self.writer = _Child("writer", (creds, pool_size, user_agent), self._on_answer,
                             on_restart=self._fail_pending)

    def client(self, *, qps: float, burst: int, user_agent: str, watches: bool = False) -> "RemoteApiClient":
        """A client whose requests the writer process sends; with watches, its informers run
        in the watch process."""
        return RemoteApiClient(self, qps=qps, burst=burst, user_agent=user_agent, watches=watches)

    def close(self) -> None:
        self.watcher.close()
        self.writer.close()
        self._fail_pending()

    # -- informers ----------------------------------------------------------------------

    def watch(self, informer: Informer) -> None:
        informer_id = next(self._informer_ids)
        self.informers[informer_id] = informer
        self._start_reflector(informer_id, informer)

    def retry_now(self, informer: Informer) -> None:
        """The informer's reflector tries its list or watch at once if it waits to try again."""
        for informer_id, each in self.informers.items():
            if each is informer:
                self.watcher.send(("wake", informer_id))

    def _start_reflector(self, informer_id: int, informer: Informer) -> None:
        self.watcher.send(("watch", informer_id, informer.path, informer.name, informer.page_size,
                           informer.watch_timeout, informer.transform))

    def _rewatch(self) -> None:
        for informer_id, informer in list(self.informers.items()):
            self._start_reflector(informer_id, informer)

    def _on_records(self, message: bytes) -> None:
        for record in jsoncodec.loads(message):
            if record[0] == METRICS_RECORD:
                (restclient_metrics.record if record[1] == "M" else restclient_metrics.record_throttle)(*record[2:])
                continue
            informer = self.informers.get(record[0])
            if informer is None or informer.stop.is_set():
                continue
            try:
                if record[1] == "E":
                    informer.apply_event(record[2], record[3], record[4])
                else:
                    informer.apply_list_page(record[2], record[3], record[4])
            except Exception as err:  # noqa: BLE001 - a handler bug must not leave the store behind for good
                klog.error("Unexpected error in informer; relisting", resource=informer.name, err=repr(err))
                self._start_reflector(record[0], informer)

    # -- requests -----------------------------------------------------------------------

    def call(self, method: str, path: str, data: bytes | None, params: dict | None, content_type: str,
             timeout: float, user_agent: str) -> tuple[int, bytes]:
        request_id = next(self._request_ids)
        pending = _Pending()
        with self._pending_lock:
            self._pending[request_id] = pending
        try:
            self.writer.send((request_id, method, path, data, params, content_type, timeout, user_agent))
        except (OSError, ValueError) as err:
            with self._pending_lock:
                self._pending.pop(request_id, None)
            raise ChildLost(f"the API writer process is not running ({err}); the request was not sent") from None
        # The child gives up on the server after timeout; the margin covers a slow connect.
        if not pending.done.wait(timeout + 15.0):
            with self._pending_lock:
                self._pending.pop(request_id, None)
            raise TimeoutError(f"{method} {path}: no answer from the API writer process")
        if pending.status < 0:
            raise ChildLost(pending.payload.decode(errors="replace"))
        return pending.status, pending.payload

    def _on_answer(self, message: bytes) -> None:
        request_id, status, payload = _decode_answer(message)
        with self._pending_lock:
            pending = self._pending.pop(request_id, None)
        if pending is not None:
            pending.status, pending.payload = status, payload
            pending.done.set()

    def _fail_pending(self) -> None:
        with self._pending_lock:
            lost, self._pending = self._pending, {}
        for pending in lost.values():
            pending.status, pending.payload = -1, b"the API writer process exited before answering"
            pending.done.set()


class _Pending:
    __slots__ = ("done", "status", "payload")

    def __init__(self):
        self.done = threading.Event()
        self.status = -1
        self.payload = b""


class RemoteApiClient(ApiClient):
    """ApiClient whose requests leave through the writer process (informers: the watch process).

    The token bucket stays here, in the caller's thread, so qps and burst mean what they did.
    """

    def __init__(self, processes: ApiProcesses, *, qps: float, burst: int, user_agent: str, watches: bool):
        super().__init__(ClusterCredentials(server=""), qps=qps, burst=burst, pool_size=1, user_agent=user_agent)
        self.host = processes.host
        self.processes = processes
        self.watch_hub = processes if watches else None

    def perform(self, method: str, path: str, data: bytes | None, params: dict | None, content_type: str,
                timeout: float | None, user_agent: str | None = None) -> tuple[int, bytes]:
        return self.processes.call(method, path, data, params, content_type,
                                   self.timeout if timeout is None else timeout,
                                   user_agent or self.headers["User-Agent"])

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300, bookmarks: bool = True):
        raise NotImplementedError("watches run in the watch process: start an Informer with this client")


# -- the children ---------------------------------------------------------------------------

def child_main() -> None:
    """Entry point of a child: its socket's fd is the last argument (its name, before it, is there
    for ps and /proc only), its settings the first message."""
    gctuning.tune()
    gctuning.return_free_memory()
    conn = Connection(int(sys.argv[-1]))
    try:
        name, verbosity, *init = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    klog.set_verbosity(verbosity)
    {"watch": _watch_main, "writer": _writer_main}[name](conn, *init)


def _watch_main(conn: Connection, creds: ClusterCredentials, qps: float, burst: int, user_agent: str) -> None:
    from kubesched.backend.informer import reflect

    client = ApiClient(creds, qps=qps, burst=burst, pool_size=64, user_agent=user_agent)
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    stops: dict[int, threading.Event] = {}
    wakes: dict[int, threading.Event] = {}  # set by ("wake", id): the reflector's backoff ends
    client.record_request = lambda *figures: outbox.put([METRICS_RECORD, "M", *figures])
    client.record_throttle = lambda *figures: outbox.put([METRICS_RECORD, "T", *figures])

    pages = threading.Semaphore(_PAGES_QUEUED)

    def send_batches() -> None:
        while True:
            batch = [outbox.get()]
            weight = _weight(batch[0])
            while weight < _MAX_BATCH:
                try:
                    batch.append(outbox.get_nowait())
                except queue.Empty:
                    break
                weight += _weight(batch[-1])
            try:
                conn.send_bytes(jsoncodec.dumps(batch))
            except OSError:
                os._exit(0)  # the scheduler is gone
            for record in batch:
                if record[1] == "L":
                    pages.release()

    def run_reflector(informer_id: int, path: str, name: str, page_size: int, watch_timeout: int, transform,
                      stop: threading.Event, wake: threading.Event) -> None:
        def on_list(items: list, first: bool, resource_version: str | None) -> None:
            if not stop.is_set():
                pages.acquire()
                outbox.put([informer_id, "L", items, first, resource_version])

        def on_event(etype: str, obj: dict, resource_version: str) -> None:
            if not stop.is_set():
                outbox.put([informer_id, "E", etype, obj, resource_version])

        reflect(client, path, name, stop, on_list, on_event, page_size=page_size, watch_timeout=watch_timeout,
                transform=transform, wake=wake)

    threading.Thread(target=send_batches, name="sender", daemon=True).start()
    while True:
        try:
            command = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the scheduler exited: so do we, whatever our threads are doing
        kind, informer_id, *spec = command
        if kind == "wake":
            if informer_id in wakes:
                wakes[informer_id].set()
            continue
        if informer_id in stops:
            stops[informer_id].set()  # a relist asked for: the old reflector sends nothing more
        stops[informer_id], wakes[informer_id] = threading.Event(), threading.Event()
        threading.Thread(target=run_reflector, args=(informer_id, *spec, stops[informer_id], wakes[informer_id]),
                         name=f"reflector-{spec[1]}", daemon=True).start()


def _weight(record: list) -> int:
    """What a record counts against _MAX_BATCH: a listing's page its items, anything else 1."""
    return len(record[2]) or 1 if record[1] == "L" else 1


def _writer_main(conn: Connection, creds: ClusterCredentials, pool_size: int, user_agent: str) -> None:
    client = ApiClient(creds, qps=0, burst=0, pool_size=pool_size, user_agent=user_agent)
    send_lock = threading.Lock()

    def perform(request_id: int, method: str, path: str, data: bytes | None, params: dict | None,
                content_type: str, timeout: float, agent: str) -> None:
        try:
            status, payload = client.perform(method, path, data, params, content_type, timeout, agent)
        except Exception as err:  # noqa: BLE001 - any failure is the caller's to handle, as in-process
            status, payload = -1, f"{method} {path}: {type(err).__name__}: {err}".encode()
        answer = _encode_answer(request_id, status, payload)
        with send_lock:
            try:
                conn.send_bytes(answer)
            except OSError:
                os._exit(0)

    # As many threads as the client has connections, all started now: the writer's threads
    # stay as many from its start to its end, whatever concurrency a fault brings.
    with started_executor(pool_size, "write") as pool:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                os._exit(0)
            pool.submit(perform, *request)


def _encode_answer(request_id: int, status: int, payload: bytes) -> bytes:
    return request_id.to_bytes(8, "little") + status.to_bytes(4, "little", signed=True) + payload


def _decode_answer(message: bytes) -> tuple[int, int, bytes]:
    return int.from_bytes(message[:8], "little"), int.from_bytes(message[8:12], "little", signed=True), message[12:]
