"""An in-memory stand-in for module_utils.k8s_client.KubeApi.

It keeps nodes, pods and PriorityClasses as API dicts, applies JSON and merge patches,
enforces resourceVersion the way the API server does (409 when a write carries a stale one),
honours dry runs, and records every write so tests can assert that nothing was written.
`before_write` lets a test slip a concurrent change in between a read and a write.
"""

import copy

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.k8s_client import Conflict


def make_node(name, labels=None, taints=None, unschedulable=False, resource_version="1"):
    node = {"metadata": {"name": name, "resourceVersion": resource_version,
                         "labels": dict(labels or {"kubernetes.io/hostname": name})},
            "spec": {}}
    if taints:
        node["spec"]["taints"] = [dict(taint) for taint in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def make_pod(name, node, namespace="default", tolerations=None, phase="Running"):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "tolerations": tolerations or []},
            "status": {"phase": phase}}


def _unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def apply_json_patch(document, operations):
    document = copy.deepcopy(document)
    for operation in operations:
        *parents, last = [_unescape(token) for token in operation["path"].split("/")[1:]]
        target = document
        for token in parents:
            target = target[token]
        if operation["op"] in ("add", "replace"):
            if operation["op"] == "replace" and last not in target:
                raise ModuleFailure("fake: replace of missing %s" % operation["path"])
            target[last] = copy.deepcopy(operation["value"])
        elif operation["op"] == "remove":
            del target[last]
        else:
            raise AssertionError("fake does not implement op %r" % operation["op"])
    return document


class FakeKubeApi(object):
    host = "https://fake.invalid:6443"

    def __init__(self, nodes=(), pods=(), priority_classes=(), allowed=True):
        self.nodes = dict((node["metadata"]["name"], copy.deepcopy(node)) for node in nodes)
        self.pods = [copy.deepcopy(pod) for pod in pods]
        self.priority_classes = dict((pc["metadata"]["name"], copy.deepcopy(pc)) for pc in priority_classes)
        self.allowed = allowed
        self.writes = []
        self.dry_runs = []
        self.before_write = None
        self.fail_writes_with = None

    # helpers for tests

    def set_node(self, node):
        stored = copy.deepcopy(node)
        old = self.nodes.get(node["metadata"]["name"])
        stored["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1 if old else 1)
        self.nodes[node["metadata"]["name"]] = stored

    def _bump(self, stored):
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        return stored

    def _before_write(self, kind, name, dry_run):
        (self.dry_runs if dry_run else self.writes).append((kind, name))
        if self.fail_writes_with is not None:
            raise self.fail_writes_with
        if self.before_write is not None and not dry_run:
            hook, self.before_write = self.before_write, None
            hook(self)

    # KubeApi

    def read_node(self, name):
        return copy.deepcopy(self.nodes.get(name))

    def list_nodes(self, label_selector=None):
        selected = []
        for node in self.nodes.values():
            if label_selector is None or all(
                    node["metadata"]["labels"].get(part.split("=")[0]) == part.split("=")[1]
                    for part in label_selector.split(",")):
                selected.append(copy.deepcopy(node))
        return selected

    def patch_node(self, name, operations, dry_run=False):
        self._before_write("node", name, dry_run)
        current = self.nodes[name]
        patched = apply_json_patch(current, operations)
        if patched["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise Conflict("Operation cannot be fulfilled on nodes %r: the object has been modified" % name)
        # The API server omits empty lists and false booleans.
        if patched.get("spec", {}).get("taints") == []:
            del patched["spec"]["taints"]
        if patched.get("spec", {}).get("unschedulable") is False:
            del patched["spec"]["unschedulable"]
        if dry_run:
            return patched
        self.nodes[name] = self._bump(patched)
        return copy.deepcopy(self.nodes[name])

    def list_pods_on_node(self, node_name):
        return [copy.deepcopy(pod) for pod in self.pods if pod["spec"].get("nodeName") == node_name]

    def read_priority_class(self, name):
        return copy.deepcopy(self.priority_classes.get(name))

    def list_priority_classes(self):
        return [copy.deepcopy(pc) for pc in self.priority_classes.values()]

    def create_priority_class(self, body, dry_run=False):
        self._before_write("create", body["metadata"]["name"], dry_run)
        if body["metadata"]["name"] in self.priority_classes:
            raise ModuleFailure("fake: priorityclass %r already exists" % body["metadata"]["name"])
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = "1"
        if not dry_run:
            self.priority_classes[body["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    def patch_priority_class(self, name, operations, dry_run=False):
        self._before_write("patch", name, dry_run)
        current = self.priority_classes[name]
        patched = apply_json_patch(current, operations)
        if patched["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        if dry_run:
            return patched
        self.priority_classes[name] = self._bump(patched)
        return copy.deepcopy(self.priority_classes[name])

    def delete_priority_class(self, name, resource_version, dry_run=False):
        self._before_write("delete", name, dry_run)
        current = self.priority_classes.get(name)
        if current is None:
            return None
        if current["metadata"]["resourceVersion"] != resource_version:
            raise Conflict("precondition failed: resourceVersion")
        if not dry_run:
            del self.priority_classes[name]
        return {}

    def can_i(self, verb, group, resource):
        return self.allowed


__all__ = ["FakeKubeApi", "make_node", "make_pod", "apply_json_patch"]
