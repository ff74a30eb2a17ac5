#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_label
short_description: Set or remove labels on Kubernetes nodes
version_added: 0.2.0
description:
  - Sets labels on nodes or removes them, with local validation of keys and values, an exact C(changed),
    a per-node diff and safe concurrent writes.
  - Labels not named in O(labels) are left alone.
  - Removing a label that is not there changes nothing. The new label map is written whole, in a JSON patch
    guarded by the resourceVersion it was computed from, never as a null merge patch, so a removal can never
    leave an empty label behind.
author:
  - kubesched maintainers (@kubesched)
extends_documentation_fragment:
  - kubesched.scheduler.k8s_auth
  - kubesched.scheduler.node_target
  - kubesched.scheduler.attributes
options:
  labels:
    description:
      - With O(state=present), a dictionary of label keys and the values to set.
      - With O(state=absent), the keys to remove, as a list or as a dictionary whose values are ignored.
      - Keys must be qualified names (an optional DNS subdomain prefix and C(/), then at most 63 alphanumeric
        characters, C(-), C(_) or C(.)); values at most 63 such characters, or empty. Integers are taken as
        strings; booleans and nulls are refused, so that V(true) is not silently stored as V(True).
    type: raw
    required: true
  state:
    description:
      - V(present) sets the labels; V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
seealso:
  - module: kubesched.scheduler.node_taint
  - name: Labels and Selectors
    description: The syntax of label keys, values and selectors.
    link: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
"""

EXAMPLES = r"""
- name: Label node1 for the blue team
  kubesched.scheduler.node_label:
    name: node1
    labels:
      color: blue
      size: Large

- name: Mark every worker as belonging to zone a
  kubesched.scheduler.node_label:
    label_selector: node-role.kubernetes.io/worker
    labels:
      topology.kubernetes.io/zone: zone-a

- name: Remove two labels from two nodes
  kubesched.scheduler.node_label:
    name: [node1, node2]
    state: absent
    labels:
      - color
      - size
"""

RETURN = r"""
nodes:
  description: Every targeted node with its labels afterwards (in check mode, as the server would store them).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The node's name.
      type: str
      sample: node1
    labels:
      description: All of the node's labels.
      type: dict
      sample: {"kubernetes.io/hostname": "node1", "color": "blue"}
diff:
  description: Per targeted node, its labels before and after.
  returned: when diff mode is enabled
  type: list
  elements: dict
  sample:
    - before_header: node/node1
      after_header: node/node1
      before: {"labels": {"kubernetes.io/hostname": "node1"}}
      after: {"labels": {"kubernetes.io/hostname": "node1", "color": "blue"}}
"""

from ansible_collections.kubesched.scheduler.plugins.module_utils.labels import (
    label_operations,
    label_view,
    parse_labels,
)
from ansible_collections.kubesched.scheduler.plugins.module_utils.node_edit import node_module, run_node_module


def main():
    module = node_module(
        labels=dict(type="raw", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
    )
    params = module.params

    def prepare():
        wanted = parse_labels(params["labels"], params["state"])
        return label_operations(wanted, params["state"]), label_view, None

    run_node_module(module, prepare)


if __name__ == "__main__":
    main()
