"""Security checks of kubesched against the private lab (the installed unit is checked by
`make reliability` on container masters)."""

import base64

import pytest

from tests.reliability import security
from tests.reliability.result import SuiteResult


def _passed(result: SuiteResult) -> None:
    assert result.checks, "no check ran"
    assert result.passed, "\n".join(f"{c.name}: {c.detail}" for c in result.failures())


def test_secure_port_listens_on_the_configured_address_only(cluster, workdir):
    result = SuiteResult("t", "t")
    security.check_bind_address(result, cluster, workdir)
    _passed(result)


def test_metrics_require_a_client_certificate_signed_by_the_cluster_ca(private_lab, cluster, workdir):
    result = SuiteResult("t", "t")
    security.check_metrics_client_ca(result, private_lab, cluster, workdir)
    _passed(result)
    answers = result.figures["metrics_client_ca"]
    # Anonymous is authenticated as system:anonymous and then denied by the SubjectAccessReview
    # (403), as kube-scheduler answers; a certificate from another CA is not authenticated (401).
    assert (answers["no_cert"], answers["cluster_ca"], answers["healthz_open"]) == (403, 200, 200)
    assert answers["other_ca"] in (401, "tls-error")


def test_the_scheduler_identity_cannot_read_secrets(cluster):
    result = SuiteResult("t", "t")
    security.check_secrets_denied(result, cluster)
    _passed(result)


def test_tls_is_verified_by_default(private_lab, cluster, workdir):
    result = SuiteResult("t", "t")
    security.check_tls_verified_by_default(result, private_lab, cluster, workdir)
    _passed(result)


@pytest.mark.parametrize("text, leaks", [
    ("I1122 ... \"Starting kubesched\"", False),
    ("TASK [The kubeconfig embeds client-key-data from the issued key] ****", False),
    ("-----BEGIN CERTIFICATE-----\nMIIBkTCCATegAwIBAgIU", False),
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE", True),
    ("users:\n- user:\n    client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t", True),
    ('"content": "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JR0hBZ0VBTUJN"', True),
    ('{"client-key-data": "bm90IGEgcmVhbCBrZXkgYnV0IGZpbGxlZA=="}', True),
])
def test_the_key_material_scan_finds_keys(text, leaks):
    assert bool(security.key_material_in({"log": text}, [])) is leaks


def test_a_key_is_recognised_in_pem_and_in_kubeconfig_form():
    pem = "-----BEGIN EC PRIVATE KEY-----\n" + "MHcCAQEEIBx9" * 12 + "\n-----END EC PRIVATE KEY-----\n"
    fragments = security.key_fragments(pem)
    embedded = base64.b64encode(pem.encode()).decode()
    assert security.key_material_in({"printed as a file": "x " + pem.splitlines()[1][:70]}, fragments)
    assert security.key_material_in({"part of a kubeconfig field": f"key: ...{embedded[50:]}"}, fragments)
    assert not security.key_material_in({"another text": embedded[:40].lower()}, fragments)
