# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node taints: parsing user input, computing the new taint list, and the NoExecute eviction preview.

Taints are kept as the API's own dicts ({'key', 'value', 'effect', 'timeAdded'}) so what
the module returns is exactly what the cluster stores.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import (
    label_value_problems,
    qualified_name_problems,
)

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

_DICT_FIELDS = ("key", "value", "effect")
_INT64_RE = re.compile(r"[-+]?[0-9]+")


class TaintSpec(object):
    """A taint as the user asked for it.

    effect None means "every effect of this key" and value None means "any value"; both are
    only possible with state absent, where a taint is matched by key and effect alone.
    """

    def __init__(self, key, value=None, effect=None):
        self.key = key
        self.value = value
        self.effect = effect

    def matches(self, taint):
        """Whether taint (an API dict) is this one, by key and effect as kubectl matches."""
        return taint.get("key") == self.key and (self.effect is None or taint.get("effect") == self.effect)

    def to_api(self):
        taint = {"key": self.key, "effect": self.effect}
        if self.value:
            taint["value"] = self.value
        return taint

    def __eq__(self, other):
        return (self.key, self.value, self.effect) == (other.key, other.value, other.effect)

    def __repr__(self):
        return "TaintSpec(%r, %r, %r)" % (self.key, self.value, self.effect)


def _effect_or_fail(effect, where):
    if effect in EFFECTS:
        return effect
    hint = ""
    for known in EFFECTS:
        if effect.lower() == known.lower():
            hint = " (did you mean %s? effects are case-sensitive)" % known
    raise ModuleFailure(
        "%s: effect %r is not one of %s%s" % (where, effect, ", ".join(EFFECTS), hint)
    )


def _check_key_and_value(spec, where):
    problems = qualified_name_problems(spec.key)
    if problems:
        raise ModuleFailure(
            "%s: key %r is not a valid qualified name: %s" % (where, spec.key, "; ".join(problems))
        )
    if spec.value is not None:
        problems = label_value_problems(spec.value)
        if problems:
            raise ModuleFailure("%s: value %r is invalid: %s" % (where, spec.value, "; ".join(problems)))


def _scalar_to_string(value, where, field):
    """Taint values are strings; accept YAML integers, refuse what would silently change meaning."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise ModuleFailure(
            "%s: %s is the boolean %s; quote it ('%s') if you mean the string"
            % (where, field, value, str(value).lower())
        )
    if isinstance(value, int):
        return str(value)
    raise ModuleFailure("%s: %s must be a string, got %s %r" % (where, field, type(value).__name__, value))


def parse_taint_string(text, where, removing):
    """Parse kubectl's forms: 'key=value:Effect', 'key:Effect', and when removing 'key' or 'key-'."""
    if text.endswith("-"):
        if not removing:
            raise ModuleFailure(
                "%s: %r ends with '-', kubectl's removal marker; to remove a taint use state: absent"
                % (where, text)
            )
        text = text[:-1]
    parts = text.split(":")
    if len(parts) > 2:
        raise ModuleFailure(
            "%s: %r has more than one ':'; write 'key=value:Effect', 'key:Effect' or 'key'" % (where, text)
        )
    key_value = parts[0].split("=")
    if len(key_value) > 2:
        raise ModuleFailure("%s: %r has more than one '='; write 'key=value:Effect'" % (where, text))
    key = key_value[0]
    value = key_value[1] if len(key_value) == 2 else ("" if not removing else None)
    effect = _effect_or_fail(parts[1], where) if len(parts) == 2 else None
    return TaintSpec(key, value, effect)


def _parse_taint_dict(item, where, removing):
    unknown = sorted(set(item) - set(_DICT_FIELDS))
    if unknown:
        raise ModuleFailure(
            "%s: unknown field(s) %s; a taint has only key, value and effect" % (where, ", ".join(unknown))
        )
    key = _scalar_to_string(item.get("key"), where, "key")
    if key is None:
        raise ModuleFailure("%s: key is required" % where)
    value = _scalar_to_string(item.get("value"), where, "value")
    if value is None and not removing:
        value = ""
    effect = item.get("effect")
    if effect is not None:
        effect = _effect_or_fail(_scalar_to_string(effect, where, "effect"), where)
    return TaintSpec(key, value, effect)


def parse_taints(items, state, option="taints"):
    """Turn the taints option into TaintSpecs, validating every element before any API call."""
    removing = state == "absent"
    specs = []
    for index, item in enumerate(items):
        where = "%s[%d]" % (option, index)
        if isinstance(item, str):
            spec = parse_taint_string(item, where, removing)
        elif isinstance(item, dict):
            spec = _parse_taint_dict(item, where, removing)
        else:
            raise ModuleFailure(
                "%s: must be a string like 'key=value:NoSchedule' or a dict with key, value and effect, got %s"
                % (where, type(item).__name__)
            )
        if spec.effect is None and not removing:
            raise ModuleFailure(
                "%s: taint %r has no effect; with state: present give one of %s, e.g. '%s=value:NoSchedule'"
                % (where, spec.key, ", ".join(EFFECTS), spec.key or "key")
            )
        _check_key_and_value(spec, where)
        for earlier in specs:
            if earlier.key == spec.key and earlier.effect == spec.effect and not removing:
                raise ModuleFailure(
                    "%s: taint %s:%s is given twice; a node holds one taint per key and effect"
                    % (where, spec.key, spec.effect)
                )
        specs.append(spec)
    return specs


