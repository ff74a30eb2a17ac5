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
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import unquote

from kubesched import klog
from kubesched.client import ApiClient, ApiError, ClusterCredentials, KubeconfigError, load_kubeconfig

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
    def __init__(self, *, client_ca_pem: bytes = b"", request_header: RequestHeaderConfig | None = None,
                 token_client: ApiClient | None = None, token_cache_ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.client_cas = _load_cas(client_ca_pem)
        self.request_header = request_header if request_header and request_header.ca_pem else None
        self.request_header_cas = _load_cas(request_header.ca_pem) if self.request_header else []
        self.token_client = token_client
        self.token_cache_ttl = token_cache_ttl
        self.token_cache = TTLCache(clock)

    def add_looked_up(self, client_ca_pem: bytes, request_header: RequestHeaderConfig | None) -> bytes:
        """Take what the flags left unset from the cluster's published settings; returns the PEM of new CAs."""
        from cryptography.hazmat.primitives.serialization import Encoding

        new = []
        if client_ca_pem and not self.client_cas:
            new += _load_cas(client_ca_pem)
            self.client_cas = list(new)
        if request_header is not None and request_header.ca_pem and self.request_header is None:
            cas = _load_cas(request_header.ca_pem)
            new += cas
            self.request_header_cas = cas
            self.request_header = request_header
        return b"".join(ca.public_bytes(Encoding.PEM) for ca in new)

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
            if self.request_header and _signed_by_one_of(cert, self.request_header_cas):
                user = self._from_request_headers(cert, headers)
                if user is not None:
                    return user
            if _signed_by_one_of(cert, self.client_cas):
                return _x509_user(cert)
        authorization = headers.get("Authorization", "")
        scheme, _sep, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self._review_token(token.strip())
        return None

    def _from_request_headers(self, cert, headers) -> UserInfo | None:
        config = self.request_header
        assert config is not None
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
    data = client.get(AUTH_CONFIGMAP).get("data") or {}
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
