"""The example plugin on its own (pytest examples/kubesched-plugin-example/tests, with kubesched
importable), and enabled by name through its entry point."""

import pytest
from kubesched_plugin_example.maintenance import REASON, Maintenance

from kubesched.framework.interface import Code, PluginArgsError
from kubesched.framework.types import NodeInfo, PodInfo


def node(name, **labels):
    return NodeInfo({"metadata": {"name": name, "labels": labels}, "spec": {},
                     "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})


def pod(**labels):
    return PodInfo({"metadata": {"name": "p", "namespace": "default", "uid": "u1", "labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]}, "status": {}})


def test_filter_keeps_pods_off_nodes_in_maintenance():
    plugin = Maintenance({}, None)
    status = plugin.filter(None, pod(), node("a", **{"example.com/maintenance": "true"}))
    assert (status.code, status.message()) == (Code.UNSCHEDULABLE, REASON)
    assert plugin.filter(None, pod(), node("b")) is None
    assert plugin.filter(None, pod(**{"example.com/maintenance": "true"}),
                         node("a", **{"example.com/maintenance": "true"})) is None


def test_score_reads_the_preference_label_within_range():
    plugin = Maintenance({"preferenceLabel": "rank"}, None)
    assert [plugin.score(None, pod(), node("n", rank=v)) for v in ("70", "300", "-4", "x")] == [70, 100, 0, 0]
    assert plugin.score(None, pod(), node("n")) == 0


@pytest.mark.parametrize("args, field", [({"maintenanceLable": "x"}, "maintenanceLable"),
                                         ({"preferenceLabel": ""}, "preferenceLabel")])
def test_bad_args_name_the_field(args, field):
    with pytest.raises(PluginArgsError) as err:
        Maintenance(args, None)
    assert err.value.field == field
