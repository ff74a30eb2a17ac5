"""The `extenders:` list: decoded entries to ExtenderConfig, validated as upstream's
validateExtenders (pkg/scheduler/apis/config/validation/validation.go) does.
"""

from __future__ import annotations

import base64
import binascii

from kubesched.api.names import is_extended_resource_name, qualified_name_error
from kubesched.config.types import ExtenderConfig, ExtenderTLSConfig, ManagedResource


class ExtenderConfigError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _pem(raw: dict, key: str, path: str) -> bytes:
    """certData/keyData/caData: []byte upstream, so base64 in YAML or JSON."""
    value = raw.get(key)
    if not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ExtenderConfigError(f"{path}.tlsConfig.{key}", "must be base64-encoded PEM (as in a kubeconfig's "
                                                             "certificate-authority-data), e.g. `base64 -w0 ca.crt`") from None


def parse_extenders(raw_extenders: list[dict]) -> list[ExtenderConfig]:
    """ExtenderConfig per entry (already strictly decoded); ExtenderConfigError names the field."""
    extenders = []
    binders = 0
    managed_names: set[str] = set()
    for i, raw in enumerate(raw_extenders):
        path = f"extenders[{i}]"
        raw = raw or {}
        # Upstream does not check urlPrefix; an empty one would only fail every call later.
        if not raw.get("urlPrefix"):
            raise ExtenderConfigError(f"{path}.urlPrefix", "required: the extender's base URL, e.g. "
                                                           "http://127.0.0.1:8888/scheduler")
        tls_raw = raw.get("tlsConfig")
        tls = None
        if tls_raw is not None:
            tls = ExtenderTLSConfig(
                insecure=bool(tls_raw.get("insecure")), server_name=tls_raw.get("serverName") or "",
                cert_file=tls_raw.get("certFile") or "", key_file=tls_raw.get("keyFile") or "",
                ca_file=tls_raw.get("caFile") or "", cert_data=_pem(tls_raw, "certData", path),
                key_data=_pem(tls_raw, "keyData", path), ca_data=_pem(tls_raw, "caData", path))
        ext = ExtenderConfig(
            url_prefix=raw["urlPrefix"], filter_verb=raw.get("filterVerb") or "",
            preempt_verb=raw.get("preemptVerb") or "", prioritize_verb=raw.get("prioritizeVerb") or "",
            weight=raw.get("weight") or 0, bind_verb=raw.get("bindVerb") or "",
            enable_https=bool(raw.get("enableHTTPS")), tls_config=tls,
            http_timeout=raw.get("httpTimeout") or 0.0, node_cache_capable=bool(raw.get("nodeCacheCapable")),
            ignorable=bool(raw.get("ignorable")), path=path)
        if ext.http_timeout < 0:
            raise ExtenderConfigError(f"{path}.httpTimeout", f"must not be negative, got {raw.get('httpTimeout')}")
        if ext.prioritize_verb and ext.weight <= 0:
            raise ExtenderConfigError(f"{path}.weight", f"Invalid value: {ext.weight}: must have a positive weight "
                                                        "applied to it (prioritizeVerb is set)")
        if ext.bind_verb:
            binders += 1
        for j, res in enumerate(raw.get("managedResources") or ()):
            where = f"{path}.managedResources[{j}].name"
            name = (res or {}).get("name") or ""
            problem = qualified_name_error(name)
            if problem is not None:
                raise ExtenderConfigError(where, f"Invalid value: {name!r}: {problem}")
            if not is_extended_resource_name(name):
                raise ExtenderConfigError(where, f"Invalid value: {name!r}: is an invalid extended resource name "
                                                 "(use a domain-prefixed name outside kubernetes.io, e.g. example.com/gpu)")
            if name in managed_names:
                raise ExtenderConfigError(where, f"Invalid value: {name!r}: duplicate extender managed resource name")
            managed_names.add(name)
            ext.managed_resources.append(ManagedResource(name, bool(res.get("ignoredByScheduler"))))
        extenders.append(ext)
    if binders > 1:
        raise ExtenderConfigError("extenders", f'Invalid value: "found {binders} extenders implementing bind": only '
                                               "one extender can implement bind (remove bindVerb from all but one)")
    return extenders
