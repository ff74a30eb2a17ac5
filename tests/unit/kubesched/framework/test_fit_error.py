"""FitError messages, byte for byte as upstream formats them."""

from kubesched.framework.fit_error import Diagnosis, FitError, truncate_message
from kubesched.framework.interface import Code, Status


def fit(n, statuses=None, pre_filter_msg="", post_filter_msg="", absent=None):
    d = Diagnosis()
    for name, status in (statuses or {}).items():
        d.node_to_status[name] = status
    if absent is not None:
        d.node_to_status.absent_nodes_status = absent
    d.pre_filter_msg = pre_filter_msg
    d.post_filter_msg = post_filter_msg
    return str(FitError("default/p", n, d))


def test_single_taint_reason_matches_s2_wording():
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint {node.kubernetes.io/not-ready: }")
    assert fit(1, {"n1": taint}) == \
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."


def test_reasons_counted_and_sorted_as_strings():
    cpu = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    both = Status(Code.UNSCHEDULABLE, "Insufficient cpu", "Insufficient memory")
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint {a: b}")
    statuses = {f"c{i}": cpu for i in range(10)}
    statuses.update({"m": both, "t1": taint, "t2": taint})
    # Go sort.Strings compares bytes: "1 I..." < "11 I..." < "2 n...".
    assert fit(13, statuses) == ("0/13 nodes are available: 1 Insufficient memory, 11 Insufficient cpu, "
                                 "2 node(s) had untolerated taint {a: b}.")


def test_prefilter_message_replaces_the_histogram():
    status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector")
    assert fit(3, {"x": status}, pre_filter_msg="node(s) didn't satisfy plugin NodeAffinity") == \
        "0/3 nodes are available: node(s) didn't satisfy plugin NodeAffinity."


def test_absent_nodes_count_with_the_absent_status():
    absent = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin(s) [NodeName]")
    assert fit(5, {}, absent=absent) == "0/5 nodes are available: 5 node(s) didn't satisfy plugin(s) [NodeName]."


def test_preemption_suffix_is_appended_without_extra_period():
    cpu = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    post = "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    assert fit(2, {"a": cpu, "b": cpu}, post_filter_msg=post) == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod.")


def test_no_reasons_leaves_only_the_header():
    assert fit(2, {}) == "0/2 nodes are available:"


def test_truncate_message_keeps_short_and_cuts_long():
    assert truncate_message("short") == "short"
    cut = truncate_message("x" * 2000)
    assert len(cut) == 1024 and cut.endswith(" ...")
