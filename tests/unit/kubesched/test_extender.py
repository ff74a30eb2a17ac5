"""kubesched/extender.py against the test extender (a real HTTP server on 127.0.0.1), and the
`extenders:` configuration. The same extender drives both schedulers in
tests/integration/kubesched/test_kubesched_extenders.py; here are the edge cases."""

from __future__ import annotations

import base64
import json
import socket
import ssl
from pathlib import Path

import pytest
import urllib3
from kubesched_fakes import node_raw, pod, pod_raw

from kubesched.config import ConfigError, parse_config
from kubesched.config.types import API_VERSION, KIND, ExtenderConfig, ManagedResource
from kubesched.extender import (
    ExtenderError,
    HTTPExtender,
    _transport_error,
    build_extenders,
    decode_answer,
    extender_scores,
    extenders_binding,
    find_nodes_that_pass_extenders,
)
from kubesched.framework.interface import Code
from kubesched.framework.types import NodeInfo, PodInfo


def requests_of(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def nodes(*names: str) -> list[NodeInfo]:
    return [NodeInfo(node_raw(n)) for n in names]


def extender(url: str, **kwargs) -> HTTPExtender:
    kwargs.setdefault("filter_verb", "filter")
    return HTTPExtender(ExtenderConfig(url_prefix=url, **kwargs))


def test_filter_sends_full_nodes_and_keeps_what_the_extender_returns(serve):
    url, log = serve("--reject", "b=blocked", "--unresolvable", "c=never")
    statuses: dict = {}
    passed = find_nodes_that_pass_extenders([extender(url)], pod("p"), nodes("a", "b", "c"), statuses)
    assert [n.name for n in passed] == ["a"]
    # As upstream: the extender's own node objects, in fresh NodeInfos without pods.
    assert passed[0].pods == {} and passed[0].raw["metadata"]["name"] == "a"
    assert (statuses["b"].code, statuses["b"].reasons) == (Code.UNSCHEDULABLE, ["blocked"])
    assert (statuses["c"].code, statuses["c"].reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["never"])
    [sent] = requests_of(log)
    assert sent["full_nodes"] and sent["nodes"] == ["a", "b", "c"] and sent["pod"] == "p"


def test_node_cache_capable_sends_names_and_maps_them_back(serve):
    url, log = serve("--reject", "b")
    given = nodes("a", "b")
    passed, failed, _unused = extender(url, node_cache_capable=True).filter(pod("p"), given)
    assert passed == [given[0]]  # the scheduler's own NodeInfo, with its pods
    assert failed == {"b": "rejected by the test extender"}
    assert not requests_of(log)[0]["full_nodes"]


def test_a_filtered_node_that_was_not_sent_is_an_error(monkeypatch):
    ext = extender("http://127.0.0.1:9", node_cache_capable=True)
    monkeypatch.setattr(ext, "send", lambda *a: {"NodeNames": ["ghost"]})
    with pytest.raises(ExtenderError, match='extender "http://127.0.0.1:9" claims a filtered node "ghost" which is '
                                            "not found in the input node list"):
        ext.filter(pod("p"), nodes("a"))


@pytest.mark.parametrize("misbehave, message", [
    ("filter=garbage", "invalid character '<' looking for beginning of value"),
    ("filter=status:500", "failed filter with extender at URL {url}/filter, code 500"),
    ("filter=error:quota exhausted", "quota exhausted"),
    ("filter=sleep:2", 'Post "{url}/filter": context deadline exceeded (Client.Timeout exceeded while awaiting '
                       "headers)"),
])
def test_failures_are_worded_as_kube_scheduler_words_them(serve, misbehave, message):
    url, _log = serve("--misbehave", misbehave)
    with pytest.raises(ExtenderError) as err:
        find_nodes_that_pass_extenders([extender(url, http_timeout=0.5)], pod("p"), nodes("a"), {})
    assert str(err.value) == message.format(url=url)


def test_an_unreachable_extender_is_a_dial_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ExtenderError) as err:
        extender(f"http://127.0.0.1:{port}").filter(pod("p"), nodes("a"))
    assert str(err.value) == f'Post "http://127.0.0.1:{port}/filter": dial tcp 127.0.0.1:{port}: connect: ' \
                             "connection refused"


