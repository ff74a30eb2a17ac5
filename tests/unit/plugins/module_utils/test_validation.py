import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import (
    describe_problems,
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
)


@pytest.mark.parametrize("key", [
    "app", "A", "a1", "my.name", "My_Name-1", "example.com/app", "node.kubernetes.io/not-ready",
    "a" * 63, "a.b/" + "c" * 63, "k8s.io/x",
])
def test_valid_qualified_names(key):
    assert qualified_name_problems(key) == []


@pytest.mark.parametrize("key, fragment", [
    ("", "name part must be non-empty"),
    ("-app", "must consist of alphanumeric"),
    ("app-", "must consist of alphanumeric"),
    ("bad key", "must consist of alphanumeric"),
    ("a" * 64, "no more than 63 characters"),
    ("/app", "prefix part (before '/') must be non-empty"),
    ("example.com/", "name part must be non-empty"),
    ("Example.com/app", "prefix part must be a lowercase RFC 1123 subdomain"),
    ("a/b/c", "at most one '/'"),
    ("x" * 254 + "/app", "prefix part must be no more than 253 characters"),
])
def test_invalid_qualified_names(key, fragment):
    assert any(fragment in problem for problem in qualified_name_problems(key)), qualified_name_problems(key)


@pytest.mark.parametrize("value", ["", "blue", "Blue_1.2-x", "1", "a" * 63])
def test_valid_label_values(value):
    assert label_value_problems(value) == []


@pytest.mark.parametrize("value, fragment", [
    ("a" * 64, "no more than 63 characters (it has 64)"),
    ("-blue", "must be empty or consist"),
    ("blue green", "must be empty or consist"),
    ("blue/green", "must be empty or consist"),
])
def test_invalid_label_values(value, fragment):
    assert any(fragment in problem for problem in label_value_problems(value))


def test_dns_subdomain_rules():
    assert dns1123_subdomain_problems("high-priority") == []
    assert dns1123_subdomain_problems("a.b-c.d") == []
    assert dns1123_subdomain_problems("High") != []
    assert dns1123_subdomain_problems("a_b") != []
    assert dns1123_subdomain_problems("a" * 254) != []


def test_describe_problems_joins_every_problem():
    assert describe_problems("key", "x y", ["one", "two"]) == "key 'x y' is invalid: one; two"
