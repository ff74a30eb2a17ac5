# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""PriorityClasses: local validation, the global-default rule, and updating around immutable fields."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.k8s_client import Conflict, resource_version_guard
from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import dns1123_subdomain_problems

# Upstream scheduling.HighestUserDefinablePriority; larger values belong to system classes.
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000
LOWEST_PRIORITY = -2147483648  # the field is an int32
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
NEVER = "Never"
API_VERSION = "scheduling.k8s.io/v1"
MAX_WRITE_ATTEMPTS = 5

# The fields this module manages, by API name; value and preemptionPolicy cannot be changed in place.
_IMMUTABLE_FIELDS = (("value", "value"), ("preemptionPolicy", "preemption_policy"))


def validate(params):
    """Check name and value locally, before any API call."""
    name = params["name"]
    problems = dns1123_subdomain_problems(name)
    if problems:
        raise ModuleFailure("name: %r is not a valid PriorityClass name: %s" % (name, "; ".join(problems)))
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        raise ModuleFailure(
            "name: %r is reserved: names starting with %r belong to Kubernetes' built-in classes "
            "(system-cluster-critical, system-node-critical). Choose a name without that prefix"
            % (name, SYSTEM_PRIORITY_CLASS_PREFIX)
        )
    value = params.get("value")
    if params["state"] == "present" and value is not None:
        if value > HIGHEST_USER_DEFINABLE_PRIORITY:
            raise ModuleFailure(
                "value: %d is above %d, the highest priority a user-defined class may have "
                "(higher values are reserved for system classes). Use a value of at most %d"
                % (value, HIGHEST_USER_DEFINABLE_PRIORITY, HIGHEST_USER_DEFINABLE_PRIORITY)
            )
        if value < LOWEST_PRIORITY:
            raise ModuleFailure("value: %d is below %d, the lowest a priority can be" % (value, LOWEST_PRIORITY))


def desired_fields(params, existing):
    """The managed fields as they should be; a description left out keeps the existing one."""
    fields = {
        "value": params["value"],
        "globalDefault": params["global_default"],
        "preemptionPolicy": params["preemption_policy"],
    }
    if params.get("description") is not None:
        fields["description"] = params["description"]
    elif existing and existing.get("description") is not None:
        fields["description"] = existing["description"]
    return fields


def class_view(priority_class):
    """The part of a PriorityClass the module diffs; {} when it does not exist."""
    if not priority_class:
        return {}
    view = {
        "value": priority_class.get("value"),
        "globalDefault": bool(priority_class.get("globalDefault")),
        "preemptionPolicy": priority_class.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY,
    }
    if priority_class.get("description") is not None:
        view["description"] = priority_class["description"]
    return view


def immutable_changes(existing, wanted):
    """(option, current, wanted) for each immutable field the task would change."""
    current = class_view(existing)
    return [(option, current[field], wanted[field]) for field, option in _IMMUTABLE_FIELDS
            if current[field] != wanted[field]]


def immutable_failure(name, changes):
    described = "; ".join("%s is %r, the task wants %r" % change for change in changes)
    return ModuleFailure(
        "%s: PriorityClass %r cannot be changed in place (%s): value and preemption_policy are immutable. "
        "Set force: true to delete and recreate it (pods already created keep the priority they were given)"
        % (", ".join(change[0] for change in changes), name, described)
    )


def check_global_default(api, name):
    """Fail naming the class that already holds globalDefault, if it is another one."""
    holders = sorted(pc["metadata"]["name"] for pc in api.list_priority_classes()
                     if pc.get("globalDefault") and pc["metadata"]["name"] != name)
    if holders:
        raise ModuleFailure(
            "global_default: PriorityClass %s is already the global default and only one class may be. "
            "Set global_default: false on %s first, or leave global_default false here"
            % (", ".join(repr(holder) for holder in holders), holders[0])
        )


def new_class(name, fields):
    body = {"apiVersion": API_VERSION, "kind": "PriorityClass", "metadata": {"name": name}}
    body.update(fields)
    return body


def ensure_present(api, params, check_mode):
    """Create, update or (with force) recreate the class. Returns (before, after, recreated)."""
    name = params["name"]
    for _attempt in range(MAX_WRITE_ATTEMPTS):
        existing = api.read_priority_class(name)
        wanted = desired_fields(params, existing)
        if wanted["globalDefault"]:
            check_global_default(api, name)
        if existing is None:
            body = new_class(name, wanted)
            planned = api.create_priority_class(body, dry_run=True)
            return None, planned if check_mode else api.create_priority_class(body), False
        if class_view(existing) == class_view(new_class(name, wanted)):
            return existing, existing, False
        changes = immutable_changes(existing, wanted)
        try:
            if changes:
                if not params["force"]:
                    raise immutable_failure(name, changes)
                return existing, recreate(api, existing, new_class(name, wanted), check_mode), True
            operations = [resource_version_guard(existing)] + [
                {"op": "add", "path": "/" + field, "value": wanted[field]}
                for field in ("globalDefault", "description") if field in wanted
            ]
            planned = api.patch_priority_class(name, operations, dry_run=True)
            return existing, planned if check_mode else api.patch_priority_class(name, operations), False
        except Conflict:
            continue
    raise ModuleFailure(
        "PriorityClass %r changed under every one of %d write attempts (HTTP 409 Conflict); retry the task"
        % (name, MAX_WRITE_ATTEMPTS)
    )


def recreate(api, existing, body, check_mode):
    """Delete and create again; create permission is checked first so a denial deletes nothing."""
    name = existing["metadata"]["name"]
    if not api.can_i("create", "scheduling.k8s.io", "priorityclasses"):
        raise ModuleFailure(
            "force: recreating PriorityClass %r needs permission to create priorityclasses, which the identity from "
            "kubeconfig/context lacks on %s; nothing was deleted. Grant RBAC verb 'create' on priorityclasses"
            % (name, api.host)
        )
    resource_version = existing["metadata"]["resourceVersion"]
    api.delete_priority_class(name, resource_version, dry_run=True)
    if check_mode:
        return body
    api.delete_priority_class(name, resource_version)
    return api.create_priority_class(body)


def ensure_absent(api, params, check_mode):
    """Delete the class if it exists. Returns (before, after, recreated)."""
    name = params["name"]
    for _attempt in range(MAX_WRITE_ATTEMPTS):
        existing = api.read_priority_class(name)
        if existing is None:
            return None, None, False
        try:
            api.delete_priority_class(name, existing["metadata"]["resourceVersion"], dry_run=check_mode)
        except Conflict:
            continue
        return existing, None, False
    raise ModuleFailure(
        "PriorityClass %r changed under every one of %d delete attempts (HTTP 409 Conflict); retry the task"
        % (name, MAX_WRITE_ATTEMPTS)
    )


def run(api, params, check_mode):
    """Bring the class to params; returns the module's result (without diff gating)."""
    if params["state"] == "present":
        before, after, recreated = ensure_present(api, params, check_mode)
    else:
        before, after, recreated = ensure_absent(api, params, check_mode)
    changed = recreated or class_view(before) != class_view(after)
    header = "priorityclass/%s" % params["name"]
    return dict(
        changed=changed,
        recreated=recreated,
        priority_class=after or {},
        diff=dict(before_header=header, after_header=header + (" (deleted and created again)" if recreated else ""),
                  before=class_view(before), after=class_view(after)),
    )
