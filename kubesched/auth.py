"""Delegated authentication and authorization of the secure port, as kube-scheduler's.

kube-scheduler (k8s.io/apiserver/pkg/server/options/authentication.go and authorization.go)
does not judge callers itself: it asks the API server.

Authentication, first match wins:
  1. request headers: a client certificate signed by --requestheader-client-ca-file (and, when
     --requestheader-allowed-names is set, with one of those common names) vouches for the user
     named in --requestheader-username-headers (groups and extra from the other headers);
  2. client certificates signed by --client-ca-file: user = CN, groups = O;
  3. bearer tokens, checked by a TokenReview (answers cached for
     --authentication-token-webhook-cache-ttl);
  4. anything else is system:anonymous (group system:unauthenticated).
  With --authentication-skip-lookup=false (the default), the CAs and header names not given as
  flags are read from kube-system/extension-apiserver-authentication, as the API server
  publishes them there.
  The CAs are reloaded when they change, as kube-scheduler's dynamiccertificates do: the files
  of --client-ca-file and --requestheader-client-ca-file when their mtime, size or inode
  changes (checked every second, where upstream has fsnotify) and every minute regardless; the
  configmap through a watch, re-read every minute. Unreadable or empty new content keeps the
  CAs in use, as upstream does.

Authorization, first allow wins: the group system:masters; --authorization-always-allow-paths
(default /healthz, /readyz, /livez; a trailing * matches a prefix); a SubjectAccessReview for
the non-resource path and the request's verb (allowed and denied answers cached for
--authorization-webhook-cache-authorized-ttl / -unauthorized-ttl).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable
from urllib.parse import unquote

import urllib3

from kubesched import klog
from kubesched.client import ApiClient, ApiError, ClusterCredentials, KubeconfigError, WatchExpired, load_kubeconfig

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
AUTH_CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Upstream gives the delegation clients high limits: they bound the port's responsiveness.
DELEGATION_QPS, DELEGATION_BURST, DELEGATION_TIMEOUT = 200.0, 400, 10.0
CACHE_MAX_ENTRIES = 4096
# Upstream's dynamiccertificates.FileRefreshDuration: files and the configmap are re-read this often
# even when no event says they changed.
CA_REFRESH_SECONDS = 60.0
FILE_POLL_SECONDS = 1.0  # a stat per file, where upstream gets fsnotify events
WATCH_RETRY_MAX_SECONDS = 30.0


class AuthenticationError(Exception):
    """A credential was presented and is wrong: the request gets 401, not anonymity."""


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(UNAUTHENTICATED_GROUP,))


class TTLCache:
    """A small thread-safe map whose entries expire; per-entry TTL (allowed and denied differ)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_entries: int = CACHE_MAX_ENTRIES):
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._max = max_entries

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            if hit[0] <= self._clock():
                del self._items[key]
                return None
            return hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            now = self._clock()
            if len(self._items) >= self._max:
                for stale in [k for k, (expiry, _v) in self._items.items() if expiry <= now] or [next(iter(self._items))]:
                    del self._items[stale]
            self._items[key] = (now + ttl, value)


