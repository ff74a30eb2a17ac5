"""A TCP relay on 127.0.0.1 in front of the API server that can reset every connection.

TLS passes through untouched (the API server's certificate names 127.0.0.1, whatever the
port), so kubesched verifies the server and authenticates as it always does; ``reset_all``
closes both ends of every relayed connection with an RST, as a crashed load balancer or a
dropped conntrack entry would.

The relay runs in a process of its own, one thread over epoll. Every scheduler's API
traffic passes through it, so it must not wait for the harness: run as threads of the
harness, a harness busy with a relist of 20,000 pods held every scheduler's requests back
with it (binds at one a second, Lease renewals timing out) and the run measured the
harness, not the schedulers.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import selectors
import socket
import struct
from pathlib import Path

import yaml

CHUNK = 256 * 1024


class ResettingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.resets = 0
        self._control, child_end = multiprocessing.get_context("spawn").Pipe()
        self._process = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(self.upstream, child_end), name="resetting-proxy", daemon=True)
        self._process.start()
        child_end.close()
        if not self._control.poll(30):
            self._process.kill()
            raise RuntimeError("the relay process did not start within 30 s")
        self.port = self._control.recv()

    def reset_all(self) -> int:
        """RST every open connection; returns how many were open."""
        count = self._ask("reset")
        self.resets += count
        return count

    def open_connections(self) -> int:
        return self._ask("count")

    def _ask(self, command: str) -> int:
        self._control.send(command)
        if not self._control.poll(30):
            raise RuntimeError(f"the relay process did not answer {command!r} within 30 s")
        return self._control.recv()

    def close(self) -> None:
        if self._process.is_alive():
            try:
                self._ask("close")
            except (OSError, EOFError, RuntimeError):
                pass
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
        self._control.close()

    def kubeconfig(self, original: str, directory: str | os.PathLike) -> str:
        """A copy of kubeconfig ``original`` whose clusters point at this proxy."""
        with open(original, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        for cluster in doc.get("clusters") or []:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path = Path(directory) / f"proxy-{self.port}.kubeconfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yaml.safe_dump(doc, fh)
        return str(path)


class _Pair:
    """A client connection and its upstream one, with the bytes waiting to go to each."""

    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.connected = False  # the upstream connect has completed
        self.waiting = {client: bytearray(), server: bytearray()}
        self.ended: set[socket.socket] = set()  # sides that sent their EOF
        self.shut: set[socket.socket] = set()   # sides that were passed an EOF on

    def peer(self, sock: socket.socket) -> socket.socket:
        return self.server if sock is self.client else self.client


class _Relay:
    def __init__(self, upstream: tuple[str, int], control):
        self.upstream = upstream
        self.control = control
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(512)
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(control, selectors.EVENT_READ, "control")
        self.pairs: set[_Pair] = set()

    def serve(self) -> None:
        self.control.send(self.listener.getsockname()[1])
        while True:
            for key, events in self.selector.select():
                if key.data == "accept":
                    self._accept()
                elif key.data == "control":
                    if not self._command():
                        return
                else:
                    self._move(key.data, key.fileobj, events)

    def _accept(self) -> None:
        try:
            client, _addr = self.listener.accept()
        except OSError:
            return
        client.setblocking(False)
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setblocking(False)
        if server.connect_ex(self.upstream) not in (0, errno.EINPROGRESS):
            _reset(client)
            _close(server)
            return
        pair = _Pair(client, server)
        self.pairs.add(pair)
        self.selector.register(server, selectors.EVENT_WRITE, pair)  # the connect completes

    def _command(self) -> bool:
        """Answer one command; False once closed."""
        try:
            command = self.control.recv()
        except EOFError:
            command = "close"
        count = len(self.pairs)
        if command in ("reset", "close"):
            for pair in list(self.pairs):
                self._drop(pair, reset=True)
        try:
            self.control.send(count)
        except OSError:
            pass
        if command == "close":
            _close(self.listener)
            return False
        return True

    def _move(self, pair: _Pair, sock: socket.socket, events: int) -> None:
        if pair not in self.pairs:
            return
        if not pair.connected:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._drop(pair, reset=True)  # the API server is away: the client sees a reset
                return
            pair.connected = True
            self.selector.register(pair.client, selectors.EVENT_READ, pair)
        try:
            if events & selectors.EVENT_WRITE and pair.waiting[sock]:
                sent = sock.send(pair.waiting[sock])
                del pair.waiting[sock][:sent]
            if events & selectors.EVENT_READ and sock not in pair.ended:
                data = sock.recv(CHUNK)
                if data:
                    pair.waiting[pair.peer(sock)] += data
                else:
                    pair.ended.add(sock)
            for side in pair.ended:
                # An EOF is passed on once the bytes before it have gone.
                peer = pair.peer(side)
                if not pair.waiting[peer] and peer not in pair.shut:
                    peer.shutdown(socket.SHUT_WR)
                    pair.shut.add(peer)
        except BlockingIOError:
            pass
        except OSError:
            self._drop(pair, reset=True)
            return
        if len(pair.shut) == 2:
            self._drop(pair, reset=False)
            return
        for side in (pair.client, pair.server):
            # Read a side only once what it sent has left (back-pressure); write where bytes wait.
            wanted = (0 if side in pair.ended or pair.waiting[pair.peer(side)] else selectors.EVENT_READ) \
                | (selectors.EVENT_WRITE if pair.waiting[side] else 0)
            self._want(side, wanted, pair)

    def _want(self, sock: socket.socket, events: int, pair: _Pair) -> None:
        try:
            registered = self.selector.get_key(sock).events
        except KeyError:
            registered = 0
        if events == registered:
            return
        if not events:
            self.selector.unregister(sock)
        elif registered:
            self.selector.modify(sock, events, pair)
        else:
            self.selector.register(sock, events, pair)

    def _drop(self, pair: _Pair, reset: bool) -> None:
        self.pairs.discard(pair)
        for sock in (pair.client, pair.server):
            try:
                self.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            if reset:
                _reset(sock)
            else:
                _close(sock)


def _serve(upstream: tuple[str, int], control) -> None:
    _Relay(upstream, control).serve()


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
