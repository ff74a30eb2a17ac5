from ansible_collections.kubesched.scheduler.plugins.modules import node_label

from ..fake_kube import FakeKubeApi, make_node
from .module_runner import run_main


def test_sets_and_removes_labels(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a", labels={"old": "x"})])
    result = run_main(node_label, capsys, monkeypatch, api, name="a", labels={"color": "blue"})
    assert result["changed"] is True
    assert result["nodes"] == [{"name": "a", "labels": {"old": "x", "color": "blue"}}]
    removed = run_main(node_label, capsys, monkeypatch, api, name="a", state="absent", labels=["old", "missing"])
    assert removed["diff"][0] == {"before_header": "node/a", "after_header": "node/a",
                                  "before": {"labels": {"old": "x", "color": "blue"}},
                                  "after": {"labels": {"color": "blue"}}}


def test_bad_label_fails_naming_it(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a")])
    result = run_main(node_label, capsys, monkeypatch, api, name="a", labels={"on": True})
    assert result["failed"] is True
    assert result["msg"].startswith("labels['on']: the value is the boolean True")
    assert api.writes == [] and api.dry_runs == []
