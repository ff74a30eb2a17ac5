# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes name and label rules, checked locally so bad input fails before any API call.

The rules and limits are those of k8s.io/apimachinery/pkg/util/validation. Each check
returns a list of problems (empty when the value is valid), as upstream does, so callers
can prefix them with the option the value came from.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*")

_NAME_CHARACTERS = (
    "consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_CHARACTERS = (
    "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', "
    "starting and ending with an alphanumeric character"
)


def dns1123_subdomain_problems(value):
    """Problems with value as a DNS-1123 subdomain (object names, key prefixes)."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        problems.append("must be no more than %d characters" % DNS1123_SUBDOMAIN_MAX_LENGTH)
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(_SUBDOMAIN_CHARACTERS + " (e.g. 'example.com')")
    return problems


def qualified_name_problems(value):
    """Problems with value as a qualified name: label keys, taint keys, annotation keys."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        problems = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems = ["prefix part (before '/') must be non-empty"]
        else:
            problems = ["prefix part " + problem for problem in dns1123_subdomain_problems(prefix)]
    else:
        return [
            "may contain at most one '/', separating an optional DNS subdomain prefix from "
            "the name (e.g. 'example.com/my-name')"
        ]
    if not name:
        problems.append("name part must be non-empty")
        return problems
    if len(name) > QUALIFIED_NAME_MAX_LENGTH:
        problems.append("name part must be no more than %d characters" % QUALIFIED_NAME_MAX_LENGTH)
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        problems.append("name part must " + _NAME_CHARACTERS + " (e.g. 'my-name' or 'example.com/my.name')")
    return problems


def label_value_problems(value):
    """Problems with value as a label value (also used for taint values)."""
    problems = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        problems.append("must be no more than %d characters (it has %d)" % (LABEL_VALUE_MAX_LENGTH, len(value)))
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append("must be empty or " + _NAME_CHARACTERS + " (e.g. 'blue' or 'v1.2_3')")
    return problems


def describe_problems(what, value, problems):
    """One line naming what was checked, the offending value and everything wrong with it."""
    return "%s %r is invalid: %s" % (what, value, "; ".join(problems))
