"""A TCP relay on 127.0.0.1 in front of the API server that can reset every connection.

TLS passes through untouched (the API server's certificate names 127.0.0.1, whatever the
port), so kubesched verifies the server and authenticates as it always does; ``reset_all``
closes both ends of every relayed connection with an RST, as a crashed load balancer or a
dropped conntrack entry would.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
from pathlib import Path

import yaml


class ResettingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.pairs: set[tuple[socket.socket, socket.socket]] = set()
        self.lock = threading.Lock()
        self.resets = 0
        self.closed = threading.Event()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _addr = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            server.settimeout(None)
            pair = (client, server)
            with self.lock:
                self.pairs.add(pair)
            threading.Thread(target=self._relay, args=(pair,), name="proxy-relay", daemon=True).start()

    def _relay(self, pair: tuple[socket.socket, socket.socket]) -> None:
        client, server = pair
        peer = {client: server, server: client}
        try:
            while True:
                readable, _w, _x = select.select([client, server], [], [], 1.0)
                if self.closed.is_set():
                    break
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peer[sock].sendall(data)
        except (OSError, ValueError):  # ValueError: select() on a socket reset_all() just closed
            return
        finally:
            with self.lock:
                self.pairs.discard(pair)
            for sock in pair:
                _close(sock)

    def reset_all(self) -> int:
        """RST every open connection; returns how many were open."""
        with self.lock:
            pairs = list(self.pairs)
            self.pairs.clear()
        for client, server in pairs:
            _reset(client)
            _reset(server)
        self.resets += len(pairs)
        return len(pairs)

    def close(self) -> None:
        self.closed.set()
        _close(self.listener)
        self.reset_all()

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
