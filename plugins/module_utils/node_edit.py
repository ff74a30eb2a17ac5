# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Changing a field of a set of nodes safely: what node_taint, node_label and node_cordon share.

A run resolves every target node and validates every write with a server-side dry run
before the first real write, so a bad name, a missing RBAC permission or an admission
rejection fails the run with nothing changed. Each write carries the resourceVersion it was
computed from; on 409 Conflict the node is read again and the change recomputed, so two
writers on one node both end up applied instead of one silently undoing the other.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.k8s_client import (
    AUTH_ARG_SPEC,
    Conflict,
    connect,
    prepare_module,
    resource_version_guard,
)
from ansible_collections.kubesched.scheduler.plugins.module_utils.selectors import parse_label_selector
from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import dns1123_subdomain_problems

TARGET_ARG_SPEC = dict(
    name=dict(type="list", elements="str", aliases=["names"]),
    label_selector=dict(type="str"),
)
TARGET_MUTUALLY_EXCLUSIVE = [("name", "label_selector")]
TARGET_REQUIRED_ONE_OF = [("name", "label_selector")]

MAX_WRITE_ATTEMPTS = 10
_KNOWN_NODES_SHOWN = 20


def validate_target(names, label_selector):
    """Check the targeting options locally (no API call)."""
    if names is not None:
        if not names:
            raise ModuleFailure("name must list at least one node (or use label_selector)")
        for name in names:
            problems = dns1123_subdomain_problems(name)
            if problems:
                raise ModuleFailure("name: %r is not a valid node name: %s" % (name, "; ".join(problems)))
    else:
        parse_label_selector(label_selector)


def resolve_nodes(api, names, label_selector):
    """Read every target node; fail naming all unknown nodes before anything is written."""
    if names is None:
        return sorted(api.list_nodes(label_selector), key=lambda node: node["metadata"]["name"])
    found = []
    missing = []
    for name in names:
        if any(node["metadata"]["name"] == name for node in found):
            continue
        node = api.read_node(name)
        if node is None:
            missing.append(name)
        else:
            found.append(node)
    if missing:
        known = sorted(node["metadata"]["name"] for node in api.list_nodes())
        shown = ", ".join(known[:_KNOWN_NODES_SHOWN]) + (", ..." if len(known) > _KNOWN_NODES_SHOWN else "")
        raise ModuleFailure(
            "name: node%s %s not found on the API server at %s. Fix name; the cluster's nodes are: %s"
            % ("s" if len(missing) > 1 else "", ", ".join(repr(name) for name in missing), api.host,
               shown or "none")
        )
    return found


def _conflict_backoff(attempt):
    # Jitter keeps two writers that collided from colliding again on the same schedule.
    time.sleep(min(1.0, 0.05 * (2 ** attempt)) * random.uniform(0.5, 1.0))


def write_node(api, node, plan_operations, dry_run):
    """Apply plan_operations(node) with a resourceVersion guard, re-reading and re-planning on conflict.

    Returns (basis, result): the node as read right before the write that succeeded and the
    node the API server returned. When the node is already as wanted, both are the read node.
    """
    name = node["metadata"]["name"]
    for attempt in range(MAX_WRITE_ATTEMPTS):
        operations = plan_operations(node)
        if not operations:
            return node, node
        try:
            return node, api.patch_node(name, [resource_version_guard(node)] + operations, dry_run=dry_run)
        except Conflict:
            _conflict_backoff(attempt)
            node = api.read_node(name)
            if node is None:
                raise ModuleFailure(
                    "node %r was deleted while this task was changing it; nothing was written" % name
                ) from None
    raise ModuleFailure(
        "node %r changed under every one of %d write attempts (HTTP 409 Conflict each time); something else is "
        "writing it continuously. Retry the task" % (name, MAX_WRITE_ATTEMPTS)
    )


def edit_nodes(api, nodes, plan_operations, view, check_mode, preview=None):
    """Bring every node to the state plan_operations describes.

    plan_operations(node) returns the JSON patch operations (without the resourceVersion
    guard) that turn node into the wanted state, or [] when it already is. view(node) is the
    part of a node the module reports. preview(basis, planned), if given, is called for each
    node that will change, before anything is written, and its return values are collected.

    Returns a dict: changed, nodes (name plus view after), diff (per node, before/after) and
    previews.
    """
    planned = []
    previews = []
    for node in nodes:
        basis, outcome = write_node(api, node, plan_operations, dry_run=True)
        planned.append((basis, outcome))
        if preview is not None and view(basis) != view(outcome):
            previews.extend(preview(basis, outcome))
    if check_mode:
        final = planned
    else:
        final = []
        for basis, outcome in planned:
            if view(basis) == view(outcome):
                final.append((basis, outcome))
                continue
            try:
                final.append(write_node(api, basis, plan_operations, dry_run=False))
            except ModuleFailure as failure:
                # Only something that changed after the dry runs gets here; say what is already written.
                written = [node["metadata"]["name"] for node, after in final if view(node) != view(after)]
                raise ModuleFailure("%s (nodes already changed by this task: %s)"
                                    % (failure.message, ", ".join(written) or "none"), **failure.details) from None
    report = dict(changed=False, nodes=[], diff=[], previews=previews)
    for basis, outcome in final:
        name = outcome["metadata"]["name"]
        before, after = view(basis), view(outcome)
        report["changed"] = report["changed"] or before != after
        report["nodes"].append(dict(name=name, **after))
        report["diff"].append(dict(before_header="node/%s" % name, after_header="node/%s" % name,
                                   before=before, after=after))
    return report


def node_module(**module_options):
    """The AnsibleModule of a node module: its own options, node targeting and the connection options."""
    spec = dict(TARGET_ARG_SPEC)
    spec.update(AUTH_ARG_SPEC)
    spec.update(module_options)
    return AnsibleModule(argument_spec=spec, mutually_exclusive=TARGET_MUTUALLY_EXCLUSIVE,
                         required_one_of=TARGET_REQUIRED_ONE_OF, supports_check_mode=True)


def run_node_module(module, prepare, previews_key=None):
    """The whole life of a node module run, through exit_json or fail_json.

    prepare() validates the module's own options locally and returns (plan_operations, view,
    preview_factory); preview_factory(api) builds edit_nodes' preview, or is None, and the
    previews are returned under previews_key. Every ModuleFailure becomes fail_json.
    """
    prepare_module(module)
    params = module.params
    try:
        plan_operations, view, preview_factory = prepare()
        validate_target(params["name"], params["label_selector"])
        api = connect(params)
        nodes = resolve_nodes(api, params["name"], params["label_selector"])
        report = edit_nodes(api, nodes, plan_operations, view, module.check_mode,
                            preview_factory(api) if preview_factory else None)
    except ModuleFailure as failure:
        module.fail_json(msg=failure.message, **failure.details)
    if not nodes:
        module.warn("label_selector %r matched no nodes; nothing was changed" % params["label_selector"])
    result = dict(changed=report["changed"], nodes=report["nodes"])
    if previews_key:
        result[previews_key] = report["previews"]
    if module._diff:
        result["diff"] = report["diff"]
    module.exit_json(**result)
