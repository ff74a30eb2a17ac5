"""rest_client_* count what an ApiClient sends: per code, method and host, with latency and
sizes; a request without an answer counts as <error> (test_kubesched_metrics.py checks names,
labels and buckets against kube-scheduler's on the lab)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubesched.client import ApiClient, ApiError, ClusterCredentials
from kubesched.metrics import REGISTRY


@pytest.fixture
def server():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            if self.path.startswith("/missing"):
                self._answer(404, {"kind": "Status", "reason": "NotFound", "message": "not found"})
            else:
                self._answer(200, {"items": ["x" * 100]})

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer(201, {})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_requests_are_counted_by_code_method_and_host(server):
    host = f"127.0.0.1:{server}"
    client = ApiClient(ClusterCredentials(server=f"http://{host}"), qps=1000, burst=1000)
    before = {key: sample("rest_client_requests_total", code=key[0], method=key[1], host=host)
              for key in (("200", "GET"), ("404", "GET"), ("201", "POST"))}
    sent_before = sample("rest_client_request_size_bytes_sum", verb="POST", host=host)
    client.get("/ok")
    client.request("POST", "/things", {"name": "x" * 50})
    with pytest.raises(ApiError):
        client.get("/missing")
    assert sample("rest_client_requests_total", code="200", method="GET", host=host) == before[("200", "GET")] + 1
    assert sample("rest_client_requests_total", code="404", method="GET", host=host) == before[("404", "GET")] + 1
    assert sample("rest_client_requests_total", code="201", method="POST", host=host) == before[("201", "POST")] + 1
    assert sample("rest_client_request_size_bytes_sum", verb="POST", host=host) - sent_before >= 50
    assert sample("rest_client_response_size_bytes_count", verb="GET", host=host) >= 2
    assert sample("rest_client_request_duration_seconds_count", verb="GET", host=host) >= 2
    assert sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) >= 2


def test_a_request_without_an_answer_counts_as_error():
    client = ApiClient(ClusterCredentials(server="http://127.0.0.1:1"), qps=0, burst=0)
    before = sample("rest_client_requests_total", code="<error>", method="GET", host="127.0.0.1:1")
    with pytest.raises(Exception):  # noqa: B017 - whatever urllib3 raises for a refused connection
        client.get("/")
    assert sample("rest_client_requests_total", code="<error>", method="GET", host="127.0.0.1:1") == before + 1
    # No limit (qps 0): no rate limiter observation, as client-go without a rate limiter.
    assert sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host="127.0.0.1:1") == 0
