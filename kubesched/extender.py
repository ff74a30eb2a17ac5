"""Scheduler extenders: HTTP webhooks that filter, prioritize, preempt and bind
(upstream pkg/scheduler/extender.go, and the extender parts of schedule_one.go:
findNodesThatPassExtenders, prioritizeNodes, extendersBinding).

The wire format is k8s.io/kube-scheduler/extender/v1: Go structs without JSON tags, so the
keys are the Go field names (Pod, Nodes, NodeNames, FailedNodes, ...) and, as Go's decoder
does, answers are matched case-insensitively. Errors are worded as kube-scheduler words them,
because they become the pod's FailedScheduling event.
"""

from __future__ import annotations

import json
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import urllib3

from kubesched import jsoncodec, klog
from kubesched.framework.interface import MAX_NODE_SCORE, Code, Status
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.transport import load_cert_chain_data

# DefaultExtenderTimeout in v1.37's extender.go.
DEFAULT_EXTENDER_TIMEOUT = 5.0
MAX_EXTENDER_PRIORITY = 10
# The fake plugin name put in a pod's unschedulable plugins when an extender rejected nodes:
# no extender registers events, so any cluster event may requeue the pod (upstream ExtenderName).
EXTENDER_NAME = "Extender"


class ExtenderError(Exception):
    """A call to an extender failed; str() is kube-scheduler's wording of the same failure."""


class ExtenderTLSError(ValueError):
    """The extender's tlsConfig cannot be loaded (a missing or unreadable file, bad PEM)."""


# ---------------------------------------------------------------------------------------------
# Answers decoded as Go's encoding/json decodes them into the extender/v1 types
# ---------------------------------------------------------------------------------------------

_JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}

# Go type -> the top-level fields it has: field -> (Go type name, check).
_IS_STR = ("string", lambda v: isinstance(v, str))
_IS_STR_LIST = ("[]string", lambda v: isinstance(v, list))
_IS_MAP = ("v1.FailedNodesMap", lambda v: isinstance(v, dict))
_RESULT_FIELDS: dict[str, dict[str, tuple[str, Callable[[Any], bool]]]] = {
    "v1.ExtenderFilterResult": {"Nodes": ("v1.NodeList", lambda v: isinstance(v, dict)),
                                "NodeNames": _IS_STR_LIST, "FailedNodes": _IS_MAP,
                                "FailedAndUnresolvableNodes": _IS_MAP, "Error": _IS_STR},
    "v1.ExtenderBindingResult": {"Error": _IS_STR},
    "v1.ExtenderPreemptionResult": {"NodeNameToMetaVictims": ("map[string]*v1.MetaVictims",
                                                              lambda v: isinstance(v, dict))},
}


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), "value")


def decode_answer(body: bytes, go_type: str) -> Any:
    """The first JSON value of body (json.Decoder.Decode reads no further), checked against
    go_type's shape; ExtenderError carries Go's message for what Go would refuse."""
    text = body.decode("utf-8", errors="replace").lstrip(" \t\r\n")
    if not text:
        raise ExtenderError("EOF")
    try:
        value, _end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as err:
        if err.pos >= len(text):
            raise ExtenderError("unexpected EOF") from None
        char = text[err.pos]
        if err.pos == 0:
            raise ExtenderError(f"invalid character {char!r} looking for beginning of value") from None
        raise ExtenderError(f"invalid character {char!r} in JSON answer at offset {err.pos}") from None
    if value is None:
        return {} if go_type != "v1.HostPriorityList" else []
    if go_type == "v1.HostPriorityList":
        if not isinstance(value, list):
            raise ExtenderError(f"json: cannot unmarshal {_kind(value)} into Go value of type {go_type}")
        return value
    if not isinstance(value, dict):
        raise ExtenderError(f"json: cannot unmarshal {_kind(value)} into Go value of type {go_type}")
    fields = _RESULT_FIELDS[go_type]
    by_lower = {name.lower(): name for name in fields}
    decoded: dict[str, Any] = {}
    for key, item in value.items():
        name = by_lower.get(key.lower())
        if name is None or item is None:
            continue  # Go ignores unknown keys, and null leaves the zero value
        type_name, check = fields[name]
        if not check(item):
            raise ExtenderError(f"json: cannot unmarshal {_kind(item)} into Go struct field "
                                f"{go_type.split('.', 1)[1]}.{name} of type {type_name}")
        decoded[name] = item
    return decoded


