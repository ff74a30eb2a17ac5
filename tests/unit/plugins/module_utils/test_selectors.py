import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.selectors import Requirement, parse_label_selector


@pytest.mark.parametrize("selector, expected", [
    ("color", [Requirement("color", "Exists")]),
    ("!color", [Requirement("color", "DoesNotExist")]),
    ("color=blue", [Requirement("color", "Equals", ["blue"])]),
    ("color==blue", [Requirement("color", "Equals", ["blue"])]),
    ("color!=blue", [Requirement("color", "NotEquals", ["blue"])]),
    ("color=", [Requirement("color", "Equals", [""])]),
    ("zone in (a, b)", [Requirement("zone", "In", ["a", "b"])]),
    ("zone notin (a)", [Requirement("zone", "NotIn", ["a"])]),
    ("cpus>4", [Requirement("cpus", "Gt", ["4"])]),
    ("cpus < 10", [Requirement("cpus", "Lt", ["10"])]),
    (" node-role.kubernetes.io/worker , !excluded,color=blue ", [
        Requirement("node-role.kubernetes.io/worker", "Exists"),
        Requirement("excluded", "DoesNotExist"),
        Requirement("color", "Equals", ["blue"]),
    ]),
])
def test_parses_kubectl_selectors(selector, expected):
    assert parse_label_selector(selector) == expected


@pytest.mark.parametrize("selector, fragment", [
    ("", "must not be empty"),
    ("   ", "must not be empty"),
    ("=blue", "expected a label key but found '='"),
    ("color=blue=green", "expected ',' or the end of the selector but found '='"),
    ("zone in (a", "expected ',' or ')' in the 'in' value list but the selector ended"),
    ("zone in a", "expected '(' after 'in'"),
    ("zone in ()", "'in' value list must not be empty"),
    ("color blue", "expected an operator"),
    ("cpus>four", "needs an integer value"),
    ("color=blue,", "expected a label key but the selector ended"),
    ("!", "expected a label key after '!'"),
    ("bad key!=x", "expected an operator"),
    ("-bad=x", "label key '-bad' is invalid"),
    ("color=-blue", "value '-blue' for key 'color' is invalid"),
    # upstream checks Gt/Lt values as label values too, so negative numbers are refused
    ("cpus<-1", "value '-1' for key 'cpus' is invalid"),
])
def test_malformed_selectors_name_the_option_and_the_problem(selector, fragment):
    with pytest.raises(ModuleFailure) as failure:
        parse_label_selector(selector)
    assert failure.value.message.startswith("label_selector")
    assert fragment in failure.value.message, failure.value.message
