"""Delegated authentication and authorization: the rules and the caches (the lab test,
tests/integration/kubesched/test_kubesched_secure_port.py, asks the real API server)."""

import datetime
from email.message import Message

import pytest
from kubesched_fakes import FakeClient

from kubesched.auth import (
    ANONYMOUS_USER,
    AuthenticationError,
    DelegatingAuthenticator,
    DelegatingAuthorizer,
    RequestHeaderConfig,
    TTLCache,
    UserInfo,
)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def _headers(**values) -> Message:
    msg = Message()
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            msg[name.replace("_", "-")] = item
    return msg


def _ca_and_cert(common_name: str, organisations=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"ca-for-{common_name}")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organisations]
    cert = (x509.CertificateBuilder().subject_name(x509.Name(subject)).issuer_name(ca_name)
            .public_key(ec.generate_private_key(ec.SECP256R1()).public_key()).serial_number(2)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)).sign(ca_key, hashes.SHA256()))
    return ca.public_bytes(Encoding.PEM), cert.public_bytes(Encoding.DER)


def test_cache_entries_expire_by_their_own_ttl():
    clock = Clock()
    cache = TTLCache(clock, max_entries=2)
    cache.put("a", 1, 10)
    cache.put("b", 2, 1)
    clock.now += 5
    assert (cache.get("a"), cache.get("b")) == (1, None)
    cache.put("c", 3, 10)
    cache.put("d", 4, 10)  # full: the oldest goes
    assert cache.get("d") == 4 and len(cache._items) == 2


def test_client_certificate_names_the_user_and_groups():
    ca, cert = _ca_and_cert("alice", ["team-a", "team-b"])
    other_ca, stranger = _ca_and_cert("mallory")
    auth = DelegatingAuthenticator(client_ca_pem=ca)
    user = auth.authenticate(cert, _headers())
    assert (user.name, user.groups) == ("alice", ("team-a", "team-b", "system:authenticated"))
    assert auth.authenticate(stranger, _headers()) == ANONYMOUS_USER  # not this CA: no identity from it


def test_request_headers_only_from_an_allowed_front_proxy():
    ca, proxy = _ca_and_cert("front-proxy-client")
    config = RequestHeaderConfig(ca_pem=ca, allowed_names=["front-proxy-client"])
    auth = DelegatingAuthenticator(request_header=config)
    user = auth.authenticate(proxy, _headers(X_Remote_User="bob", X_Remote_Group=["g1", "g2"],
                                             **{"X-Remote-Extra-Scopes%20x": "s"}))
    assert (user.name, user.groups, user.extra) == ("bob", ("g1", "g2", "system:authenticated"),
                                                    (("scopes x", ("s",)),))
    assert auth.authenticate(proxy, _headers()) == ANONYMOUS_USER  # no username header: not this authenticator
    denied = DelegatingAuthenticator(request_header=RequestHeaderConfig(ca_pem=ca, allowed_names=["aggregator"]))
    with pytest.raises(AuthenticationError, match="cn=front-proxy-client is not in the allowed list"):
        denied.authenticate(proxy, _headers(X_Remote_User="bob"))


def test_token_reviews_are_cached_for_the_ttl():
    clock = Clock()
    reviews = FakeClient(answers={TOKEN_REVIEWS: {"status": {"authenticated": True,
                                                             "user": {"username": "sa", "groups": ["x"]}}}})
    auth = DelegatingAuthenticator(token_client=reviews, token_cache_ttl=10, clock=clock)
    for _unused in range(3):
        assert auth.authenticate(None, _headers(Authorization="Bearer t0k")).name == "sa"
    assert len(reviews.calls) == 1
    clock.now += 11
    auth.authenticate(None, _headers(Authorization="Bearer t0k"))
    assert len(reviews.calls) == 2
    reviews.answers[TOKEN_REVIEWS] = {"status": {"authenticated": False, "error": "invalid bearer token"}}
    with pytest.raises(AuthenticationError, match="invalid bearer token"):
        auth.authenticate(None, _headers(Authorization="Bearer other"))


def test_authorization_groups_paths_then_subject_access_review_cached():
    clock = Clock()
    reviews = FakeClient(answers={ACCESS_REVIEWS: {"status": {"allowed": False}}})
    authz = DelegatingAuthorizer(always_allow_paths=["/healthz", "debug/*"], sar_client=reviews,
                                 allowed_ttl=10, denied_ttl=2, clock=clock)
    user = UserInfo("u", groups=("system:authenticated",))
    assert authz.authorize(UserInfo("root", groups=("system:masters",)), "get", "/metrics") == (True, "")
    assert authz.authorize(user, "get", "/healthz") == (True, "")
    assert authz.authorize(user, "get", "/debug/pprof") == (True, "")
    assert authz.authorize(user, "get", "/metrics")[0] is False
    assert authz.authorize(user, "get", "/metrics")[0] is False
    spec = reviews.calls[0][2]["spec"]
    assert spec == {"user": "u", "groups": ["system:authenticated"],
                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert len(reviews.calls) == 1
    reviews.answers[ACCESS_REVIEWS] = {"status": {"allowed": True}}
    clock.now += 3  # the denial's TTL (2 s) is over
    assert authz.authorize(user, "get", "/metrics")[0] is True
    assert len(reviews.calls) == 2
