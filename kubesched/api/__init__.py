"""The Kubernetes API's own rules, which the scheduler applies but does not define.

selectors      label selectors (apimachinery's labels package) and well-known label keys
node_affinity  node selector terms, required and preferred node affinity (component-helpers)
taint          taints, tolerations and their matching (core/v1, component-helpers)
names          qualified names and extended resource names (apimachinery validation, v1helper)

Nothing here knows of scheduling, configuration or plugins, so every other part of kubesched
may import it. Selectors are compiled once per pod and matched per node or pod: the matching
functions are hot paths, written for speed.
"""
