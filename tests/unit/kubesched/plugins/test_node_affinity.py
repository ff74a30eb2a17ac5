import pytest
from plugin_builders import code_and_reasons, make_node, make_pod, run_filter, run_scores

from kubesched.framework.handle import Handle
from kubesched.framework.interface import Code, CycleState, PluginArgsError
from kubesched.plugins.node_affinity import NodeAffinity

REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))
ENFORCED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match scheduler-enforced node affinity",))


def expr(key, op, *values):
    e = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def term(*expressions, fields=()):
    t = {}
    if expressions:
        t["matchExpressions"] = list(expressions)
    if fields:
        t["matchFields"] = list(fields)
    return t


FILTER_CASES = [
    ("no selector, no affinity", None, None, {}, None),
    ("missing labels", {"foo": "bar"}, None, {}, REJECTED),
    ("same labels", {"foo": "bar"}, None, {"foo": "bar"}, None),
    ("node labels superset", {"foo": "bar"}, None, {"foo": "bar", "baz": "blah"}, None),
    ("node labels subset", {"foo": "bar", "baz": "blah"}, None, {"foo": "bar"}, REJECTED),
    ("In matches", None, required(term(expr("foo", "In", "value1", "value2"))), {"foo": "value1"}, None),
    ("In does not match", None, required(term(expr("foo", "In", "value1"))), {"foo": "other"}, REJECTED),
    ("In on missing key", None, required(term(expr("foo", "In", "value1"))), {}, REJECTED),
    ("Gt matches", None, required(term(expr("kernel-version", "Gt", "0204"))), {"kernel-version": "0206"}, None),
    ("Gt equal does not match", None, required(term(expr("v", "Gt", "5"))), {"v": "5"}, REJECTED),
    ("Gt non-integer label", None, required(term(expr("v", "Gt", "5"))), {"v": "6a"}, REJECTED),
    ("Lt matches", None, required(term(expr("v", "Lt", "5"))), {"v": "-3"}, None),
    ("Lt does not match", None, required(term(expr("v", "Lt", "5"))), {"v": "7"}, REJECTED),
    ("Lt on missing key", None, required(term(expr("v", "Lt", "5"))), {}, REJECTED),
    ("Gt with two values never matches", None, required(term(expr("v", "Gt", "1", "2"))), {"v": "5"}, REJECTED),
    ("NotIn matches", None, required(term(expr("mem-type", "NotIn", "DDR", "DDR2"))), {"mem-type": "DDR3"}, None),
    ("NotIn on missing key matches", None, required(term(expr("mem-type", "NotIn", "DDR"))), {}, None),
    ("NotIn does not match", None, required(term(expr("mem-type", "NotIn", "DDR"))), {"mem-type": "DDR"}, REJECTED),
    ("Exists matches", None, required(term(expr("GPU", "Exists"))), {"GPU": "NVIDIA-GRID-K1"}, None),
    ("Exists does not match", None, required(term(expr("GPU", "Exists"))), {}, REJECTED),
    ("DoesNotExist matches", None, required(term(expr("GPU", "DoesNotExist"))), {"x": "y"}, None),
    ("DoesNotExist does not match", None, required(term(expr("GPU", "DoesNotExist"))), {"GPU": ""}, REJECTED),
    ("empty term matches nothing", None, required(term()), {"foo": "bar"}, REJECTED),
    ("no terms match nothing", None, required(), {"foo": "bar"}, REJECTED),
    ("nil required terms (affinity without required)", None, {"nodeAffinity": {}}, {"foo": "bar"}, None),
    ("expressions ANDed, match", None, required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
     {"GPU": "NVIDIA-GRID-K1"}, None),
    ("expressions ANDed, no match", None, required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))),
     {"GPU": "NVIDIA-GRID-K1"}, REJECTED),
    ("terms ORed", None, required(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong"))),
     {"foo": "bar"}, None),
    ("nodeSelector and affinity both needed", {"foo": "bar"}, required(term(expr("foo", "Exists"))),
     {"foo": "bar"}, None),
    ("affinity matches but nodeSelector does not", {"foo": "bar"}, required(term(expr("foo", "Exists"))),
     {"foo": "barrrrrr"}, REJECTED),
    ("invalid value never matches", None, required(term(expr("foo", "In", "invalid value: ___@#$%^"))),
     {"foo": "bar"}, REJECTED),
    ("unknown operator never matches", None, required(term(expr("foo", "Bogus", "bar"))), {"foo": "bar"}, REJECTED),
    ("matchFields In matches", None, required(term(fields=[expr("metadata.name", "In", "node1")])), {}, None),
    ("matchFields In does not match", None, required(term(fields=[expr("metadata.name", "In", "node2")])), {},
     REJECTED),
    ("matchFields NotIn", None, required(term(fields=[expr("metadata.name", "NotIn", "node2")])), {}, None),
    ("term with fields not matching, other term matching", None,
     required(term(fields=[expr("metadata.name", "In", "node2")]), term(expr("foo", "In", "bar"))),
     {"foo": "bar"}, None),
    ("one term: fields do not match, expressions match", None,
     required(term(expr("foo", "In", "bar"), fields=[expr("metadata.name", "In", "node2")])), {"foo": "bar"},
     REJECTED),
    ("one term: both match", None,
     required(term(expr("foo", "In", "bar"), fields=[expr("metadata.name", "In", "node1")])), {"foo": "bar"}, None),
]