def _field(obj: dict, name: str) -> Any:
    """obj[name], matching the key case-insensitively as Go's decoder does."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    return next((v for k, v in obj.items() if k.lower() == lowered), None)


# ---------------------------------------------------------------------------------------------
# One extender
# ---------------------------------------------------------------------------------------------

def _ssl_context(cfg: Any) -> ssl.SSLContext | None:
    """restclient.TLSConfigFor for the extender's tlsConfig (makeTransport): HTTPS without a CA
    skips verification, as upstream does."""
    tls = cfg.tls_config
    has_ca = bool(tls and (tls.ca_file or tls.ca_data))
    insecure = bool(tls and tls.insecure) or (cfg.enable_https and not has_ca)
    if tls is None and not cfg.enable_https:
        return None
    if insecure and has_ca:
        raise ExtenderTLSError(f"{cfg.path}.tlsConfig: specifying a root certificates file with the insecure flag "
                               "is not allowed (drop insecure or the CA)")
    context = ssl.create_default_context()
    try:
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif tls is not None and tls.ca_file:
            context.load_verify_locations(cafile=tls.ca_file)
        elif tls is not None and tls.ca_data:
            context.load_verify_locations(cadata=tls.ca_data.decode())
        if tls is not None and (tls.cert_file or tls.cert_data):
            _load_client_cert(context, tls)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise ExtenderTLSError(f"{cfg.path}.tlsConfig: cannot load the TLS files: {err}") from None
    return context


def _load_client_cert(context: ssl.SSLContext, tls: Any) -> None:
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file or None)
        return
    load_cert_chain_data(context, tls.cert_data, tls.key_data or None)


class HTTPExtender:
    """One configured extender (upstream HTTPExtender)."""

    def __init__(self, cfg: Any):
        """cfg: a config.types.ExtenderConfig (duck-typed: configuration imports nothing from here)."""
        self.url_prefix = cfg.url_prefix
        self.filter_verb = cfg.filter_verb
        self.prioritize_verb = cfg.prioritize_verb
        self.preempt_verb = cfg.preempt_verb
        self.bind_verb = cfg.bind_verb
        self.weight = cfg.weight
        self.node_cache_capable = cfg.node_cache_capable
        self.ignorable = cfg.ignorable
        self.managed_resources = frozenset(r.name for r in cfg.managed_resources)
        self.timeout = cfg.http_timeout or DEFAULT_EXTENDER_TIMEOUT
        pool_args: dict[str, Any] = {"maxsize": 8, "retries": False}
        context = _ssl_context(cfg)
        if context is not None:
            pool_args["ssl_context"] = context
            if context.verify_mode == ssl.CERT_NONE:
                pool_args["cert_reqs"] = ssl.CERT_NONE
            if cfg.tls_config is not None and cfg.tls_config.server_name:
                pool_args["server_hostname"] = cfg.tls_config.server_name
        self.pool = urllib3.PoolManager(num_pools=2, **pool_args)
        self.sends_client_cert = bool(cfg.tls_config and (cfg.tls_config.cert_file or cfg.tls_config.cert_data))

    def name(self) -> str:
        return self.url_prefix

    def __repr__(self) -> str:
        return f"HTTPExtender({self.url_prefix})"

    def is_ignorable(self) -> bool:
        return self.ignorable

    def is_filter(self) -> bool:
        return bool(self.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.preempt_verb)

    def is_interested(self, pod: PodInfo) -> bool:
        """Whether a container or init container requests or limits a managed resource."""
        if not self.managed_resources:
            return True
        spec = pod.raw.get("spec") or {}
        for container in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                if not self.managed_resources.isdisjoint(resources.get(kind) or ()):
                    return True
        return False

    def _args(self, pod: PodInfo, nodes: list[NodeInfo]) -> dict:
        if self.node_cache_capable:
            return {"Pod": pod.raw, "Nodes": None, "NodeNames": [n.name for n in nodes]}
        return {"Pod": pod.raw, "Nodes": {"metadata": {}, "items": [n.raw for n in nodes]}, "NodeNames": None}

    def filter(self, pod: PodInfo, nodes: list[NodeInfo]
               ) -> tuple[list[NodeInfo], dict[str, str], dict[str, str]]:
        """(nodes that pass, failed node -> message, failed-and-unresolvable node -> message)."""
        if not self.filter_verb:
            return nodes, {}, {}
        result = self.send(self.filter_verb, self._args(pod, nodes), "v1.ExtenderFilterResult")
        if result.get("Error"):
            raise ExtenderError(result["Error"])
        names = result.get("NodeNames")
        if self.node_cache_capable and names is not None:
            by_name = {n.name: n for n in nodes}
            passed = []
            for name in names:
                node = by_name.get(name) if isinstance(name, str) else None
                if node is None:
                    raise ExtenderError(f'extender "{self.url_prefix}" claims a filtered node "{name}" which is not '
                                        "found in the input node list")
                passed.append(node)
        elif result.get("Nodes") is not None:
            # As upstream: the nodes the extender sent back, as fresh NodeInfos without pods.
            passed = [NodeInfo(item) for item in result["Nodes"].get("items") or ()]
        else:
            passed = []
        return passed, _messages(result.get("FailedNodes")), _messages(result.get("FailedAndUnresolvableNodes"))

    def prioritize(self, pod: PodInfo, nodes: list[NodeInfo]) -> tuple[list[tuple[str, int]], int]:
        """([(host, score 0..10)], weight)."""
        if not self.prioritize_verb:
            return [(n.name, 0) for n in nodes], 0
        answer = self.send(self.prioritize_verb, self._args(pod, nodes), "v1.HostPriorityList")
        priorities = []
        for entry in answer:
            if not isinstance(entry, dict):
                raise ExtenderError(f"json: cannot unmarshal {_kind(entry)} into Go value of type v1.HostPriority")
            host, score = _field(entry, "Host"), _field(entry, "Score") or 0
            if not isinstance(score, int) or isinstance(score, bool):
                raise ExtenderError(f"json: cannot unmarshal {_kind(score)} into Go struct field HostPriority.Score "
                                    "of type int64")
            priorities.append((host if isinstance(host, str) else "", score))
        return priorities, self.weight

    def bind(self, pod: PodInfo, node_name: str) -> None:
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node_name}
        result = self.send(self.bind_verb, args, "v1.ExtenderBindingResult")
        if result.get("Error"):
            raise ExtenderError(result["Error"])

    def process_preemption(self, pod: PodInfo, victims: dict[str, tuple[list[PodInfo], int]],
                           node_lookup: Callable[[str], NodeInfo | None]) -> dict[str, tuple[list[PodInfo], int]]:
        """Node -> (victims, PDB violations) as the extender narrows them (ProcessPreemption)."""
        if self.node_cache_capable:
            args = {"Pod": pod.raw, "NodeNameToVictims": None, "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": pdb}
                for node, (pods, pdb) in victims.items()}}
        else:
            args = {"Pod": pod.raw, "NodeNameToMetaVictims": None, "NodeNameToVictims": {
                node: {"Pods": [p.raw for p in pods], "NumPDBViolations": pdb}
                for node, (pods, pdb) in victims.items()}}
        result = self.send(self.preempt_verb, args, "v1.ExtenderPreemptionResult")
        narrowed: dict[str, tuple[list[PodInfo], int]] = {}
        for node_name, meta in (result.get("NodeNameToMetaVictims") or {}).items():
            node = node_lookup(node_name)
            if node is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node_name}"')
            meta = meta if isinstance(meta, dict) else {}
            pods = []
            for meta_pod in _field(meta, "Pods") or ():
                uid = _field(meta_pod, "UID") if isinstance(meta_pod, dict) else None
                found = next((p for p in node.pods.values() if p.uid == uid), None)
                if found is None:
                    raise ExtenderError(f"extender: {self.url_prefix} claims to preempt pod (UID: &{{{uid}}}) on "
                                        f"node: {node_name}, but the pod is not found on that node")
                pods.append(found)
            narrowed[node_name] = (pods, int(_field(meta, "NumPDBViolations") or 0))
        return narrowed

    def send(self, action: str, args: dict, go_type: str) -> Any:
        """POST args to urlPrefix/action; the decoded answer or ExtenderError in Go's words."""
        url = self.url_prefix.rstrip("/") + "/" + action
        try:
            resp = self.pool.request("POST", url, body=jsoncodec.dumps(args),
                                     headers={"Content-Type": "application/json"},
                                     timeout=urllib3.Timeout(total=self.timeout), preload_content=False)
        except urllib3.exceptions.HTTPError as err:
            raise ExtenderError(f"Post {json.dumps(url)}: {_transport_error(err, url, self.sends_client_cert)}") from None
        try:
            if resp.status != 200:
                raise ExtenderError(f"failed {action} with extender at URL {url}, code {resp.status}")
            try:
                body = resp.read()
            except urllib3.exceptions.HTTPError:
                raise ExtenderError(f"Post {json.dumps(url)}: context deadline exceeded (Client.Timeout or "
                                    "context cancellation while reading body)") from None
        finally:
            resp.release_conn()
        return decode_answer(body, go_type)