def test_an_ignorable_extender_that_fails_is_skipped(serve):
    broken, _unused = serve("--misbehave", "filter=garbage")
    working, _unused = serve("--reject", "a")
    extenders = build_extenders([ExtenderConfig(url_prefix=broken, filter_verb="filter", ignorable=True),
                                 ExtenderConfig(url_prefix=working, filter_verb="filter")])
    assert [e.url_prefix for e in extenders] == [working, broken]  # ignorable ones last, as upstream
    passed = find_nodes_that_pass_extenders(extenders, pod("p"), nodes("a", "b"), {})
    assert [n.name for n in passed] == ["b"]


def test_scores_are_weighted_and_scaled_to_max_node_score(serve):
    first, _unused = serve("--score", "a=10", "--score", "b=3")
    second, _unused = serve("--score", "b=10")
    broken, _unused = serve("--misbehave", "prioritize=garbage")
    extenders = [extender(first, prioritize_verb="prioritize", weight=2),
                 extender(second, prioritize_verb="prioritize", weight=1),
                 extender(broken, prioritize_verb="prioritize", weight=5)]  # a failure gives no score
    assert extender_scores(extenders, pod("p"), nodes("a", "b", "c")) == {"a": 200, "b": 160, "c": 0}


def test_managed_resources_limit_which_pods_an_extender_sees(serve):
    url, log = serve("--reject", "a")
    ext = extender(url, managed_resources=[ManagedResource("example.com/gpu")])
    plain = pod("plain")
    raw = pod_raw("gpu")
    raw["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"example.com/gpu": "1"}}}]
    assert not ext.is_interested(plain) and ext.is_interested(PodInfo(raw))
    assert [n.name for n in find_nodes_that_pass_extenders([ext], plain, nodes("a"), {})] == ["a"]
    assert requests_of(log) == []


def test_bind_extender_binds_and_its_error_fails_the_bind(serve, monkeypatch):
    url, log = serve("--misbehave", "bind=error:node is full")
    binder = extender(url, bind_verb="bind")
    bound, status = extenders_binding([binder], pod("p"), "a")
    assert bound and status.code == Code.ERROR and status.message() == "node is full"
    assert requests_of(log)[0]["bind_node"] == "a"
    bound, status = extenders_binding([extender(url, bind_verb="bind", ignorable=True)], pod("p"), "a")
    assert (bound, status) == (False, None)  # ignorable: the Bind plugins bind instead


def test_decoding_matches_go(monkeypatch):
    assert decode_answer(b' {"nodenames": ["a"], "error": ""} trailing', "v1.ExtenderFilterResult") == \
        {"NodeNames": ["a"], "Error": ""}
    assert decode_answer(b"null", "v1.ExtenderFilterResult") == {}
    for body, message in ((b"", "EOF"), (b'{"Nodes":', "unexpected EOF"),
                          (b"[]", "json: cannot unmarshal array into Go value of type v1.ExtenderFilterResult"),
                          (b'{"Error": 3}', "json: cannot unmarshal number into Go struct field "
                                            "ExtenderFilterResult.Error of type string")):
        with pytest.raises(ExtenderError) as err:
            decode_answer(body, "v1.ExtenderFilterResult")
        assert str(err.value) == message


# --- configuration ------------------------------------------------------------------------------

def config(*extenders: dict) -> dict:
    return {"apiVersion": API_VERSION, "kind": KIND, "extenders": list(extenders)}


def test_extenders_are_parsed_with_upstream_defaults():
    cfg = parse_config(config({"urlPrefix": "https://ext:8443/sched", "filterVerb": "filter",
                               "prioritizeVerb": "prioritize", "weight": 3, "enableHTTPS": True,
                               "httpTimeout": "2s", "nodeCacheCapable": True, "ignorable": True,
                               "tlsConfig": {"serverName": "ext", "caData": base64.b64encode(b"PEM").decode()},
                               "managedResources": [{"name": "example.com/foo", "ignoredByScheduler": True}]}))
    [ext] = cfg.extenders
    assert (ext.url_prefix, ext.weight, ext.http_timeout, ext.node_cache_capable, ext.ignorable) == \
        ("https://ext:8443/sched", 3, 2.0, True, True)
    assert ext.tls_config.ca_data == b"PEM" and ext.tls_config.server_name == "ext"
    # ignoredByScheduler resources become NodeResourcesFit's ignoredResources (buildExtenders).
    assert cfg.profiles[0].plugin_config["NodeResourcesFit"]["ignoredResources"] == ["example.com/foo"]


@pytest.mark.parametrize("extenders, field, message", [
    ([{"urlPrefix": "http://a", "bindVerb": "bind"}, {"urlPrefix": "http://b", "bindVerb": "bind"}], "extenders",
     'Invalid value: "found 2 extenders implementing bind": only one extender can implement bind'),
    ([{"urlPrefix": "http://a", "prioritizeVerb": "p"}], "extenders[0].weight",
     "Invalid value: 0: must have a positive weight applied to it"),
    ([{"urlPrefix": "http://a", "managedResources": [{"name": "cpu"}]}], "extenders[0].managedResources[0].name",
     "is an invalid extended resource name"),
    ([{"urlPrefix": "http://a", "managedResources": [{"name": "a.io/x"}]},
      {"urlPrefix": "http://b", "managedResources": [{"name": "a.io/x"}]}],
     "extenders[1].managedResources[0].name", "duplicate extender managed resource name"),
    ([{"urlPrefix": "http://a", "tlsConfig": {"caData": "not base64!"}}], "extenders[0].tlsConfig.caData",
     "base64"),
    ([{"filterVerb": "filter"}], "extenders[0].urlPrefix", "required"),
    ([{"urlPrefix": "http://a", "filterverb": "filter"}], "extenders[0].filterverb", "unknown field"),
])
def test_bad_extender_configuration_names_the_field(extenders, field, message):
    with pytest.raises(ConfigError) as err:
        parse_config(config(*extenders))
    assert err.value.field == field and message in err.value.message


def test_missing_tls_files_fail_when_the_extender_is_built(tmp_path):
    from kubesched.extender import ExtenderTLSError

    cfg = parse_config(config({"urlPrefix": "https://a", "tlsConfig": {"caFile": str(tmp_path / "nope.crt")}}))
    with pytest.raises(ExtenderTLSError, match=r"extenders\[0\].tlsConfig: cannot load the TLS files"):
        build_extenders(cfg.extenders)


def _ssl_error(cls, reason: str = "", verify_code: int | None = None):
    err = cls(1, reason or "failure")
    err.reason = reason or None
    if verify_code is not None:
        err.verify_code = verify_code
    return err


@pytest.mark.parametrize("cause, sends_client_cert, said", [
    (_ssl_error(ssl.SSLCertVerificationError, "CERTIFICATE_VERIFY_FAILED", 19), True,
     "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
    (_ssl_error(ssl.SSLCertVerificationError, "CERTIFICATE_VERIFY_FAILED", 20), False,
     "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
    (_ssl_error(ssl.SSLError, "TLSV13_ALERT_CERTIFICATE_REQUIRED"), False, "remote error: tls: certificate required"),
    (_ssl_error(ssl.SSLError, "TLSV1_ALERT_UNKNOWN_CA"), True, "remote error: tls: unknown certificate authority"),
    (_ssl_error(ssl.SSLEOFError, "UNEXPECTED_EOF_WHILE_READING"), False,
     "tls: the extender closed the connection during the TLS exchange (if it requires a client certificate, set "
     "tlsConfig.certFile and keyFile)"),
    (_ssl_error(ssl.SSLEOFError, "UNEXPECTED_EOF_WHILE_READING"), True,
     "tls: the extender closed the connection during the TLS exchange (is tlsConfig.certFile signed by a CA the "
     "extender trusts?)"),
])
def test_tls_failures_are_worded_as_go_words_them_or_say_what_to_check(cause, sends_client_cert, said):
    wrapped = urllib3.exceptions.MaxRetryError(None, "https://127.0.0.1:1/filter",
                                               urllib3.exceptions.SSLError(cause))
    assert _transport_error(wrapped, "https://127.0.0.1:1/filter", sends_client_cert) == said


@pytest.mark.parametrize("scheme, reset, said", [
    ("https", ConnectionResetError(104, "Connection reset by peer"),
     "tls: the extender closed the connection during the TLS exchange (if it requires a client certificate, set "
     "tlsConfig.certFile and keyFile)"),
    ("https", BrokenPipeError(32, "Broken pipe"),
     "tls: the extender closed the connection during the TLS exchange (if it requires a client certificate, set "
     "tlsConfig.certFile and keyFile)"),
    ("http", ConnectionResetError(104, "Connection reset by peer"), "EOF"),
])
def test_a_connection_reset_after_the_tls_handshake_says_what_to_check(scheme, reset, said):
    url = f"{scheme}://127.0.0.1:1/filter"
    wrapped = urllib3.exceptions.MaxRetryError(None, url, urllib3.exceptions.ProtocolError("Connection aborted.", reset))
    assert _transport_error(wrapped, url) == said
