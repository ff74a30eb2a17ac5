# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Cordoning: spec.unschedulable, which the API omits when false."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CORDONED = "cordoned"
UNCORDONED = "uncordoned"


def is_unschedulable(node):
    return bool(node.get("spec", {}).get("unschedulable"))


def cordon_view(node):
    """The part of a node node_cordon reports and diffs."""
    return {"unschedulable": is_unschedulable(node)}


def cordon_operations(state):
    """plan_operations for node_edit.edit_nodes."""
    wanted = state == CORDONED

    def plan(node):
        if is_unschedulable(node) == wanted:
            return []
        # `add` rather than `remove` so the patch applies even if the field went away meanwhile;
        # the API server stores false as an absent field, as kubectl uncordon leaves it.
        return [{"op": "add", "path": "/spec/unschedulable", "value": wanted}]
    return plan