def _messages(failed: Any) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else str(v) for k, v in (failed or {}).items()}


# OpenSSL's reasons for the TLS alerts an extender may send, as Go's crypto/tls names them
# ("remote error: tls: <alert>").
_TLS_ALERTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "certificate required",
    "TLSV1_ALERT_UNKNOWN_CA": "unknown certificate authority",
    "SSLV3_ALERT_BAD_CERTIFICATE": "bad certificate",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "expired certificate",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "handshake failure",
    "TLSV1_ALERT_ACCESS_DENIED": "access denied",
}
# OpenSSL's verify codes for a server certificate no configured CA signed: Go's x509.UnknownAuthorityError.
_UNKNOWN_AUTHORITY_CODES = {2, 18, 19, 20, 21}


def _tls_error(cause: BaseException, sends_client_cert: bool) -> str:
    """A failed TLS round trip in Go's words where Go's are known, else one that says what to check."""
    while not isinstance(cause, ssl.SSLError):  # urllib3 wraps the ssl module's error
        inner = cause.__cause__ or next((a for a in cause.args if isinstance(a, BaseException)), None)
        if inner is None:
            break
        cause = inner
    if isinstance(cause, ssl.SSLCertVerificationError) and cause.verify_code in _UNKNOWN_AUTHORITY_CODES:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    alert = _TLS_ALERTS.get(getattr(cause, "reason", None) or "")
    if alert:
        return f"remote error: tls: {alert}"
    if isinstance(cause, (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError)) or "EOF occurred" in str(cause):
        # An extender that refuses the client's certificate (or its absence) alerts and closes;
        # Python's client often meets the close before it reads the alert.
        hint = ("is tlsConfig.certFile signed by a CA the extender trusts?" if sends_client_cert
                else "if it requires a client certificate, set tlsConfig.certFile and keyFile")
        return f"tls: the extender closed the connection during the TLS exchange ({hint})"
    return f"tls: {cause}"


