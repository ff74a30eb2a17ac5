import pytest

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.priority_class import run, validate

from ..fake_kube import FakeKubeApi


def params(**overrides):
    base = dict(name="high", value=1000, global_default=False, description=None,
                preemption_policy="PreemptLowerPriority", state="present", force=False)
    base.update(overrides)
    return base


def stored(name, value=1000, global_default=False, policy=None, description=None, resource_version="5"):
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": name, "resourceVersion": resource_version}, "value": value,
          "globalDefault": global_default}
    if policy:
        pc["preemptionPolicy"] = policy
    if description is not None:
        pc["description"] = description
    return pc


class TestValidate:
    @pytest.mark.parametrize("overrides, fragment", [
        (dict(name="system-mine"), "name: 'system-mine' is reserved: names starting with 'system-'"),
        (dict(name="High_Priority"), "name: 'High_Priority' is not a valid PriorityClass name"),
        (dict(value=1000000001), "value: 1000000001 is above 1000000000, the highest priority a user-defined"),
        (dict(value=-2147483649), "value: -2147483649 is below -2147483648"),
    ])
    def test_local_failures(self, overrides, fragment):
        with pytest.raises(ModuleFailure) as failure:
            validate(params(**overrides))
        assert fragment in failure.value.message

    def test_limits_are_inclusive(self):
        validate(params(value=1000000000))
        validate(params(value=-2147483648))


class TestRun:
    def test_create_in_check_mode_writes_nothing(self):
        api = FakeKubeApi()
        result = run(api, params(description="d"), check_mode=True)
        assert result["changed"] is True
        assert result["diff"]["before"] == {}
        assert result["diff"]["after"] == {"value": 1000, "globalDefault": False,
                                           "preemptionPolicy": "PreemptLowerPriority", "description": "d"}
        assert api.priority_classes == {} and api.dry_runs == [("create", "high")]

    def test_create_then_unchanged(self):
        api = FakeKubeApi()
        assert run(api, params(), check_mode=False)["changed"] is True
        again = run(api, params(), check_mode=False)
        assert again["changed"] is False and api.writes == [("create", "high")]

    def test_server_default_policy_equals_the_option_default(self):
        api = FakeKubeApi(priority_classes=[stored("high")])
        assert run(api, params(), check_mode=False)["changed"] is False

    def test_description_left_out_keeps_the_existing_one(self):
        api = FakeKubeApi(priority_classes=[stored("high", description="keep me")])
        assert run(api, params(), check_mode=False)["changed"] is False

    def test_mutable_fields_are_patched_in_place(self):
        api = FakeKubeApi(priority_classes=[stored("high")])
        result = run(api, params(description="new", global_default=True), check_mode=False)
        assert result["changed"] is True and result["recreated"] is False
        assert api.priority_classes["high"]["description"] == "new"
        assert api.priority_classes["high"]["globalDefault"] is True

    @pytest.mark.parametrize("overrides, fragment", [
        (dict(value=2000), "value: PriorityClass 'high' cannot be changed in place (value is 1000, the task wants 2000)"),
        (dict(preemption_policy="Never"), "preemption_policy: PriorityClass 'high' cannot be changed in place"),
    ])
    def test_immutable_change_fails_naming_force(self, overrides, fragment):
        api = FakeKubeApi(priority_classes=[stored("high")])
        with pytest.raises(ModuleFailure) as failure:
            run(api, params(**overrides), check_mode=False)
        assert fragment in failure.value.message
        assert "Set force: true to delete and recreate it" in failure.value.message
        assert api.writes == [] and api.dry_runs == []

    def test_force_recreates_and_the_diff_shows_it(self):
        api = FakeKubeApi(priority_classes=[stored("high")])
        result = run(api, params(value=2000, force=True), check_mode=False)
        assert result["changed"] is True and result["recreated"] is True
        assert result["diff"]["before"]["value"] == 1000 and result["diff"]["after"]["value"] == 2000
        assert result["diff"]["after_header"] == "priorityclass/high (deleted and created again)"
        assert api.writes == [("delete", "high"), ("create", "high")]
        assert api.priority_classes["high"]["value"] == 2000

    def test_force_in_check_mode_deletes_nothing(self):
        api = FakeKubeApi(priority_classes=[stored("high")])
        result = run(api, params(value=2000, force=True), check_mode=True)
        assert result["recreated"] is True and api.writes == []
        assert api.priority_classes["high"]["value"] == 1000

    def test_force_without_create_permission_deletes_nothing(self):
        api = FakeKubeApi(priority_classes=[stored("high")], allowed=False)
        with pytest.raises(ModuleFailure) as failure:
            run(api, params(value=2000, force=True), check_mode=False)
        assert "needs permission to create priorityclasses" in failure.value.message
        assert "high" in api.priority_classes and api.writes == []

    def test_second_global_default_names_the_holder(self):
        api = FakeKubeApi(priority_classes=[stored("incumbent", global_default=True)])
        with pytest.raises(ModuleFailure) as failure:
            run(api, params(global_default=True), check_mode=False)
        assert failure.value.message.startswith(
            "global_default: PriorityClass 'incumbent' is already the global default")
        assert api.writes == []

    def test_holder_may_stay_the_global_default(self):
        api = FakeKubeApi(priority_classes=[stored("high", global_default=True)])
        assert run(api, params(global_default=True), check_mode=False)["changed"] is False

    def test_conflict_on_patch_rereads(self):
        api = FakeKubeApi(priority_classes=[stored("high")])

        def concurrent(fake):
            fake.priority_classes["high"]["metadata"]["resourceVersion"] = "6"

        api.before_write = concurrent
        result = run(api, params(description="new"), check_mode=False)
        assert result["changed"] is True and api.priority_classes["high"]["description"] == "new"

    def test_absent(self):
        api = FakeKubeApi(priority_classes=[stored("high")])
        check = run(api, params(state="absent"), check_mode=True)
        assert check["changed"] is True and "high" in api.priority_classes
        assert run(api, params(state="absent"), check_mode=False)["changed"] is True
        assert "high" not in api.priority_classes
        assert run(api, params(state="absent"), check_mode=False)["changed"] is False
