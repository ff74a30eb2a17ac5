"""The soak's resetting relay: bytes whole both ways, an upstream's close passed on after its
last bytes, every connection reset on demand, and a refused upstream seen as a reset."""

import hashlib
import os
import socket
import threading

import pytest

from tests.reliability.proxy import ResettingProxy


class Upstream:
    """Answers each connection with the SHA-256 of what it received up to a shutdown, then
    `size` bytes of its own, then closes."""

    def __init__(self, size: int = 3 * 1024 * 1024):
        self.size = size
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _addr = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        digest = hashlib.sha256()
        while chunk := conn.recv(65536):
            if chunk == b"hold":
                self.held.append(conn)
                return
            digest.update(chunk)
        conn.sendall(digest.digest() + bytes(range(256)) * (self.size // 256))
        conn.close()


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.listener.close()


@pytest.fixture
def proxy(upstream):
    relay = ResettingProxy("127.0.0.1", upstream.port)
    yield relay
    relay.close()


def _receive_all(sock: socket.socket) -> bytes:
    out = bytearray()
    while chunk := sock.recv(1 << 20):
        out += chunk
    return bytes(out)


def test_bytes_arrive_whole_both_ways_and_the_upstream_close_follows_its_last_bytes(proxy, upstream):
    payload = os.urandom(5 * 1024 * 1024)
    results = []

    def one() -> None:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            results.append(_receive_all(sock))

    clients = [threading.Thread(target=one) for _client in range(4)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(60)
    expected = hashlib.sha256(payload).digest() + bytes(range(256)) * (upstream.size // 256)
    assert len(results) == 4 and all(result == expected for result in results)
    assert proxy.open_connections() == 0


def test_reset_all_resets_every_open_connection(proxy, upstream):
    socks = [socket.create_connection(("127.0.0.1", proxy.port), timeout=10) for _socket in range(3)]
    for sock in socks:
        sock.sendall(b"hold")
    while len(upstream.held) < 3:
        threading.Event().wait(0.05)
    assert proxy.reset_all() == 3 and proxy.resets == 3
    for sock in socks:
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
        sock.close()
    for conn in upstream.held:
        with pytest.raises(ConnectionResetError):
            conn.recv(1)


def test_an_upstream_that_refuses_is_a_reset_for_the_client():
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    relay = ResettingProxy("127.0.0.1", port)
    try:
        with pytest.raises(ConnectionResetError):  # at connect already, or at the first read
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as sock:
                sock.sendall(b"x")
                sock.recv(1)
    finally:
        relay.close()