def _transport_error(err: BaseException, url: str, sends_client_cert: bool = False) -> str:
    """How Go's http.Client words a failed round trip."""
    cause = getattr(err, "reason", None) or err
    parsed = urllib3.util.parse_url(url)
    address = f"{parsed.host}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3: a refusal is checked first.
    if isinstance(cause, urllib3.exceptions.NewConnectionError) and "refused" in str(cause):
        return f"dial tcp {address}: connect: connection refused"
    if isinstance(cause, (urllib3.exceptions.TimeoutError, TimeoutError)) or "timed out" in str(cause):
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    if isinstance(cause, (urllib3.exceptions.SSLError, ssl.SSLError)):
        return _tls_error(cause, sends_client_cert)
    if isinstance(cause, urllib3.exceptions.ProtocolError):
        # A TLS 1.3 extender refuses a client certificate after the client's handshake ends, so
        # the refusal may reach the client as a reset under its first write, not as a TLS error.
        reset = next((a for a in cause.args if isinstance(a, (ConnectionResetError, BrokenPipeError))), None)
        if reset is not None and parsed.scheme == "https":
            return _tls_error(reset, sends_client_cert)
        return "EOF"
    return str(cause)


# ---------------------------------------------------------------------------------------------
# The extenders of one scheduler, as schedule_one.go calls them
# ---------------------------------------------------------------------------------------------

