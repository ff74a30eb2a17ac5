#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: priority_class
short_description: Create, update or delete Kubernetes PriorityClasses
version_added: 0.2.0
description:
  - Manages a C(scheduling.k8s.io/v1) PriorityClass, which gives pods that name it a scheduling priority and lets
    them preempt lower-priority pods.
  - C(value) and C(preemptionPolicy) cannot be changed on an existing class. Changing one fails with a message
    that says so, unless O(force=true), which deletes the class and creates it again (the diff shows the change,
    and RV(recreated) is true). Pods created before keep the priority they were given.
  - Only one class may be the global default. Asking for a second one fails and names the class that holds it.
author:
  - kubesched maintainers (@kubesched)
extends_documentation_fragment:
  - kubesched.scheduler.k8s_auth
  - kubesched.scheduler.attributes
options:
  name:
    description:
      - Name of the PriorityClass, a DNS subdomain. Names starting with C(system-) are reserved for Kubernetes'
        built-in classes and refused.
    type: str
    required: true
  value:
    description:
      - The priority pods of this class get. Higher runs first and may preempt lower.
      - At most V(1000000000); higher values are reserved for system classes.
      - Required with O(state=present). Immutable; see O(force).
    type: int
  global_default:
    description:
      - Whether pods that name no class get this one's priority.
      - Fails when another class is already the global default, naming it.
    type: bool
    default: false
  description:
    description:
      - Free text telling users when to use this class. When left out, an existing description is kept.
    type: str
  preemption_policy:
    description:
      - V(PreemptLowerPriority) lets pending pods of this class preempt lower-priority pods;
        V(Never) places them ahead in the queue without preempting. Immutable; see O(force).
    type: str
    choices: [PreemptLowerPriority, Never]
    default: PreemptLowerPriority
  state:
    description:
      - V(present) creates or updates the class; V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - When O(value) or O(preemption_policy) differ from the existing class, delete it and create it again
        instead of failing. Permission to create PriorityClasses is checked before anything is deleted.
    type: bool
    default: false
seealso:
  - name: Pod Priority and Preemption
    description: How the scheduler uses PriorityClasses.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
"""

EXAMPLES = r"""
- name: Create the class high-priority workloads use
  kubesched.scheduler.priority_class:
    name: high-priority
    value: 1000000
    description: Customer-facing services; may preempt batch jobs.

- name: A class that jumps the queue but never preempts
  kubesched.scheduler.priority_class:
    name: high-priority-nonpreempting
    value: 1000000
    preemption_policy: Never

- name: Raise an existing class's value (value is immutable, so recreate it)
  kubesched.scheduler.priority_class:
    name: high-priority
    value: 2000000
    force: true

- name: Remove a class
  kubesched.scheduler.priority_class:
    name: batch-low
    state: absent
"""

RETURN = r"""
priority_class:
  description: The PriorityClass afterwards as the API server returns it (in check mode, as it would store it);
    empty after O(state=absent).
  returned: success
  type: dict
  sample:
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high-priority}
    value: 1000000
    globalDefault: false
    preemptionPolicy: PreemptLowerPriority
    description: Customer-facing services; may preempt batch jobs.
recreated:
  description: Whether the class was (or in check mode would be) deleted and created again because of O(force).
  returned: success
  type: bool
  sample: false
diff:
  description:
    - The managed fields of the class before and after; an empty dictionary where it does not exist.
    - When O(force) recreates the class, C(after_header) says so.
  returned: when diff mode is enabled
  type: dict
  sample:
    before_header: priorityclass/high-priority
    after_header: priorityclass/high-priority (deleted and created again)
    before: {"value": 1000000, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"}
    after: {"value": 2000000, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.k8s_client import (
    AUTH_ARG_SPEC,
    connect,
    prepare_module,
)
from ansible_collections.kubesched.scheduler.plugins.module_utils.priority_class import (
    NEVER,
    PREEMPT_LOWER_PRIORITY,
    run,
    validate,
)


def main():
    # The module's own options here, the connection options from module_utils (as the node modules).
    spec = dict(
        name=dict(type="str", required=True),
        value=dict(type="int"),
        global_default=dict(type="bool", default=False),
        description=dict(type="str"),
        preemption_policy=dict(type="str", choices=[PREEMPT_LOWER_PRIORITY, NEVER], default=PREEMPT_LOWER_PRIORITY),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        force=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    module = AnsibleModule(argument_spec=spec, required_if=[("state", "present", ("value",))],
                           supports_check_mode=True)
    prepare_module(module)
    try:
        validate(module.params)
        result = run(connect(module.params), module.params, module.check_mode)
    except ModuleFailure as failure:
        module.fail_json(msg=failure.message, **failure.details)
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
