"""Security checks of kubesched against the private lab (the installed unit is checked by
`make reliability` on container masters)."""

import pytest

from reliability import security
from reliability.result import SuiteResult


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
    assert (answers["no_cert"], answers["cluster_ca"], answers["healthz_open"]) == (401, 200, 200)
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
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE", True),
    ("users:\n- user:\n    client-key-data: LS0tLS1CRUdJTi", True),
])
def test_the_key_material_scan_finds_keys(text, leaks):
    assert bool(security.key_material_in({"log": text}, [])) is leaks
