import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.taints import (
    TaintSpec,
    desired_taints,
    eviction_delay,
    eviction_preview,
    format_taint,
    parse_taints,
    taint_operations,
    tolerates,
)

BLUE = {"key": "app", "value": "blue", "effect": "NoSchedule"}
DRAIN = {"key": "drain", "effect": "NoExecute"}


class TestParsing:
    @pytest.mark.parametrize("text, expected", [
        ("app=blue:NoSchedule", TaintSpec("app", "blue", "NoSchedule")),
        ("app:PreferNoSchedule", TaintSpec("app", "", "PreferNoSchedule")),
        ("example.com/gpu=:NoExecute", TaintSpec("example.com/gpu", "", "NoExecute")),
    ])
    def test_kubectl_strings_for_present(self, text, expected):
        assert parse_taints([text], "present") == [expected]

    @pytest.mark.parametrize("text, expected", [
        ("app", TaintSpec("app", None, None)),
        ("app-", TaintSpec("app", None, None)),
        ("app:NoSchedule-", TaintSpec("app", None, "NoSchedule")),
        ("app=blue:NoSchedule", TaintSpec("app", "blue", "NoSchedule")),
        ("app=blue", TaintSpec("app", "blue", None)),
    ])
    def test_kubectl_strings_for_absent(self, text, expected):
        assert parse_taints([text], "absent") == [expected]

    def test_dicts_and_integer_values(self):
        specs = parse_taints([{"key": "tier", "value": 2, "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}],
                             "present")
        assert specs == [TaintSpec("tier", "2", "NoSchedule"), TaintSpec("x", "", "NoExecute")]

    def test_absent_dict_without_effect_matches_every_effect(self):
        assert parse_taints([{"key": "app"}], "absent") == [TaintSpec("app", None, None)]

    @pytest.mark.parametrize("item, state, fragment", [
        ("app=blue:NoSchedul", "present", "taints[0]: effect 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
        ("app=blue:noschedule", "present", "did you mean NoSchedule?"),
        ("app=blue", "present", "taints[0]: taint 'app' has no effect; with state: present give one of"),
        ("app", "present", "has no effect"),
        ("app-", "present", "kubectl's removal marker; to remove a taint use state: absent"),
        ("a:b:NoSchedule", "present", "more than one ':'"),
        ("a=b=c:NoSchedule", "present", "more than one '='"),
        ("bad key=x:NoSchedule", "present", "key 'bad key' is not a valid qualified name"),
        ("=x:NoSchedule", "present", "name part must be non-empty"),
        ("app=" + "v" * 64 + ":NoSchedule", "present", "no more than 63 characters"),
        ("app=blue green:NoSchedule", "present", "value 'blue green' is invalid"),
        ({"key": "app", "efect": "NoSchedule"}, "present", "unknown field(s) efect"),
        ({"value": "x", "effect": "NoSchedule"}, "present", "taints[0]: key is required"),
        ({"key": "app", "value": True, "effect": "NoSchedule"}, "present", "value is the boolean True; quote it ('true')"),
        ({"key": "app", "value": 1.5, "effect": "NoSchedule"}, "present", "value must be a string, got float"),
        (["app"], "present", "must be a string like 'key=value:NoSchedule' or a dict"),
        ("app:Evict", "absent", "effect 'Evict' is not one of"),
    ])
    def test_bad_taints_name_the_element_and_the_fix(self, item, state, fragment):
        with pytest.raises(ModuleFailure) as failure:
            parse_taints([item], state)
        assert fragment in failure.value.message, failure.value.message

    def test_same_key_and_effect_twice_is_refused(self):
        with pytest.raises(ModuleFailure) as failure:
            parse_taints(["app=blue:NoSchedule", "app=green:NoSchedule"], "present")
        assert "taints[1]: taint app:NoSchedule is given twice" in failure.value.message

    def test_same_key_with_other_effect_is_fine(self):
        assert len(parse_taints(["app=blue:NoSchedule", "app=blue:NoExecute"], "present")) == 2

    def test_error_names_the_failing_index(self):
        with pytest.raises(ModuleFailure) as failure:
            parse_taints(["ok:NoSchedule", "bad:Nope"], "present")
        assert failure.value.message.startswith("taints[1]")


class TestDesiredTaints:
    def test_adds_a_new_taint_at_the_end(self):
        assert desired_taints([DRAIN], [TaintSpec("app", "blue", "NoSchedule")], "present") == [DRAIN, BLUE]

    def test_updates_value_in_place_matching_key_and_effect(self):
        current = [BLUE, DRAIN]
        result = desired_taints(current, [TaintSpec("app", "green", "NoSchedule")], "present")
        assert result == [{"key": "app", "value": "green", "effect": "NoSchedule"}, DRAIN]

    def test_same_key_other_effect_is_another_taint(self):
        result = desired_taints([BLUE], [TaintSpec("app", "blue", "NoExecute")], "present")
        assert result == [BLUE, {"key": "app", "value": "blue", "effect": "NoExecute"}]

    def test_unchanged_taint_keeps_time_added(self):
        stamped = dict(DRAIN, timeAdded="2026-01-01T00:00:00Z")
        assert desired_taints([stamped], [TaintSpec("drain", "", "NoExecute")], "present") == [stamped]

    def test_absent_matches_key_and_effect_ignoring_value(self):
        current = [BLUE, {"key": "app", "value": "blue", "effect": "NoExecute"}]
        result = desired_taints(current, [TaintSpec("app", "other", "NoSchedule")], "absent")
        assert result == [{"key": "app", "value": "blue", "effect": "NoExecute"}]

    def test_absent_without_effect_removes_every_effect_of_the_key(self):
        current = [BLUE, {"key": "app", "effect": "NoExecute"}, DRAIN]
        assert desired_taints(current, [TaintSpec("app", None, None)], "absent") == [DRAIN]

    def test_absent_of_missing_taint_changes_nothing(self):
        assert desired_taints([BLUE], [TaintSpec("other", None, None)], "absent") == [BLUE]

    def test_exclusive_keeps_only_the_given_taints(self):
        current = [BLUE, DRAIN]
        result = desired_taints(current, [TaintSpec("drain", "", "NoExecute"), TaintSpec("x", "", "NoSchedule")],
                                "present", exclusive=True)
        assert result == [DRAIN, {"key": "x", "effect": "NoSchedule"}]

    def test_exclusive_with_nothing_removes_all(self):
        assert desired_taints([BLUE, DRAIN], [], "present", exclusive=True) == []


class TestOperations:
    def test_no_operation_when_already_as_wanted(self):
        plan = taint_operations([TaintSpec("app", "blue", "NoSchedule")], "present", False)
        assert plan({"spec": {"taints": [dict(BLUE)]}}) == []

    def test_empty_value_equals_missing_value(self):
        plan = taint_operations([TaintSpec("drain", "", "NoExecute")], "present", False)
        assert plan({"spec": {"taints": [{"key": "drain", "value": "", "effect": "NoExecute"}]}}) == []

    def test_replaces_the_whole_list(self):
        plan = taint_operations([TaintSpec("app", "blue", "NoSchedule")], "present", False)
        assert plan({"spec": {}}) == [{"op": "add", "path": "/spec/taints", "value": [BLUE]}]


class TestTolerations:
    @pytest.mark.parametrize("toleration, taint, expected", [
        ({"key": "app", "operator": "Equal", "value": "blue", "effect": "NoExecute"},
         {"key": "app", "value": "blue", "effect": "NoExecute"}, True),
        ({"key": "app", "value": "blue"}, {"key": "app", "value": "blue", "effect": "NoExecute"}, True),
        ({"key": "app", "value": "green"}, {"key": "app", "value": "blue", "effect": "NoExecute"}, False),
        ({"key": "app", "operator": "Exists"}, {"key": "app", "value": "x", "effect": "NoExecute"}, True),
        ({"operator": "Exists"}, {"key": "any", "effect": "NoExecute"}, True),
        ({"key": "app", "operator": "Exists", "effect": "NoSchedule"}, {"key": "app", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, {"key": "app", "effect": "NoExecute"}, False),
        ({"key": "app", "operator": "Equal"}, {"key": "app", "effect": "NoExecute"}, True),
        ({"key": "sla", "operator": "Gt", "value": "750"}, {"key": "sla", "value": "800", "effect": "NoExecute"}, True),
        ({"key": "sla", "operator": "Gt", "value": "950"}, {"key": "sla", "value": "800", "effect": "NoExecute"}, False),
        ({"key": "sla", "operator": "Lt", "value": "950"}, {"key": "sla", "value": "800", "effect": "NoExecute"}, True),
        ({"key": "sla", "operator": "Lt", "value": "x"}, {"key": "sla", "value": "800", "effect": "NoExecute"}, False),
        ({"key": "app", "operator": "Bogus"}, {"key": "app", "effect": "NoExecute"}, False),
    ])
    def test_tolerates_like_upstream(self, toleration, taint, expected):
        assert tolerates(toleration, taint) is expected

    def test_eviction_delay_uses_the_first_matching_toleration_as_the_controller_does(self):
        # tests/integration/kubesched/test_kubesched_controllers.py checks these against the
        # taint eviction controller itself.
        taint = {"key": "drain", "effect": "NoExecute"}
        pod = {"spec": {"tolerations": []}}
        assert eviction_delay(pod, taint) == 0
        pod["spec"]["tolerations"] = [{"key": "other", "operator": "Exists"},
                                      {"key": "drain", "operator": "Exists", "tolerationSeconds": 300},
                                      {"operator": "Exists", "tolerationSeconds": 60}]
        assert eviction_delay(pod, taint) == 300
        pod["spec"]["tolerations"].append({"key": "drain", "operator": "Exists"})
        assert eviction_delay(pod, taint) == 300
        pod["spec"]["tolerations"].insert(0, {"key": "drain", "operator": "Exists"})
        assert eviction_delay(pod, taint) is None
        assert eviction_delay({"spec": {"tolerations": [{"operator": "Exists", "tolerationSeconds": -5}]}}, taint) == 0


class TestEvictionPreview:
    def pod(self, name, tolerations=None, phase="Running", namespace="default"):
        return {"metadata": {"name": name, "namespace": namespace},
                "spec": {"tolerations": tolerations or []}, "status": {"phase": phase}}

    def test_lists_only_pods_that_do_not_tolerate_new_noexecute_taints(self):
        pods = [
            self.pod("plain"),
            self.pod("tolerant", [{"key": "drain", "operator": "Exists", "effect": "NoExecute"}]),
            self.pod("brief", [{"key": "drain", "operator": "Exists", "tolerationSeconds": 30}]),
            self.pod("done", phase="Succeeded"),  # the controller deletes finished pods too
            self.pod("other-ns", namespace="a"),
        ]
        preview = eviction_preview("n1", [BLUE], [BLUE, DRAIN], pods)
        assert preview == [{"node": "n1", "taint": "drain:NoExecute", "pods": [
            {"namespace": "a", "name": "other-ns", "evicted_after_seconds": 0},
            {"namespace": "default", "name": "brief", "evicted_after_seconds": 30},
            {"namespace": "default", "name": "done", "evicted_after_seconds": 0},
            {"namespace": "default", "name": "plain", "evicted_after_seconds": 0},
        ]}]

    def test_existing_noexecute_and_other_effects_are_not_previewed(self):
        assert eviction_preview("n1", [DRAIN], [DRAIN, BLUE], [self.pod("plain")]) == []

    def test_new_value_of_a_noexecute_taint_is_previewed(self):
        before = [{"key": "drain", "value": "a", "effect": "NoExecute"}]
        after = [{"key": "drain", "value": "b", "effect": "NoExecute"}]
        pods = [self.pod("matches-old", [{"key": "drain", "value": "a"}])]
        assert eviction_preview("n1", before, after, pods)[0]["pods"][0]["name"] == "matches-old"


def test_format_taint_like_kubectl():
    assert format_taint(BLUE) == "app=blue:NoSchedule"
    assert format_taint(DRAIN) == "drain:NoExecute"
