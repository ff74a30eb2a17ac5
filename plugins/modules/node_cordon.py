#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_cordon
short_description: Cordon or uncordon Kubernetes nodes
version_added: 0.2.0
description:
  - Marks nodes unschedulable (C(spec.unschedulable)), as C(kubectl cordon) does, or schedulable again, as
    C(kubectl uncordon) does. Pods already on the node keep running; use M(kubesched.scheduler.node_taint) with
    a C(NoExecute) taint to evict them.
  - Same node targeting, check mode, diff and conflict handling as the other node modules.
author:
  - kubesched maintainers (@kubesched)
extends_documentation_fragment:
  - kubesched.scheduler.k8s_auth
  - kubesched.scheduler.node_target
  - kubesched.scheduler.attributes
options:
  state:
    description:
      - V(cordoned) marks the nodes unschedulable; V(uncordoned) marks them schedulable.
    type: str
    choices: [cordoned, uncordoned]
    default: cordoned
seealso:
  - module: kubesched.scheduler.node_taint
  - name: Safely Drain a Node
    description: Cordoning is the first step of a drain.
    link: https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
"""

EXAMPLES = r"""
- name: Stop scheduling onto node1 during maintenance
  kubesched.scheduler.node_cordon:
    name: node1

- name: Put every node of zone a back into service
  kubesched.scheduler.node_cordon:
    label_selector: topology.kubernetes.io/zone=zone-a
    state: uncordoned
"""

RETURN = r"""
nodes:
  description: Every targeted node and whether it is unschedulable afterwards.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The node's name.
      type: str
      sample: node1
    unschedulable:
      description: C(spec.unschedulable); true when the node is cordoned.
      type: bool
      sample: true
diff:
  description: Per targeted node, its C(unschedulable) before and after.
  returned: when diff mode is enabled
  type: list
  elements: dict
  sample:
    - before_header: node/node1
      after_header: node/node1
      before: {"unschedulable": false}
      after: {"unschedulable": true}
"""

from ansible_collections.kubesched.scheduler.plugins.module_utils.cordon import (
    CORDONED,
    UNCORDONED,
    cordon_operations,
    cordon_view,
)
from ansible_collections.kubesched.scheduler.plugins.module_utils.node_edit import node_module, run_node_module


def main():
    module = node_module(state=dict(type="str", choices=[CORDONED, UNCORDONED], default=CORDONED))
    run_node_module(module, lambda: (cordon_operations(module.params["state"]), cordon_view, None))


if __name__ == "__main__":
    main()
