# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node labels: validating user input and building the JSON patch that sets or removes them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import (
    label_value_problems,
    qualified_name_problems,
)


def _check_key(key, option):
    if not isinstance(key, str):
        raise ModuleFailure("%s: label key %r must be a string" % (option, key))
    problems = qualified_name_problems(key)
    if problems:
        raise ModuleFailure(
            "%s: label key %r is not a valid qualified name: %s" % (option, key, "; ".join(problems))
        )


def _label_value(key, value, option):
    where = "%s[%r]" % (option, key)
    if isinstance(value, bool):
        raise ModuleFailure(
            "%s: the value is the boolean %s; quote it ('%s') if you mean the string"
            % (where, value, str(value).lower())
        )
    if isinstance(value, int):
        value = str(value)
    if value is None:
        raise ModuleFailure(
            "%s: the value is null; give a string (it may be empty ''), or use state: absent to remove the label"
            % where
        )
    if not isinstance(value, str):
        raise ModuleFailure("%s: the value must be a string, got %s %r" % (where, type(value).__name__, value))
    problems = label_value_problems(value)
    if problems:
        raise ModuleFailure("%s: value %r is invalid: %s" % (where, value, "; ".join(problems)))
    return value


def parse_labels(labels, state, option="labels"):
    """Validate the labels option.

    Returns a dict of label -> value for state present, or the list of keys to remove for
    state absent (where a dict's values are ignored and a list of keys is also accepted).
    """
    if state == "present":
        if not isinstance(labels, dict):
            raise ModuleFailure(
                "%s must be a dict of label: value with state: present, got %s" % (option, type(labels).__name__)
            )
        for key in labels:
            _check_key(key, option)
        return dict((key, _label_value(key, value, option)) for key, value in labels.items())
    if isinstance(labels, dict):
        keys = list(labels)
    elif isinstance(labels, list):
        keys = labels
    else:
        raise ModuleFailure(
            "%s must be a list of keys or a dict with state: absent, got %s" % (option, type(labels).__name__)
        )
    for key in keys:
        _check_key(key, option)
    return keys


def desired_labels(current, wanted, state):
    """The node's labels after the change (wanted is parse_labels' result)."""
    result = dict(current)
    if state == "present":
        result.update(wanted)
    else:
        for key in wanted:
            result.pop(key, None)
    return result


def label_patch(current, desired):
    """JSON patch operations turning current labels into desired ones ([] when they are equal).

    The whole label map is written: a removed key is simply not in it, so removal can never
    leave an empty label behind (as a null merge patch on a missing key can), and unlike a
    per-key `remove` the patch still applies when another writer removed the key first, so
    such a race surfaces as the resourceVersion conflict it is and is retried.
    """
    if current == desired:
        return []
    return [{"op": "add", "path": "/metadata/labels", "value": dict(desired)}]


def labels_of(node):
    return node.get("metadata", {}).get("labels") or {}


def label_view(node):
    """The part of a node node_label reports and diffs."""
    return {"labels": dict(labels_of(node))}


def label_operations(wanted, state):
    """plan_operations for node_edit.edit_nodes."""
    def plan(node):
        current = labels_of(node)
        return label_patch(current, desired_labels(current, wanted, state))
    return plan