@pytest.mark.parametrize("name, selector, affinity, labels, want", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter(name, selector, affinity, labels, want):
    pod = make_pod(node_selector=selector, affinity=affinity)
    assert code_and_reasons(run_filter(NodeAffinity(None, Handle()), pod, make_node("node1", labels=labels))) == want


def test_pre_filter_skips_pods_without_constraints():
    _unused, status = NodeAffinity(None, Handle()).pre_filter(CycleState(), make_pod(), [])
    assert status.is_skip()


@pytest.mark.parametrize("terms, want_names, want_status", [
    ([term(fields=[expr("metadata.name", "In", "node1")]), term(fields=[expr("metadata.name", "In", "node2")])],
     {"node1", "node2"}, None),
    ([term(fields=[expr("metadata.name", "In", "node1")]), term(expr("foo", "Exists"))], None, None),
    ([term(fields=[expr("metadata.name", "In", "node1"), expr("metadata.name", "In", "node2")])], None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod affinity terms conflict",))),
])
def test_pre_filter_narrows_nodes_by_name(terms, want_names, want_status):
    result, status = NodeAffinity(None, Handle()).pre_filter(CycleState(), make_pod(affinity=required(*terms)), [])
    assert code_and_reasons(status) == want_status
    assert (result.node_names if result else None) == want_names


ADDED = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [term(expr("zone", "In", "foo", "bar"))]}}}


@pytest.mark.parametrize("labels, affinity, want", [
    ({"zone": "foo"}, required(term(expr("zone", "In", "foo"))), None),
    ({"zone": "bar"}, required(term(expr("zone", "In", "foo"))), REJECTED),
    ({"zone": "baz"}, None, ENFORCED),
])
def test_added_affinity(labels, affinity, want):
    pod = make_pod(affinity=affinity)
    assert code_and_reasons(run_filter(NodeAffinity(ADDED, Handle()), pod, make_node("n", labels=labels))) == want


def preferred(*weighted):
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": t} for w, t in weighted]}}


AFFINITY1 = preferred((2, term(expr("foo", "In", "bar"))))
AFFINITY2 = preferred((2, term(expr("foo", "In", "bar"))), (4, term(expr("key", "In", "value"))),
                      (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))))
LABEL1, LABEL2, LABEL3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
LABEL4, LABEL5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}


@pytest.mark.parametrize("affinity, labels, args, want", [
    (AFFINITY1, [LABEL4, LABEL2, LABEL3], None, [0, 0, 0]),
    (AFFINITY1, [LABEL1, LABEL2, LABEL3], None, [100, 0, 0]),
    (AFFINITY2, [LABEL1, LABEL5, LABEL2], None, [18, 100, 36]),
    (None, [LABEL1, LABEL2], {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": term(expr("key", "In", "value"))}]}}, [0, 100]),
    (AFFINITY1, [LABEL1, LABEL5, LABEL2], {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": term(expr("key", "In", "value"))}]}}, [40, 100, 60]),
])
def test_score(affinity, labels, args, want):
    nodes = [make_node(f"node{i}", labels=lab) for i, lab in enumerate(labels)]
    assert run_scores(NodeAffinity(args, Handle()), make_pod(affinity=affinity), nodes) == want


def test_pre_score_skips_without_preferred_terms():
    assert run_scores(NodeAffinity(None, Handle()), make_pod(), [make_node("n", labels=LABEL1)]) is None


def test_pre_score_reports_a_broken_preferred_term():
    pod = make_pod(affinity=preferred((2, term(expr("invalid key", "In", "bar")))))
    status = NodeAffinity(None, Handle()).pre_score(CycleState(), pod, [])
    assert status.code == Code.ERROR
    assert "matchExpressions[0].key: Invalid value" in status.message()


@pytest.mark.parametrize("args, field", [
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term(expr("foo", "Bogus", "x"))]}}},
     "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": term(expr("foo", "In"))}]}},
     "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values"),
    ({"addedAffinity": {"required": {}}}, "addedAffinity.required"),
])
def test_args_validation(args, field):
    with pytest.raises(PluginArgsError) as err:
        NodeAffinity(args, Handle())
    assert err.value.field == field
