import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.labels import (
    desired_labels,
    label_operations,
    label_patch,
    parse_labels,
)


def test_present_accepts_strings_integers_and_empty_values():
    assert parse_labels({"color": "blue", "tier": 2, "empty": ""}, "present") == {"color": "blue", "tier": "2",
                                                                                  "empty": ""}


def test_absent_accepts_a_list_or_a_dict():
    assert parse_labels(["color", "example.com/size"], "absent") == ["color", "example.com/size"]
    assert parse_labels({"color": None}, "absent") == ["color"]


@pytest.mark.parametrize("labels, state, fragment", [
    ({"bad key": "x"}, "present", "labels: label key 'bad key' is not a valid qualified name"),
    ({"color": "-blue"}, "present", "labels['color']: value '-blue' is invalid"),
    ({"color": "b" * 64}, "present", "no more than 63 characters"),
    ({"enabled": True}, "present", "labels['enabled']: the value is the boolean True; quote it ('true')"),
    ({"color": None}, "present", "the value is null; give a string"),
    ({"color": ["blue"]}, "present", "the value must be a string, got list"),
    (["color"], "present", "labels must be a dict of label: value with state: present, got list"),
    ("color", "absent", "labels must be a list of keys or a dict with state: absent, got str"),
    (["a/b/c"], "absent", "label key 'a/b/c' is not a valid qualified name"),
    ([3], "absent", "label key 3 must be a string"),
])
def test_bad_labels_name_the_option_and_the_fix(labels, state, fragment):
    with pytest.raises(ModuleFailure) as failure:
        parse_labels(labels, state)
    assert fragment in failure.value.message, failure.value.message


def test_desired_labels():
    current = {"a": "1", "b": "2"}
    assert desired_labels(current, {"b": "3", "c": "4"}, "present") == {"a": "1", "b": "3", "c": "4"}
    assert desired_labels(current, ["a", "missing"], "absent") == {"b": "2"}


def test_patch_writes_the_whole_map_and_never_a_null():
    current = {"color": "blue", "example.com/size": "L", "keep": "x"}
    operations = label_patch(current, {"keep": "x", "color": "green"})
    assert operations == [{"op": "add", "path": "/metadata/labels", "value": {"keep": "x", "color": "green"}}]
    assert None not in operations[0]["value"].values()


def test_patch_is_empty_when_nothing_changes():
    assert label_patch({"a": "1"}, {"a": "1"}) == []


def test_patch_creates_the_map_when_the_node_has_no_labels():
    assert label_patch({}, {"color": "blue"}) == [{"op": "add", "path": "/metadata/labels", "value": {"color": "blue"}}]


def test_removing_a_missing_label_plans_nothing():
    plan = label_operations(["missing"], "absent")
    assert plan({"metadata": {"labels": {"color": "blue"}}}) == []
    assert plan({"metadata": {}}) == []


def test_setting_an_existing_value_plans_nothing():
    plan = label_operations({"color": "blue"}, "present")
    assert plan({"metadata": {"labels": {"color": "blue", "other": "x"}}}) == []
