"""client-go's rest_client_* metrics, as kube-scheduler exposes them
(k8s.io/component-base/metrics/prometheus/restclient, fed by k8s.io/client-go/rest/request.go).

Names, help texts (with component-base's ``[ALPHA]`` stability prefix), label names and buckets
are v1.37.1's. Every request of an ApiClient counts, wherever it is sent from: the requests of
the API writer process are counted in the scheduler process, which sends them; the lists and
watches of the watch process reach the scheduler process as records (apiproc.py), so /metrics
shows one client's figures, as kube-scheduler's does. Labels: ``verb`` and ``method`` are the
HTTP method, ``host`` the API server's host:port, ``code`` the HTTP status or ``<error>`` when
no answer came.

kubesched has no exec credential plugins and no transport cache: their families show what is
true of it (a TTL of +Inf, an empty rotation histogram, no cached transport, every transport
created uncached). It retries no request (urllib3 only reconnects), so
rest_client_request_retries_total, which client-go shows only once it retried, never appears.
"""

from __future__ import annotations

from typing import Tuple
from urllib.parse import urlsplit

from prometheus_client import Counter, Gauge, Histogram

from kubesched.metrics import REGISTRY

LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
SIZE_BUCKETS = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
ROTATION_AGE_BUCKETS = (600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000)
NO_ANSWER = "<error>"

request_latency = Histogram(
    "rest_client_request_duration_seconds", "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"], buckets=LATENCY_BUCKETS, registry=REGISTRY)
request_size = Histogram(
    "rest_client_request_size_bytes", "[ALPHA] Request size in bytes. Broken down by verb and host.",
    ["verb", "host"], buckets=SIZE_BUCKETS, registry=REGISTRY)
response_size = Histogram(
    "rest_client_response_size_bytes", "[ALPHA] Response size in bytes. Broken down by verb and host.",
    ["verb", "host"], buckets=SIZE_BUCKETS, registry=REGISTRY)
rate_limiter_latency = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "[ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"], buckets=LATENCY_BUCKETS, registry=REGISTRY)
request_result = Counter(
    "rest_client_requests", "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"], registry=REGISTRY)
exec_plugin_cert_ttl = Gauge(
    "rest_client_exec_plugin_ttl_seconds",
    "[ALPHA] Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec "
    "plugin. The value is in seconds until certificate expiry (negative if already expired). If auth exec "
    "plugins are unused or manage no TLS certificates, the value will be +INF.", registry=REGISTRY)
exec_plugin_cert_ttl.set(float("inf"))
exec_plugin_cert_rotation = Histogram(
    "rest_client_exec_plugin_certificate_rotation_age",
    "[ALPHA] Histogram of the number of seconds the last auth exec plugin client certificate lived before being "
    "rotated. If auth exec plugin client certificates are unused, histogram will contain no data.",
    buckets=ROTATION_AGE_BUCKETS, registry=REGISTRY)
transport_cache_entries = Gauge(
    "rest_client_transport_cache_entries", "[ALPHA] Number of transport entries in the internal cache.",
    registry=REGISTRY)
transport_create_calls = Counter(
    "rest_client_transport_create_calls",
    "[ALPHA] Number of calls to get a new transport, partitioned by the result of the operation hit: obtained "
    "from the cache, miss: created and added to the cache, miss-gc: recreated and added back to the cache after "
    "being garbage collected, uncacheable: created and not cached", ["result"], registry=REGISTRY)
transport_cert_rotation_gc_calls = Counter(
    "rest_client_transport_cert_rotation_gc_calls",
    "[ALPHA] Number of times a cert rotation goroutine cancel func is called via GC cleanup of the associated "
    "transport", registry=REGISTRY)

# One request as the watch process reports it to the scheduler process:
# (method, host, code, seconds, request bytes or -1, response bytes or -1).
Observation = Tuple[str, str, str, float, int, int]

# Series resolved once per (method, host, code) and (method, host): the per-request path skips .labels().
_children: dict[tuple, tuple] = {}
_throttle_children: dict[tuple, object] = {}


def host_of(server: str) -> str:
    return urlsplit(server).netloc or "none"


def transport_created() -> None:
    transport_create_calls.labels("uncacheable").inc()


def record(method: str, host: str, code: str, seconds: float, sent: int, received: int) -> None:
    """One request's figures: latency, sizes (-1: not known), and its result."""
    key = (method, host, code)
    children = _children.get(key)
    if children is None:
        children = _children[key] = (request_latency.labels(method, host), request_size.labels(method, host),
                                     response_size.labels(method, host), request_result.labels(code, method, host))
    latency, sent_size, received_size, result = children
    latency.observe(seconds)
    if sent >= 0:
        sent_size.observe(sent)
    if received >= 0:
        received_size.observe(received)
    result.inc()


def record_throttle(method: str, host: str, seconds: float) -> None:
    child = _throttle_children.get((method, host))
    if child is None:
        child = _throttle_children[(method, host)] = rate_limiter_latency.labels(method, host)
    child.observe(seconds)