def build_extenders(configs: list[Any]) -> list[HTTPExtender]:
    """HTTPExtender per entry, ignorable ones last (upstream buildExtenders)."""
    extenders = [HTTPExtender(c) for c in configs]
    return [e for e in extenders if not e.ignorable] + [e for e in extenders if e.ignorable]


def find_nodes_that_pass_extenders(extenders: list[HTTPExtender], pod: PodInfo, feasible: list[NodeInfo],
                                   statuses: dict[str, Status]) -> list[NodeInfo]:
    """Each interested extender filters what the previous left; rejections land in statuses.
    Raises ExtenderError from an extender that is not ignorable."""
    for extender in extenders:
        if not feasible:
            break
        if not extender.is_interested(pod):
            continue
        try:
            passed, failed, unresolvable = extender.filter(pod, feasible)
        except ExtenderError as err:
            if extender.is_ignorable():
                klog.info("Skipping extender as it returned error and has ignorable flag set",
                          extender=extender.name(), err=str(err))
                continue
            raise
        for node_name, message in unresolvable.items():
            statuses[node_name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)
        for node_name, message in failed.items():
            if node_name not in unresolvable:  # the unresolvable verdict wins
                statuses[node_name] = Status(Code.UNSCHEDULABLE, message)
        feasible = passed
    return feasible


_prioritize_pool: ThreadPoolExecutor | None = None
_prioritize_pool_lock = threading.Lock()


def extender_scores(extenders: list[HTTPExtender], pod: PodInfo, nodes: list[NodeInfo]) -> dict[str, int]:
    """Node -> the sum over interested extenders of score * weight * (MaxNodeScore /
    MaxExtenderPriority). An extender that fails gives no score (upstream ignores it)."""
    interested = [e for e in extenders if e.is_interested(pod)]
    if not interested:
        return {}

    def one(extender: HTTPExtender) -> tuple[list[tuple[str, int]], int]:
        try:
            return extender.prioritize(pod, nodes)
        except ExtenderError as err:
            if klog.V(5):
                klog.info("Failed to run extender's priority function. No score given by this extender.",
                          err=str(err), pod=pod.key, extender=extender.name())
            return [], 0

    if len(interested) == 1:
        answers = [one(interested[0])]
    else:  # as upstream, extenders are asked at once: the slowest sets the cost, not the sum
        global _prioritize_pool
        with _prioritize_pool_lock:
            if _prioritize_pool is None:
                _prioritize_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="extender")
        answers = list(_prioritize_pool.map(one, interested))
    totals: dict[str, int] = {}
    for priorities, weight in answers:
        for host, score in priorities:
            totals[host] = totals.get(host, 0) + score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    return totals


def extenders_binding(extenders: list[HTTPExtender], pod: PodInfo, node_name: str) -> tuple[bool, Status | None]:
    """(bound by an extender, its failure) ; (False, None) leaves binding to the Bind plugins."""
    for extender in extenders:
        if not extender.is_binder() or not extender.is_interested(pod):
            continue
        try:
            extender.bind(pod, node_name)
        except ExtenderError as err:
            if extender.is_ignorable():
                klog.info("Skipping extender in bind as it returned error and has ignorable flag set",
                          extender=extender.name(), err=str(err))
                continue
            return True, Status(Code.ERROR, str(err), error=err)
        return True, None
    return False, None
