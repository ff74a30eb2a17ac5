"""A lean Kubernetes API client on urllib3 that speaks raw JSON.

The kubernetes package's model objects cost more to build than scheduling a pod, so the
scheduler reads and writes plain dicts. Requests are throttled by a token bucket honouring
clientConnection.qps/burst, like client-go's flowcontrol, and share one connection pool
sized for concurrent binds.
"""

from __future__ import annotations

import base64
import binascii
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

import urllib3
import yaml

from kubesched import jsoncodec, restclient_metrics
from kubesched.transport import load_cert_chain_data

# Above this rate a bucket would only add overhead; client-go treats qps<=0 as unthrottled too.
UNTHROTTLED_QPS = 10_000


class KubeconfigError(ValueError):
    """The kubeconfig is missing, unreadable or incomplete; the message says which part."""


# Failures that leave a request's fate unknown: it may have been made (a connection reset or a
# timeout after the request left). A write that failed so can be read back before it is undone.
NO_ANSWER = (OSError, TimeoutError, urllib3.exceptions.HTTPError)


READ_BACK_PAUSE_S = 1.0


def read_back(client: "ApiClient", path: str, pause: Callable[[float], bool]) -> dict | None:
    """The object at path, read after a write to it got no answer (NO_ANSWER): GETs until one
    is answered, pause(READ_BACK_PAUSE_S) between them (True ends the tries: the caller stops).
    None when the tries were ended or the server refused (the object is gone)."""
    while True:
        try:
            return client.get(path)
        except NO_ANSWER:
            if pause(READ_BACK_PAUSE_S):
                return None
        except ApiError:
            return None


