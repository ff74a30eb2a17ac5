from ansible_collections.kubesched.scheduler.plugins.modules import node_cordon

from ..fake_kube import FakeKubeApi, make_node
from .module_runner import run_main


def test_cordon_then_uncordon(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a"), make_node("b", unschedulable=True)])
    result = run_main(node_cordon, capsys, monkeypatch, api, name=["a", "b"])
    assert result["changed"] is True
    assert result["nodes"] == [{"name": "a", "unschedulable": True}, {"name": "b", "unschedulable": True}]
    assert api.writes == [("node", "a")]
    result = run_main(node_cordon, capsys, monkeypatch, api, name=["a", "b"], state="uncordoned")
    assert [entry["after"] for entry in result["diff"]] == [{"unschedulable": False}, {"unschedulable": False}]


def test_bad_state_lists_the_choices(capsys, monkeypatch):
    result = run_main(node_cordon, capsys, monkeypatch, FakeKubeApi([make_node("a")]), name="a", state="drained")
    assert result["failed"] is True
    assert "value of state must be one of: cordoned, uncordoned, got: drained" in result["msg"]
