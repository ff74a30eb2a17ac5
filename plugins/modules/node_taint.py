#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_taint
short_description: Add, update or remove taints on Kubernetes nodes
version_added: 0.2.0
description:
  - Adds taints to nodes, updates their values, or removes them, the way C(kubectl taint --overwrite) does,
    with local validation, an exact C(changed), a per-node diff and safe concurrent writes.
  - A taint is identified by its key and effect, as kubectl identifies it. Adding a taint whose key and effect
    a node already has updates its value.
  - For every C(NoExecute) taint it adds, the module returns the pods bound to that node that do not tolerate it
    and would therefore be evicted (RV(evictions)), in check mode too, so the impact can be previewed.
author:
  - kubesched maintainers (@kubesched)
extends_documentation_fragment:
  - kubesched.scheduler.k8s_auth
  - kubesched.scheduler.node_target
  - kubesched.scheduler.attributes
options:
  taints:
    description:
      - The taints to add, update or remove.
      - Each element is either a string in kubectl's syntax, V(key=value:Effect) or V(key:Effect),
        or a dictionary with C(key), C(value) and C(effect).
      - With O(state=absent) the value is ignored, the effect may be left out to remove every effect of the key,
        and the string forms V(key), V(key-) and V(key:Effect-) are accepted too.
      - Keys must be qualified names (an optional DNS subdomain prefix and C(/), then at most 63 alphanumeric
        characters, C(-), C(_) or C(.)), values at most 63 characters of label-value syntax, and the effect one of
        V(NoSchedule), V(PreferNoSchedule) or V(NoExecute). All are checked before any API call.
    type: list
    elements: raw
    required: true
  state:
    description:
      - V(present) adds each taint or updates its value; V(absent) removes the taints matching by key and effect.
    type: str
    choices: [present, absent]
    default: present
  exclusive:
    description:
      - With O(state=present), leave the nodes with exactly the given taints, removing every other.
        With an empty O(taints) list this removes all taints.
      - Cannot be combined with O(state=absent).
    type: bool
    default: false
    aliases: [replace]
seealso:
  - module: kubesched.scheduler.node_label
  - module: kubesched.scheduler.node_cordon
  - name: Taints and Tolerations
    description: How the scheduler and the taint eviction controller treat taints.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
"""

EXAMPLES = r"""
- name: Dedicate node1 to the blue team
  kubesched.scheduler.node_taint:
    name: node1
    taints:
      - app=blue:NoSchedule

- name: Remove the not-ready taint, whatever its effect
  kubesched.scheduler.node_taint:
    name: node1
    state: absent
    taints:
      - node.kubernetes.io/not-ready

- name: Taint every GPU node, written as dictionaries
  kubesched.scheduler.node_taint:
    label_selector: accelerator=nvidia
    taints:
      - key: nvidia.com/gpu
        value: present
        effect: NoSchedule
      - key: example.com/maintenance
        effect: PreferNoSchedule

- name: Preview which pods a NoExecute taint would evict, without applying it
  kubesched.scheduler.node_taint:
    name: node2
    taints:
      - example.com/drain=true:NoExecute
  check_mode: true
  register: preview

- name: Show them
  ansible.builtin.debug:
    msg: "{{ preview.evictions | map(attribute='pods') | flatten | map(attribute='name') }}"

- name: Leave node3 with exactly one taint
  kubesched.scheduler.node_taint:
    name: node3
    exclusive: true
    taints:
      - dedicated=infra:NoSchedule

- name: Use another cluster through environment variables
  kubesched.scheduler.node_taint:
    name: node1
    taints: ["app=blue:NoSchedule"]
  environment:
    K8S_AUTH_KUBECONFIG: /etc/kubernetes/admin.conf
    K8S_AUTH_CONTEXT: prod
"""

RETURN = r"""
nodes:
  description: Every targeted node with its taints afterwards (in check mode, as the server would store them).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The node's name.
      type: str
      sample: node1
    taints:
      description: The node's taints, as the API stores them.
      type: list
      elements: dict
      sample: [{"key": "app", "value": "blue", "effect": "NoSchedule"}]
evictions:
  description:
    - One entry per node and C(NoExecute) taint this task adds (or gives a new value), listing the pods bound to
      the node that do not tolerate it.
    - As the taint eviction controller decides, the pod's first toleration that tolerates the taint counts. Pods
      it lets stay for a limited C(tolerationSeconds) are listed with that delay; pods it lets stay forever are not
      listed. Finished pods are listed too, since the controller deletes them as well.
  returned: success
  type: list
  elements: dict
  contains:
    node:
      description: The node.
      type: str
      sample: node2
    taint:
      description: The taint, in kubectl's syntax.
      type: str
      sample: example.com/drain=true:NoExecute
    pods:
      description: The pods that would be evicted.
      type: list
      elements: dict
      contains:
        namespace:
          description: The pod's namespace.
          type: str
        name:
          description: The pod's name.
          type: str
        evicted_after_seconds:
          description: C(0) for at once, otherwise the pod's tolerationSeconds for this taint.
          type: int
      sample: [{"namespace": "default", "name": "web-0", "evicted_after_seconds": 0}]
diff:
  description: Per targeted node, its taints before and after.
  returned: when diff mode is enabled
  type: list
  elements: dict
  sample:
    - before_header: node/node1
      after_header: node/node1
      before: {"taints": []}
      after: {"taints": [{"key": "app", "value": "blue", "effect": "NoSchedule"}]}
"""

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.node_edit import node_module, run_node_module
from ansible_collections.kubesched.scheduler.plugins.module_utils.taints import (
    eviction_preview_for,
    parse_taints,
    taint_operations,
    taint_view,
)


def main():
    module = node_module(
        taints=dict(type="list", elements="raw", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        exclusive=dict(type="bool", default=False, aliases=["replace"]),
    )
    params = module.params

    def prepare():
        if params["exclusive"] and params["state"] == "absent":
            raise ModuleFailure("exclusive: true only applies to state: present; drop exclusive or use state: present")
        specs = parse_taints(params["taints"], params["state"])
        return taint_operations(specs, params["state"], params["exclusive"]), taint_view, eviction_preview_for

    run_node_module(module, prepare, previews_key="evictions")


if __name__ == "__main__":
    main()
