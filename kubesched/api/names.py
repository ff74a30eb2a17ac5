"""Names the API validates and classifies: qualified names (label keys, resource names) as
apimachinery's validation package checks them, extended resource names as core/v1's helper
recognises them."""

from __future__ import annotations

import re

_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_error(value: str) -> str | None:
    """Why value is not a valid label key / qualified name (ValidateLabelName), or None."""
    prefix, _unused, name = value.rpartition("/")
    if "/" in value and not prefix:
        return f"{value!r}: prefix part must be non-empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{value!r}: prefix part must be a lowercase DNS subdomain (e.g. example.com)"
    if not name or len(name) > 63 or not _NAME_PART.match(name):
        return (f"{value!r}: name part must be 1-63 characters of alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric character")
    return None


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io, not a quota name."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
