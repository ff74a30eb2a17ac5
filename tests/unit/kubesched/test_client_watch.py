"""ApiClient.watch: events are cut from the stream at newlines however the bytes arrive, and
a 410 ERROR event raises WatchExpired."""

import json

import pytest

from kubesched.client import ApiClient, TokenBucket, WatchExpired


class Stream:
    """A watch response that hands out its body in fixed-size pieces."""

    def __init__(self, body: bytes, piece: int, status: int = 200):
        self.body, self.piece, self.status = body, piece, status
        self.data = b""
        self.closed = False

    def read1(self, size):
        out, self.body = self.body[:min(size, self.piece)], self.body[min(size, self.piece):]
        return out

    def close(self):
        self.closed = True

    def release_conn(self):
        pass


class Pool:
    def __init__(self, response):
        self.response = response

    def request(self, method, url, **kwargs):
        return self.response


def client_for(response) -> ApiClient:
    client = ApiClient.__new__(ApiClient)
    client.server = "https://127.0.0.1:6443"
    client.headers = {}
    client.limiter = TokenBucket(1000, 1000)
    client.pool = Pool(response)
    return client


EVENTS = [{"type": "ADDED", "object": {"metadata": {"name": f"p{i}", "note": "x" * (i * 37)}}} for i in range(40)]
BODY = b"".join(json.dumps(e).encode() + b"\n" + (b"\n" if i % 7 == 0 else b"") for i, e in enumerate(EVENTS))


@pytest.mark.parametrize("piece", [1, 7, 100, 4096, 1 << 20])
def test_every_event_arrives_whole_and_in_order(piece):
    response = Stream(BODY, piece)
    assert list(client_for(response).watch("/api/v1/pods", "1")) == EVENTS
    assert response.closed


def test_a_gone_error_event_means_relist():
    body = json.dumps(EVENTS[0]).encode() + b"\n" + json.dumps(
        {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}).encode() + b"\n"
    events = client_for(Stream(body, 50)).watch("/api/v1/pods", "1")
    assert next(events) == EVENTS[0]
    with pytest.raises(WatchExpired, match="too old resource version"):
        next(events)
