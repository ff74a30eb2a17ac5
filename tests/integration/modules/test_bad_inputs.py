"""Bad input to every module: each fails with a message that names the option and the fix,
and the cluster is read back unchanged (every node and PriorityClass keeps its resourceVersion).
"""

import json
import uuid

import pytest

from lab.fake_nodes import create_nodes, delete_nodes

LONG_VALUE = "v" * 64


@pytest.fixture(scope="module")
def stage(core_v1, scheduling_v1, api_client):
    """Two nodes (one tainted and labelled), an existing PriorityClass and a global default one;
    "server" is the lab API server's address (a private lab's port differs)."""
    suffix = uuid.uuid4().hex[:5]
    names = create_nodes(core_v1, 2, prefix="bad-%s-" % suffix)
    taints = [[{"key": "app", "value": "blue", "effect": "NoSchedule"}], []]
    for name, node_taints in zip(names, taints):
        core_v1.patch_node(name, [{"op": "add", "path": "/spec/taints", "value": node_taints},
                                  {"op": "add", "path": "/metadata/labels/color", "value": "blue"}],
                           _content_type="application/json-patch+json", _preload_content=False)
    existing, holder = "bad-existing-" + suffix, "bad-default-" + suffix
    scheduling_v1.create_priority_class({"metadata": {"name": existing}, "value": 1000}, _preload_content=False)
    scheduling_v1.create_priority_class({"metadata": {"name": holder}, "value": 5, "globalDefault": True},
                                        _preload_content=False)
    yield {"n0": names[0], "n1": names[1], "pc": existing, "holder": holder, "server": api_client.configuration.host}
    delete_nodes(core_v1, names)
    for name in (existing, holder):
        scheduling_v1.delete_priority_class(name, _preload_content=False)