class ApiError(Exception):
    """A non-2xx answer from the API server, with its HTTP status and Status message."""

    def __init__(self, status: int, reason: str, message: str, body: dict | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone); the caller must relist."""


@dataclass
class ClusterCredentials:
    """Where and how to reach the API server. A kubeconfig's *-data fields stay in memory
    (the *_data bytes, PEM): no credential is ever written to a file (transport.py)."""

    server: str
    ca_file: str | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = field(default=None, repr=False)
    tls_server_name: str | None = None
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = field(default=None, repr=False)


def tls_config_for(creds: ClusterCredentials) -> ssl.SSLContext:
    """The client TLS context for creds (client-go transport.TLSConfigFor): the CA file or
    data (else the system's roots), the client certificate and key from files or memory, or
    no verification at all for insecure-skip-tls-verify. Raises ssl.SSLError or OSError for
    unusable material."""
    if creds.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(
            cafile=creds.ca_file, cadata=creds.ca_data.decode("ascii", "replace") if creds.ca_data else None)
    load_client_certificate(context, creds)
    return context


def load_client_certificate(context: ssl.SSLContext, creds: ClusterCredentials) -> None:
    """Present creds' client certificate (from files, or from memory) on context's connections."""
    if creds.cert_file:
        context.load_cert_chain(creds.cert_file, creds.key_file)
    elif creds.cert_data:
        load_cert_chain_data(context, creds.cert_data, creds.key_data)


def _decode_data(data_b64: str) -> bytes:
    return base64.b64decode("".join(data_b64.split()), validate=True)


def load_kubeconfig(path: str, context: str | None = None) -> ClusterCredentials:
    """Resolve the current (or given) context of a kubeconfig into server and credentials.

    Raises KubeconfigError naming what is wrong, without contacting the cluster: the
    certificates and key are loaded into a TLS context once, so an unusable one is reported
    here and not at the first request.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as err:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {err.strerror}") from None
    except yaml.YAMLError:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig (expected a YAML object)")
    base = os.path.dirname(os.path.abspath(path))

    def named(section: str, name: str) -> dict:
        for item in doc.get(section) or ():
            if isinstance(item, dict) and item.get("name") == name:
                return item.get(section[:-1]) or {}
        raise KubeconfigError(f"kubeconfig {path}: {section[:-1]} {name!r} not found")

    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError(f"kubeconfig {path} has no current-context")
    ctx = named("contexts", ctx_name)
    cluster = named("clusters", ctx.get("cluster", ""))
    user = named("users", ctx.get("user", "")) if ctx.get("user") else {}
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} has no server")

    def data(obj: dict, data_key: str) -> bytes | None:
        if not obj.get(data_key):
            return None
        try:
            return _decode_data(obj[data_key])
        except (binascii.Error, ValueError, TypeError):
            raise KubeconfigError(f"kubeconfig {path}: {data_key} is not valid base64") from None

    def file(obj: dict, file_key: str, data_key: str) -> str | None:
        if obj.get(data_key) or not obj.get(file_key):  # as client-go: the data wins
            return None
        resolved = os.path.join(base, obj[file_key])
        if not os.access(resolved, os.R_OK):
            raise KubeconfigError(f"kubeconfig {path}: {file_key} {resolved} is not readable")
        return resolved

    token = user.get("token")
    if not token and user.get("tokenFile"):
        try:
            with open(os.path.join(base, user["tokenFile"]), encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as err:
            raise KubeconfigError(f"kubeconfig {path}: tokenFile: {err.strerror}") from None
    creds = ClusterCredentials(
        server=server.rstrip("/"),
        ca_file=file(cluster, "certificate-authority", "certificate-authority-data"),
        ca_data=data(cluster, "certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        cert_file=file(user, "client-certificate", "client-certificate-data"),
        cert_data=data(user, "client-certificate-data"),
        key_file=file(user, "client-key", "client-key-data"),
        key_data=data(user, "client-key-data"),
        token=token,
        tls_server_name=cluster.get("tls-server-name"),
    )
    if creds.server.startswith("https"):
        try:
            tls_config_for(creds)
        except (ssl.SSLError, OSError, ValueError) as err:
            raise KubeconfigError(f"kubeconfig {path}: the certificate authority, client certificate or key "
                                  f"cannot be used: {err}") from None
    return creds


# client-go's transport closes a connection that has been idle this long (IdleConnTimeout).
IDLE_CONN_TIMEOUT_S = 90.0


class _ClosesIdleConnections:
    """A urllib3 connection pool that closes a connection once it has been idle for
    IDLE_CONN_TIMEOUT_S, as Go's transport does: the connections a burst opened (an API server
    restart holds every request at once) do not stay open for the life of the process. The
    pool is a stack, so under steady traffic the same few connections serve every request and
    the rest only wait there; a sweep, at most every third of the timeout when a connection is
    given back, closes those and leaves their places empty (a new connection is made when the
    concurrency comes back)."""

    _next_sweep = 0.0

    def _put_conn(self, conn):  # urllib3's HTTPConnectionPool._put_conn
        now = time.monotonic()  # one clock read per request: this is every request's path
        if conn is not None:
            conn.kubesched_idle_since = now
        super()._put_conn(conn)
        if now >= self._next_sweep:
            self._next_sweep = now + IDLE_CONN_TIMEOUT_S / 3
            self._close_idle(now)

    def _close_idle(self, now: float) -> None:
        stack = self.pool
        if stack is None:  # the pool was closed
            return
        idle = []
        with stack.mutex:
            for place, conn in enumerate(stack.queue):
                if conn is not None and now - getattr(conn, "kubesched_idle_since", now) > IDLE_CONN_TIMEOUT_S:
                    idle.append(conn)
                    stack.queue[place] = None
        for conn in idle:
            conn.close()


class _HTTPConnectionPool(_ClosesIdleConnections, urllib3.HTTPConnectionPool):
    pass


class _HTTPSConnectionPool(_ClosesIdleConnections, urllib3.HTTPSConnectionPool):
    pass


class TokenBucket:
    """client-go's token bucket: qps tokens per second, at most burst saved up."""

    def __init__(self, qps: float, burst: int, clock=time.monotonic, sleep=time.sleep):
        self.unlimited = qps <= 0 or qps >= UNTHROTTLED_QPS
        self.qps = qps
        self.burst = max(1, burst)
        self.tokens = float(self.burst)
        self.clock = clock
        self.sleep = sleep
        self.last = clock()
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait before using it."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
            self.last = now
            self.tokens -= 1
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def accept(self) -> None:
        if self.unlimited:
            return
        wait = self.reserve()
        if wait > 0:
            self.sleep(wait)


class ApiClient:
    """Raw-JSON access to the endpoints a scheduler needs."""

    host = "none"  # the rest_client_* host label: the server's host:port
    # Where this client's rest_client_* figures go: the metrics of this process, or (in the
    # watch process, apiproc.py) a record for the scheduler process.
    record_request = staticmethod(restclient_metrics.record)
    record_throttle = staticmethod(restclient_metrics.record_throttle)

    def __init__(self, creds: ClusterCredentials, qps: float = 50, burst: int = 100,
                 pool_size: int = 64, user_agent: str = "kubesched", timeout: float = 30.0):
        self.server = creds.server
        self.host = restclient_metrics.host_of(creds.server)
        self.limiter = TokenBucket(qps, burst)
        self.timeout = timeout
        self._timeout = urllib3.Timeout(connect=5.0, read=timeout)  # shared: one per request costs CPU
        self.headers = {"Accept": "application/json", "User-Agent": user_agent}
        if creds.token:
            self.headers["Authorization"] = f"Bearer {creds.token}"
        kwargs: dict[str, Any] = {"maxsize": pool_size, "block": True,
                                  "retries": urllib3.Retry(total=0, connect=2, read=0, redirect=0,
                                                           status=0, raise_on_status=False)}
        if self.server.startswith("https"):
            if creds.insecure:
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            kwargs["ssl_context"] = tls_config_for(creds)
            if creds.tls_server_name:
                kwargs["server_hostname"] = creds.tls_server_name
        self.pool = urllib3.PoolManager(num_pools=4, **kwargs)
        self.pool.pool_classes_by_scheme = {"http": _HTTPConnectionPool, "https": _HTTPSConnectionPool}
        restclient_metrics.transport_created()

    @classmethod
    def from_kubeconfig(cls, path: str, qps: float = 50, burst: int = 100, **kwargs: Any) -> "ApiClient":
        return cls(load_kubeconfig(path), qps=qps, burst=burst, **kwargs)

    # -- plumbing -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, params: dict | None = None,
                content_type: str = "application/json", timeout: float | None = None) -> dict:
        self._throttle(method)
        data = None if body is None else jsoncodec.dumps(body)
        started = time.monotonic()
        try:
            status, payload = self.perform(method, path, data, params, content_type, timeout)
        except BaseException:
            self.record_request(method, self.host, restclient_metrics.NO_ANSWER, time.monotonic() - started,
                                len(data) if data is not None else 0, -1)
            raise
        self.record_request(method, self.host, str(status), time.monotonic() - started,
                            len(data) if data is not None else 0, len(payload))
        if status >= 300:
            raise _api_error(status, payload)
        return jsoncodec.loads(payload) if payload else {}

    def _throttle(self, method: str) -> None:
        """Take a token (client-go's tryThrottle), and say how long that took when there is a limit."""
        if self.limiter.unlimited:
            return
        started = time.monotonic()
        self.limiter.accept()
        self.record_throttle(method, self.host, time.monotonic() - started)

    def perform(self, method: str, path: str, data: bytes | None, params: dict | None, content_type: str,
                timeout: float | None, user_agent: str | None = None) -> tuple[int, bytes]:
        """Send one request, unthrottled (request() takes the token); the HTTP status and body."""
        url = self.server + path
        if params:
            url += "?" + urlencode(params)
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        if user_agent:
            headers["User-Agent"] = user_agent
        resp = self.pool.request(method, url, body=data, headers=headers,
                                 timeout=self._timeout if timeout is None else
                                 urllib3.Timeout(connect=min(5.0, timeout), read=timeout))
        return resp.status, resp.data

    def get(self, path: str, params: dict | None = None) -> dict:
        return self.request("GET", path, params=params)

    # -- the contract used by the scheduler and its plugins -------------------------------

    def list(self, path: str, params: dict | None = None, page_size: int = 0) -> dict:
        """GET a collection; with page_size, follow `continue` and return one merged list."""
        items: list[dict] = []
        for page in self.list_pages(path, params, page_size):
            items.extend(page.get("items") or ())
        page["items"] = items
        return page

    def list_pages(self, path: str, params: dict | None = None, page_size: int = 0) -> Iterator[dict]:
        """GET a collection a page at a time (one page without page_size); the last page's
        metadata carries the listing's resourceVersion."""
        query = dict(params or {})
        if page_size:
            query["limit"] = page_size
        while True:
            page = self.get(path, query or None)
            yield page
            token = (page.get("metadata") or {}).get("continue") if page_size else None
            if not token:
                return
            query["continue"] = token

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              bookmarks: bool = True, idle_timeout: float | None = None) -> Iterator[dict]:
        """Stream watch events ({"type", "object"}) from resource_version.

        Raises WatchExpired on 410 Gone (from the response or an ERROR event), ApiError on
        other failures; a clean server-side timeout simply ends the iteration. With
        idle_timeout, a stream that sends nothing for that long once it has answered raises
        urllib3's ReadTimeoutError.
        """
        self._throttle("GET")
        params = {"watch": "1", "resourceVersion": resource_version,
                  "timeoutSeconds": str(timeout_seconds)}
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        started = time.monotonic()
        try:
            resp = self.pool.request("GET", f"{self.server}{path}?{urlencode(params)}",
                                     headers=self.headers, preload_content=False,
                                     timeout=urllib3.Timeout(connect=5.0, read=timeout_seconds + 30))
        except BaseException:
            self.record_request("GET", self.host, restclient_metrics.NO_ANSWER, time.monotonic() - started, 0, -1)
            raise
        # The stream's length is not known: the answer counts, its size does not (as client-go's watch).
        self.record_request("GET", self.host, str(resp.status), time.monotonic() - started, 0, -1)
        try:
            if resp.status == 410:
                raise WatchExpired(resp.data.decode(errors="replace"))
            if resp.status >= 300:
                raise _api_error(resp.status, resp.data)
            if idle_timeout is not None:
                # The answer's head may be slow on a loaded server; the events after it may not.
                resp.connection.sock.settimeout(idle_timeout)
            buffer = b""
            while True:
                # read1 returns what has arrived: a quiet watch must not wait for a full buffer.
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                # One split per chunk: slicing one line at a time copied the rest of the
                # buffer for every event.
                lines = buffer.split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    if not line.strip():
                        continue
                    event = jsoncodec.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            raise WatchExpired(status.get("message", "resourceVersion too old"))
                        raise ApiError(status.get("code", 500), status.get("reason", ""),
                                       status.get("message", ""), status)
                    yield event
        finally:
            # A watch left mid-stream has unread bytes: close it rather than return it to the
            # pool, or the next request on that connection would read them as its response.
            resp.close()
            resp.release_conn()

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)

    def delete_pod(self, namespace: str, name: str, uid: str | None = None,
                   grace_period: int | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period is not None:
            body["gracePeriodSeconds"] = grace_period
        self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)

    def patch_pod_status(self, namespace: str, name: str, patch: dict) -> dict:
        return self.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", patch,
                            content_type="application/strategic-merge-patch+json")

    def create_event(self, namespace: str, event: dict, api: str = "events.k8s.io/v1") -> dict:
        if api == "events.k8s.io/v1":
            return self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
        return self.request("POST", f"/api/v1/namespaces/{namespace}/events", event)

    def patch_event(self, namespace: str, name: str, patch: dict) -> dict:
        return self.request("PATCH", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}",
                            patch, content_type="application/merge-patch+json")

    def get_lease(self, namespace: str, name: str, timeout: float | None = None) -> dict | None:
        try:
            return self.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                                timeout=timeout)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def create_lease(self, namespace: str, lease: dict, timeout: float | None = None) -> dict:
        return self.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", lease,
                            timeout=timeout)

    def update_lease(self, namespace: str, name: str, lease: dict, timeout: float | None = None) -> dict:
        return self.request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", lease,
                            timeout=timeout)


def _api_error(status: int, payload: bytes) -> ApiError:
    try:
        body = jsoncodec.loads(payload)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(status, body.get("reason", ""),
                    body.get("message") or payload.decode(errors="replace")[:200], body)


def hostname() -> str:
    return socket.gethostname()