def taint_identity(taint):
    """What makes two taints the same for `changed`: key, value and effect (timeAdded is the server's)."""
    return (taint.get("key"), taint.get("value") or "", taint.get("effect"))


def desired_taints(current, specs, state, exclusive=False):
    """The node's taint list after applying specs; current taints keep their order and timeAdded."""
    if state == "absent":
        return [taint for taint in current if not any(spec.matches(taint) for spec in specs)]
    result = []
    placed = []
    for taint in current:
        spec = next((spec for spec in specs if spec.matches(taint)), None)
        if spec is None:
            if not exclusive:
                result.append(taint)
            continue
        placed.append(spec)
        if (taint.get("value") or "") == spec.value:
            result.append(taint)
        else:
            result.append(spec.to_api())
    result.extend(spec.to_api() for spec in specs if spec not in placed)
    return result


def format_taint(taint):
    """kubectl's rendering: key=value:Effect, or key:Effect for an empty value."""
    if taint.get("value"):
        return "%s=%s:%s" % (taint["key"], taint["value"], taint["effect"])
    return "%s:%s" % (taint["key"], taint["effect"])


def _int64(text):
    if not _INT64_RE.fullmatch(text or ""):
        return None
    number = int(text)
    if not -(2 ** 63) <= number < 2 ** 63:
        return None
    return number


def tolerates(toleration, taint):
    """Whether one pod toleration tolerates taint, as upstream's Toleration.ToleratesTaint.

    Lt and Gt (numeric comparisons behind TaintTolerationComparisonOperators) compare the
    taint's value against the toleration's; a value that is not an integer matches nothing.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt"):
        taint_value = _int64(taint.get("value"))
        toleration_value = _int64(toleration.get("value"))
        if taint_value is None or toleration_value is None:
            return False
        return taint_value > toleration_value if operator == "Gt" else taint_value < toleration_value
    return False


def eviction_delay(pod, taint):
    """Seconds until the pod is evicted for a NoExecute taint: 0 now, None never.

    As the taint eviction controller (GetMatchingTolerations, getMinTolerationTime): the
    pod's first toleration that tolerates the taint is the one used; without
    tolerationSeconds it tolerates forever, zero or negative values mean now.
    """
    for toleration in pod.get("spec", {}).get("tolerations") or []:
        if tolerates(toleration, taint):
            seconds = toleration.get("tolerationSeconds")
            return None if seconds is None else max(0, seconds)
    return 0


def eviction_preview(node_name, before, after, pods):
    """For each NoExecute taint that after adds (or gives a new value), the pods it would evict.

    Every pod bound to the node counts, finished ones too: the taint eviction controller
    deletes those as well."""
    before_identities = set(taint_identity(taint) for taint in before)
    previews = []
    for taint in after:
        if taint.get("effect") != NO_EXECUTE or taint_identity(taint) in before_identities:
            continue
        evicted = []
        for pod in pods:
            delay = eviction_delay(pod, taint)
            if delay is not None:
                evicted.append({
                    "namespace": pod["metadata"].get("namespace"),
                    "name": pod["metadata"]["name"],
                    "evicted_after_seconds": delay,
                })
        evicted.sort(key=lambda entry: (entry["namespace"], entry["name"]))
        previews.append({"node": node_name, "taint": format_taint(taint), "pods": evicted})
    return previews


def taints_of(node):
    return node.get("spec", {}).get("taints") or []


def taint_view(node):
    """The part of a node node_taint reports and diffs."""
    return {"taints": [dict(taint) for taint in taints_of(node)]}


def taint_operations(specs, state, exclusive):
    """plan_operations for node_edit.edit_nodes: replace spec.taints when the wanted list differs."""
    def plan(node):
        current = taints_of(node)
        wanted = desired_taints(current, specs, state, exclusive)
        if [taint_identity(taint) for taint in wanted] == [taint_identity(taint) for taint in current]:
            return []
        return [{"op": "add", "path": "/spec/taints", "value": wanted}]
    return plan


def eviction_preview_for(api):
    """preview for node_edit.edit_nodes: the pods each new NoExecute taint would evict."""
    def preview(basis, planned):
        name = basis["metadata"]["name"]
        if not any(taint.get("effect") == NO_EXECUTE for taint in taints_of(planned)):
            return []
        return eviction_preview(name, taints_of(basis), taints_of(planned), api.list_pods_on_node(name))
    return preview