# (module, args, the message fragment). {n0}, {n1}, {pc} and {holder} name the staged objects,
# {server} the lab API server.
BAD_INPUTS = [
    ("node_taint", dict(name="{n0}", taints=["app=blue:NoSchedul"]),
     "taints[0]: effect 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("node_taint", dict(name="{n0}", taints=["app=blue:noexecute"]), "did you mean NoExecute?"),
    ("node_taint", dict(name="{n0}", taints=["bad key=x:NoSchedule"]),
     "taints[0]: key 'bad key' is not a valid qualified name: name part must consist of alphanumeric characters"),
    ("node_taint", dict(name="{n0}", taints=["app=%s:NoSchedule" % LONG_VALUE]),
     "taints[0]: value '%s' is invalid: must be no more than 63 characters (it has 64)" % LONG_VALUE),
    ("node_taint", dict(name="{n0}", taints=["app=green"]),
     "taints[0]: taint 'app' has no effect; with state: present give one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("node_taint", dict(name="{n0}", taints=["app-"]),
     "taints[0]: 'app-' ends with '-', kubectl's removal marker; to remove a taint use state: absent"),
    ("node_taint", dict(name="{n0}", taints=[{"key": "app", "efect": "NoSchedule"}]),
     "taints[0]: unknown field(s) efect; a taint has only key, value and effect"),
    ("node_taint", dict(name="{n0}", taints=["a=1:NoSchedule", "a=2:NoSchedule"]),
     "taints[1]: taint a:NoSchedule is given twice"),
    ("node_taint", dict(name=["{n1}", "ghost-node"], taints=["x:NoSchedule"]),
     "name: node 'ghost-node' not found on the API server at {server}. Fix name; the cluster's nodes"),
    ("node_taint", dict(label_selector="color in (blue", taints=["x:NoSchedule"]),
     "label_selector 'color in (blue' is malformed: expected ',' or ')' in the 'in' value list"),
    ("node_taint", dict(name="{n0}", label_selector="color=blue", taints=["x:NoSchedule"]),
     "parameters are mutually exclusive: name|label_selector"),
    ("node_taint", dict(name="{n0}", state="absent", exclusive=True, taints=["app"]),
     "exclusive: true only applies to state: present"),
    ("node_taint", dict(name="{n0}"), "missing required arguments: taints"),
    ("node_taint", dict(name="{n0}", taints=["x:NoSchedule"], kubeconfig=None, host="https://127.0.0.1:1"),
     "cannot reach the Kubernetes API server at https://127.0.0.1:1 ([Errno 111] Connection refused). "
     "Check that it is running and that kubeconfig/context or host (K8S_AUTH_HOST) point to it"),
    ("node_taint", dict(name="{n0}", taints=["x:NoSchedule"], kubeconfig=None, host="{server}"),
     "TLS verification of the API server at {server} failed"),
    ("node_taint", dict(name="{n0}", taints=["x:NoSchedule"], context="staging"),
     "context: 'staging' is not a context in kubeconfig file"),
    ("node_taint", dict(name="{n0}", taints=["x:NoSchedule"], kubeconfig="/nonexistent/kubeconfig"),
     "kubeconfig: file /nonexistent/kubeconfig does not exist. Fix kubeconfig (or K8S_AUTH_KUBECONFIG)"),
    ("node_label", dict(name="{n0}", labels={"-bad": "x"}),
     "labels: label key '-bad' is not a valid qualified name"),
    ("node_label", dict(name="{n0}", labels={"enabled": True}),
     "labels['enabled']: the value is the boolean True; quote it ('true') if you mean the string"),
    ("node_label", dict(name="{n0}", labels={"color": "blue green"}),
     "labels['color']: value 'blue green' is invalid: must be empty or consist of alphanumeric characters"),
    ("node_label", dict(name="{n0}", state="absent", labels="color"),
     "labels must be a list of keys or a dict with state: absent, got str"),
    ("node_label", dict(name=["Bad_Node"], labels={"color": "red"}),
     "name: 'Bad_Node' is not a valid node name: must be a lowercase RFC 1123 subdomain"),
    ("node_label", dict(label_selector="=blue", labels={"color": "red"}),
     "label_selector '=blue' is malformed: expected a label key but found '=' at position 0"),
    ("node_cordon", dict(name="{n0}", state="drained"),
     "value of state must be one of: cordoned, uncordoned, got: drained"),
    ("node_cordon", dict(state="cordoned"), "one of the following is required: name, label_selector"),
    ("node_cordon", dict(name=["{n0}", "ghost-a", "ghost-b"]), "name: nodes 'ghost-a', 'ghost-b' not found"),
    ("priority_class", dict(name="system-custom", value=10),
     "name: 'system-custom' is reserved: names starting with 'system-' belong to Kubernetes' built-in classes"),
    ("priority_class", dict(name="too-high", value=1000000001),
     "value: 1000000001 is above 1000000000, the highest priority a user-defined class may have"),
    ("priority_class", dict(name="{pc}", value=2000),
     "value: PriorityClass '{pc}' cannot be changed in place (value is 1000, the task wants 2000): value and "
     "preemption_policy are immutable. Set force: true to delete and recreate it"),
    ("priority_class", dict(name="{pc}", value=1000, preemption_policy="Never"),
     "preemption_policy: PriorityClass '{pc}' cannot be changed in place"),
    ("priority_class", dict(name="second-default", value=7, global_default=True),
     "global_default: PriorityClass '{holder}' is already the global default and only one class may be. "
     "Set global_default: false on {holder} first"),
    ("priority_class", dict(name="no-value"), "state is present but all of the following are missing: value"),
    ("priority_class", dict(name="High_Priority", value=1),
     "name: 'High_Priority' is not a valid PriorityClass name"),
    ("priority_class", dict(name="x", value=1, preemption_policy="Sometimes"),
     "value of preemption_policy must be one of: PreemptLowerPriority, Never, got: Sometimes"),
]


def fill_placeholders(value, stage):
    """A case's args or message with {n0}, {n1}, {pc} and {holder} replaced by the staged names."""
    if isinstance(value, str):
        return value.format(**stage)
    if isinstance(value, list):
        return [fill_placeholders(item, stage) for item in value]
    if isinstance(value, dict):
        return {key: fill_placeholders(item, stage) for key, item in value.items()}
    return value


def _watched(stage, args=None):
    """Every object a case could touch: the staged ones, and a PriorityClass the case names."""
    names = {stage["n0"], stage["n1"], "ghost-node", "ghost-a", "ghost-b", "Bad_Node"}
    watched = set(("node", name) for name in names)
    watched.update(("priorityclass", name) for name in (stage["pc"], stage["holder"]))
    if args and isinstance(args.get("name"), str):
        watched.add(("priorityclass", fill_placeholders(args["name"], stage)))
    return watched


def _case_id(case):
    module, args, _fragment = case
    return "%s-%s" % (module, json.dumps(args, sort_keys=True)[:60])


@pytest.mark.parametrize("module, args, fragment", BAD_INPUTS, ids=[_case_id(case) for case in BAD_INPUTS])
def test_bad_input_fails_clearly_and_changes_nothing(stage, cluster_snapshot, run_module, module, args, fragment):
    watched = _watched(stage, args)
    before = cluster_snapshot(watched)
    for check_mode in (False, True):
        result = run_module(module, check_mode=check_mode, **fill_placeholders(args, stage))
        assert result.get("failed") is True, result
        assert fill_placeholders(fragment, stage) in result["msg"], result["msg"]
    assert cluster_snapshot(watched) == before


def test_rbac_denial_names_user_verb_and_resource(stage, cluster_snapshot, run_module, limited_identity):
    before = cluster_snapshot(_watched(stage))
    result = run_module("node_taint", kubeconfig=None, name=[stage["n0"], stage["n1"]], taints=["x:NoSchedule"],
                        **limited_identity["options"])
    assert result["failed"] is True
    assert result["msg"].startswith(
        "forbidden (HTTP 403): user '%s' may not patch nodes '%s' on %s. Grant it RBAC "
        "permission (verb 'patch' on resource 'nodes')" % (limited_identity["user"], stage["n0"], stage["server"]))
    assert cluster_snapshot(_watched(stage)) == before


def test_rbac_denial_for_priority_classes(stage, cluster_snapshot, run_module, limited_identity):
    before = cluster_snapshot(_watched(stage) | {("priorityclass", "denied")})
    created = run_module("priority_class", kubeconfig=None, name="denied", value=1, **limited_identity["options"])
    assert "may not create priorityclasses 'denied'" in created["msg"]
    forced = run_module("priority_class", kubeconfig=None, name=stage["pc"], value=99, force=True,
                        **limited_identity["options"])
    assert "needs permission to create priorityclasses" in forced["msg"] and "nothing was deleted" in forced["msg"]
    assert cluster_snapshot(_watched(stage) | {("priorityclass", "denied")}) == before


def test_at_least_twenty_bad_inputs_across_all_four_modules():
    assert len(BAD_INPUTS) >= 20
    assert {case[0] for case in BAD_INPUTS} == {"node_taint", "node_label", "node_cordon", "priority_class"}


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # validate_certs off on purpose
def test_connection_from_environment_variables_alone(stage, cluster_snapshot, run_module, limited_identity):
    """host, api_key and ca_cert come from K8S_AUTH_*: the 403 names the token's service account."""
    options = limited_identity["options"]
    env = {"K8S_AUTH_HOST": options["host"], "K8S_AUTH_API_KEY": options["api_key"],
           "K8S_AUTH_SSL_CA_CERT": options["ca_cert"], "K8S_AUTH_VERIFY_SSL": "yes"}
    before = cluster_snapshot(_watched(stage))
    result = run_module("node_cordon", kubeconfig=None, env=env, name=stage["n1"])
    assert "forbidden (HTTP 403): user '%s' may not patch nodes" % limited_identity["user"] in result["msg"]
    unverified = {"K8S_AUTH_HOST": options["host"], "K8S_AUTH_API_KEY": options["api_key"], "K8S_AUTH_VERIFY_SSL": "no"}
    result = run_module("node_cordon", kubeconfig=None, env=unverified, name=stage["n1"])
    assert "forbidden (HTTP 403)" in result["msg"], result["msg"]
    assert cluster_snapshot(_watched(stage)) == before
