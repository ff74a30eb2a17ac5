from ansible_collections.kubesched.scheduler.plugins.module_utils.cordon import cordon_operations, cordon_view


def test_cordon_sets_unschedulable_once():
    plan = cordon_operations("cordoned")
    assert plan({"spec": {}}) == [{"op": "add", "path": "/spec/unschedulable", "value": True}]
    assert plan({"spec": {"unschedulable": True}}) == []


def test_uncordon_drops_the_field_like_kubectl():
    plan = cordon_operations("uncordoned")
    assert plan({"spec": {"unschedulable": True}}) == [{"op": "add", "path": "/spec/unschedulable", "value": False}]
    assert plan({"spec": {}}) == []
    assert plan({"spec": {"unschedulable": False}}) == []


def test_view_treats_a_missing_field_as_schedulable():
    assert cordon_view({"spec": {}}) == {"unschedulable": False}
    assert cordon_view({}) == {"unschedulable": False}