def in_cluster_credentials() -> ClusterCredentials | None:
    """The pod's service account, as client-go's rest.InClusterConfig; None outside a pod."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    if not host or not port or not os.path.exists(token_file):
        return None
    with open(token_file, encoding="utf-8") as fh:
        token = fh.read().strip()
    server_host = f"[{host}]" if ":" in host else host
    return ClusterCredentials(server=f"https://{server_host}:{port}", ca_file=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
                              token=token)


def delegation_client(kubeconfig: str, fallback: ClusterCredentials | None, purpose: str) -> ApiClient | None:
    """A client for TokenReviews or SubjectAccessReviews: the given kubeconfig, else in-cluster, else fallback.

    The fallback (the scheduler's own kubeconfig) lets a scheduler run as a host service
    delegate without repeating its kubeconfig in two more flags.
    """
    creds: ClusterCredentials | None
    if kubeconfig:
        try:
            creds = load_kubeconfig(kubeconfig)
        except KubeconfigError as err:
            raise KubeconfigError(f"--{purpose}-kubeconfig: {err}") from None
    else:
        creds = in_cluster_credentials() or fallback
        if creds is None:
            return None
    return ApiClient(creds, qps=DELEGATION_QPS, burst=DELEGATION_BURST, pool_size=16, timeout=DELEGATION_TIMEOUT,
                     user_agent=f"kubesched delegated-{purpose}")


# ---------------------------------------------------------------------------------------------
# Authentication
# ---------------------------------------------------------------------------------------------

@dataclass
class RequestHeaderConfig:
    ca_pem: bytes = b""
    allowed_names: list[str] = field(default_factory=list)
    username_headers: list[str] = field(default_factory=lambda: ["x-remote-user"])
    group_headers: list[str] = field(default_factory=lambda: ["x-remote-group"])
    extra_prefixes: list[str] = field(default_factory=lambda: ["x-remote-extra-"])
    uid_headers: list[str] = field(default_factory=list)


def _load_cas(pem: bytes) -> list:
    from cryptography import x509

    return x509.load_pem_x509_certificates(pem) if pem.strip() else []


def _signed_by_one_of(cert, cas: list) -> bool:
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
            return True
        except Exception:  # noqa: BLE001 - any mismatch (name, signature, algorithm) means "not this CA"
            continue
    return False


def _x509_user(cert) -> UserInfo:
    from cryptography.x509.oid import NameOID

    common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not common_names or not common_names[0].value:
        raise AuthenticationError("x509: client certificate has no common name")
    groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return UserInfo(str(common_names[0].value), groups=groups)


class DelegatingAuthenticator:
    """The caller's identity from request headers, client certificates or a token.

    The CAs can change while the port serves (reload_* below); a listener (the server's TLS
    context) is told after each change. CAs given by flags are never replaced by looked-up ones.
    """

    def __init__(self, *, client_ca_pem: bytes = b"", request_header: RequestHeaderConfig | None = None,
                 token_client: ApiClient | None = None, token_cache_ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.client_ca_pem = client_ca_pem
        self.client_cas = _load_cas(client_ca_pem)
        request_header = request_header if request_header and request_header.ca_pem else None
        # One tuple, swapped whole: a request never sees one reload's config with another's CAs.
        self._request_header_state = (request_header, _load_cas(request_header.ca_pem) if request_header else [])
        self.client_ca_from_flag = bool(client_ca_pem)
        self.request_header_from_flag = request_header is not None
        self.token_client = token_client
        self.token_cache_ttl = token_cache_ttl
        self.token_cache = TTLCache(clock)
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def request_header(self) -> RequestHeaderConfig | None:
        return self._request_header_state[0]

    @property
    def request_header_cas(self) -> list:
        return self._request_header_state[1]

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Called after the trusted CAs change (upstream's dynamiccertificates.Listener)."""
        self._listeners.append(listener)

    def reload_client_ca(self, client_ca_pem: bytes) -> bool:
        """Trust these client CAs from now on; False (and nothing changes) when they are the same."""
        with self._lock:
            if client_ca_pem == self.client_ca_pem:
                return False
            self.client_cas = _load_cas(client_ca_pem)
            self.client_ca_pem = client_ca_pem
        self._notify()
        return True

    def reload_request_header(self, request_header: RequestHeaderConfig | None) -> bool:
        """Take this request-header configuration (CA and names) from now on; False when it is the same."""
        request_header = request_header if request_header and request_header.ca_pem else None
        with self._lock:
            if request_header == self.request_header:
                return False
            self._request_header_state = (request_header, _load_cas(request_header.ca_pem) if request_header else [])
        self._notify()
        return True

    def apply_looked_up(self, client_ca_pem: bytes, request_header: RequestHeaderConfig | None) -> bool:
        """Take what the flags left unset from the cluster's published settings; True when that changed a CA."""
        changed = False
        if not self.client_ca_from_flag and client_ca_pem:
            changed |= self.reload_client_ca(client_ca_pem)
        if not self.request_header_from_flag and request_header is not None and request_header.ca_pem:
            changed |= self.reload_request_header(request_header)
        return changed

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    def trusted_ca_pem(self) -> bytes:
        """Every CA the TLS handshake must accept client certificates from."""
        from cryptography.hazmat.primitives.serialization import Encoding

        return b"".join(ca.public_bytes(Encoding.PEM) for ca in self.client_cas + self.request_header_cas)

    def authenticate(self, peer_cert_der: bytes | None, headers) -> UserInfo:
        """The caller's identity. headers: a mapping with get_all (http.client.HTTPMessage)."""
        user = self._authenticate(peer_cert_der, headers)
        if user is None:
            return ANONYMOUS_USER
        if AUTHENTICATED_GROUP not in user.groups:
            user = UserInfo(user.name, user.uid, user.groups + (AUTHENTICATED_GROUP,), user.extra)
        return user

    def _authenticate(self, peer_cert_der: bytes | None, headers) -> UserInfo | None:
        if peer_cert_der:
            from cryptography import x509

            cert = x509.load_der_x509_certificate(peer_cert_der)
            config, request_header_cas = self._request_header_state
            if config is not None and _signed_by_one_of(cert, request_header_cas):
                user = self._from_request_headers(config, cert, headers)
                if user is not None:
                    return user
            if _signed_by_one_of(cert, self.client_cas):
                return _x509_user(cert)
        authorization = headers.get("Authorization", "")
        scheme, _sep, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self._review_token(token.strip())
        return None

    def _from_request_headers(self, config: RequestHeaderConfig, cert, headers) -> UserInfo | None:
        if config.allowed_names:
            proxy = _x509_user(cert).name
            if proxy not in config.allowed_names:
                raise AuthenticationError(f"x509: subject with cn={proxy} is not in the allowed list")
        name = next((v.strip() for h in config.username_headers for v in headers.get_all(h) or () if v.strip()), "")
        if not name:
            return None
        uid = next((v.strip() for h in config.uid_headers for v in headers.get_all(h) or () if v.strip()), "")
        groups = tuple(v for h in config.group_headers for v in headers.get_all(h) or ())
        extra: dict[str, list[str]] = {}
        lowered_prefixes = [p.lower() for p in config.extra_prefixes]
        for header, value in headers.items():
            for prefix in lowered_prefixes:
                if header.lower().startswith(prefix):
                    extra.setdefault(unquote(header[len(prefix):].lower()), []).append(value)
        return UserInfo(name, uid, groups, tuple((k, tuple(v)) for k, v in sorted(extra.items())))

    def _review_token(self, token: str) -> UserInfo | None:
        if self.token_client is None:
            return None  # as upstream without an authentication kubeconfig: tokens are not checked, anonymous
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self.token_cache.get(key)
        if cached is not None:
            return _raise_or_return(cached)
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            status = (self.token_client.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
                      .get("status") or {})
        except (ApiError, OSError) as err:
            raise AuthenticationError(f"TokenReview failed: {err}") from None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple(sorted((k, tuple(v)) for k, v in (info.get("extra") or {}).items()))
            result: UserInfo | str | None = UserInfo(info.get("username", ""), info.get("uid", ""),
                                                     tuple(info.get("groups") or ()), extra)
        else:
            # Upstream's webhook authenticator: an error string fails the request, silence is anonymity.
            result = status.get("error") or None
        self.token_cache.put(key, result if result is not None else "", self.token_cache_ttl)
        return _raise_or_return(result)


def _raise_or_return(result):
    if isinstance(result, str):
        if result:
            raise AuthenticationError(result)
        return None
    return result


def lookup_authentication_config(client: ApiClient) -> dict[str, Any]:
    """The API server's published client CA and request-header settings (may be partial)."""
    return published_authentication_config(client.get(AUTH_CONFIGMAP))


def published_authentication_config(configmap: dict) -> dict[str, Any]:
    """client_ca_pem and request_header from kube-system/extension-apiserver-authentication's data."""
    data = configmap.get("data") or {}
    found: dict[str, Any] = {}
    if data.get("client-ca-file"):
        found["client_ca_pem"] = data["client-ca-file"].encode()
    if data.get("requestheader-client-ca-file"):
        def listed(key: str) -> list[str]:
            return [str(v) for v in json.loads(data.get(key) or "[]") or []]

        found["request_header"] = RequestHeaderConfig(
            ca_pem=data["requestheader-client-ca-file"].encode(),
            allowed_names=listed("requestheader-allowed-names"),
            username_headers=listed("requestheader-username-headers"),
            group_headers=listed("requestheader-group-headers"),
            extra_prefixes=listed("requestheader-extra-headers-prefix"),
            uid_headers=listed("requestheader-uid-headers"))
    return found


def file_state(path: str) -> tuple:
    """What a stat says about a file that a reload watches: (mtime, size, inode), () when missing."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return st.st_mtime_ns, st.st_size, st.st_ino


class CAReloader:
    """Keeps the authenticator's CAs current, in one daemon thread.

    files: the CA files the flags named, re-read when their (mtime, size, inode) changes and every
    CA_REFRESH_SECONDS; lookup_client: watch kube-system/extension-apiserver-authentication for what
    the flags left unset, re-read every CA_REFRESH_SECONDS (the watch's server-side timeout).
    """

    def __init__(self, authenticator: DelegatingAuthenticator, *, client_ca_file: str = "",
                 requestheader_client_ca_file: str = "", lookup_client: ApiClient | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.authenticator = authenticator
        self.files = {name: path for name, path in (("client", client_ca_file), ("requestheader", requestheader_client_ca_file))
                      if path}
        self.lookup_client = lookup_client
        self.clock = clock
        self._file_state: dict[str, tuple] = {name: file_state(path) for name, path in self.files.items()}
        self._file_read_at = clock()
        self._stop = threading.Event()

    def check_files(self) -> bool:
        """Re-read each CA file whose stat changed (all of them once a refresh period passed); True when a CA changed."""
        due = self.clock() - self._file_read_at >= CA_REFRESH_SECONDS
        if due:
            self._file_read_at = self.clock()
        changed = False
        for name, path in self.files.items():
            state = file_state(path)
            if not due and state == self._file_state[name]:
                continue
            self._file_state[name] = state
            try:
                with open(path, "rb") as fh:
                    pem = fh.read()
                if not pem.strip():
                    raise ValueError("the file is empty")
                if name == "client":
                    changed |= self.authenticator.reload_client_ca(pem)
                else:
                    config = self.authenticator.request_header
                    if config is not None:
                        changed |= self.authenticator.reload_request_header(replace(config, ca_pem=pem))
            except (OSError, ValueError) as err:
                klog.error("Cannot reload a CA bundle; keeping the one in use", file=path, err=str(err))
                continue
            if changed:
                klog.info("Reloaded a CA bundle", file=path)
        return changed

    def apply_configmap(self, configmap: dict) -> bool:
        """Take the published CAs from one version of the configmap; True when a CA changed."""
        try:
            found = published_authentication_config(configmap)
            changed = self.authenticator.apply_looked_up(found.get("client_ca_pem", b""), found.get("request_header"))
        except (ValueError, TypeError) as err:
            klog.error("Cannot use the CAs in kube-system/extension-apiserver-authentication; keeping the ones in use",
                       resourceVersion=(configmap.get("metadata") or {}).get("resourceVersion", ""), err=str(err))
            return False
        if changed:
            klog.info("Reloaded the client CAs from kube-system/extension-apiserver-authentication",
                      resourceVersion=(configmap.get("metadata") or {}).get("resourceVersion", ""))
        return changed

    def watch_configmap_once(self, timeout_seconds: int = int(CA_REFRESH_SECONDS)) -> None:
        """Read the configmap, then follow its changes until the watch's server-side timeout (one refresh period)."""
        assert self.lookup_client is not None
        configmap = self.lookup_client.get(AUTH_CONFIGMAP)
        self.apply_configmap(configmap)
        resource_version = (configmap.get("metadata") or {}).get("resourceVersion", "")
        # The single-object watch path: authorized by the configmap's name, as the
        # extension-apiserver-authentication-reader role grants it.
        watch_path = AUTH_CONFIGMAP.replace("/api/v1/namespaces/", "/api/v1/watch/namespaces/", 1)
        try:
            self._apply_watch(watch_path, resource_version, timeout_seconds)
        except WatchExpired:
            # A configmap unchanged for long has a resourceVersion older than the API server's
            # watch window (410 Gone). A watch without one starts with the current object as
            # ADDED, so no change is missed.
            self._apply_watch(watch_path, "", timeout_seconds)

    def _apply_watch(self, watch_path: str, resource_version: str, timeout_seconds: int) -> None:
        assert self.lookup_client is not None
        for event in self.lookup_client.watch(watch_path, resource_version, timeout_seconds=timeout_seconds):
            if self._stop.is_set():
                return
            if event.get("type") in ("ADDED", "MODIFIED"):
                self.apply_configmap(event.get("object") or {})

    def _poll_files(self) -> None:
        while not self._stop.wait(FILE_POLL_SECONDS):
            self.check_files()

    def _follow_configmap(self) -> None:
        retry = 1.0
        while not self._stop.is_set():
            try:
                self.watch_configmap_once()
                retry = 1.0
            except (ApiError, WatchExpired, urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                klog.warning("Cannot read or watch kube-system/extension-apiserver-authentication for the client CAs; "
                             "retrying. Grant get, list and watch on it, pass --client-ca-file, or pass "
                             "--authentication-skip-lookup", err=str(err), retryIn=f"{retry:g}s")
                self._stop.wait(retry)
                retry = min(retry * 2, WATCH_RETRY_MAX_SECONDS)

    def start(self) -> None:
        """One thread polls the files, one follows the configmap (a watch blocks; the files must not wait for it)."""
        if self.files:
            threading.Thread(target=self._poll_files, name="ca-file-reloader", daemon=True).start()
        if self.lookup_client is not None:
            threading.Thread(target=self._follow_configmap, name="ca-configmap-reloader", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


# ---------------------------------------------------------------------------------------------
# Authorization
# ---------------------------------------------------------------------------------------------

class DelegatingAuthorizer:
    def __init__(self, *, always_allow_paths=DEFAULT_ALWAYS_ALLOW_PATHS, always_allow_groups=(MASTERS_GROUP,),
                 sar_client: ApiClient | None = None, allowed_ttl: float = 10.0, denied_ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.exact_paths: set[str] = set()
        self.path_prefixes: list[str] = []
        for raw in always_allow_paths:
            path = raw.strip()
            if not path:
                continue
            path = path if path.startswith("/") else "/" + path
            if path.endswith("*"):
                self.path_prefixes.append(path[:-1])
            else:
                self.exact_paths.add(path)
        self.always_allow_groups = frozenset(always_allow_groups)
        self.sar_client = sar_client
        self.allowed_ttl, self.denied_ttl = allowed_ttl, denied_ttl
        self.cache = TTLCache(clock)

    def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for a non-resource request."""
        if self.always_allow_groups.intersection(user.groups):
            return True, ""
        if path in self.exact_paths or any(path.startswith(p) for p in self.path_prefixes):
            return True, ""
        if self.sar_client is None:
            return False, "no authorization-kubeconfig: only always-allowed paths and groups are served"
        key = (user, verb, path)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            status = (self.sar_client.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
                      .get("status") or {})
        except (ApiError, OSError) as err:
            klog.error("SubjectAccessReview failed", user=user.name, path=path, err=str(err))
            return False, f"authorization check failed: {err}"  # not cached: the next request asks again
        verdict = (bool(status.get("allowed")) and not status.get("denied"), status.get("reason", ""))
        self.cache.put(key, verdict, self.allowed_ttl if verdict[0] else self.denied_ttl)
        return verdict
