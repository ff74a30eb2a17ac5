# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Node targeting shared by node_taint, node_label and node_cordon (module_utils.node_edit.TARGET_ARG_SPEC)."""

    DOCUMENTATION = r"""
options:
  name:
    description:
      - The node or nodes to change, by name. A single name or a list.
      - Every node must exist; an unknown name fails the task before anything is written.
      - Exactly one of O(name) and O(label_selector) is required.
    type: list
    elements: str
    aliases: [names]
  label_selector:
    description:
      - Change every node this label selector matches, in kubectl's syntax
        (for example V(node-role.kubernetes.io/worker), V(color=blue,zone in (a,b)), V(!excluded)).
      - The selector is checked locally; a malformed one fails before any API call.
        A selector that matches no node changes nothing and warns.
      - Exactly one of O(name) and O(label_selector) is required.
    type: str
notes:
  - All target nodes are read, and every write is validated by a server-side dry run, before the first node
    is changed, so a task that fails changes nothing.
  - Writes carry the resourceVersion they were computed from; when another writer changed the node in between,
    the API server answers 409 Conflict and the module reads the node again and recomputes the change.
    Concurrent tasks on one node therefore all end up applied.
"""
