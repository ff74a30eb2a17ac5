from ansible_collections.kubesched.scheduler.plugins.modules import node_taint

from ..fake_kube import FakeKubeApi, make_node, make_pod
from .module_runner import run_main


def test_reports_nodes_evictions_and_diff(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a")], pods=[make_pod("victim", "a")])
    result = run_main(node_taint, capsys, monkeypatch, api, check_mode=True, name="a", taints=["drain:NoExecute"])
    assert result["changed"] is True
    assert result["nodes"] == [{"name": "a", "taints": [{"key": "drain", "effect": "NoExecute"}]}]
    assert result["evictions"][0]["pods"] == [{"namespace": "default", "name": "victim", "evicted_after_seconds": 0}]
    assert result["diff"][0]["before"] == {"taints": []}
    assert api.writes == []


def test_no_diff_key_without_diff_mode(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a")])
    result = run_main(node_taint, capsys, monkeypatch, api, diff=False, name="a", taints=["x:NoSchedule"])
    assert "diff" not in result and result["changed"] is True


def test_exclusive_with_absent_fails_before_any_call(capsys, monkeypatch):
    api = FakeKubeApi([make_node("a")])
    result = run_main(node_taint, capsys, monkeypatch, api, name="a", state="absent", exclusive=True, taints=["x"])
    assert result["failed"] is True
    assert result["msg"] == "exclusive: true only applies to state: present; drop exclusive or use state: present"


def test_name_and_selector_are_mutually_exclusive(capsys, monkeypatch):
    result = run_main(node_taint, capsys, monkeypatch, FakeKubeApi(), name="a", label_selector="x", taints=[])
    assert result["failed"] is True and "mutually exclusive: name|label_selector" in result["msg"]


def test_selector_matching_nothing_warns(capsys, monkeypatch):
    result = run_main(node_taint, capsys, monkeypatch, FakeKubeApi([make_node("a")]), label_selector="color=none",
                      taints=["x:NoSchedule"])
    assert result["changed"] is False and result["nodes"] == []
    assert "matched no nodes" in str(result["warnings"])


def test_kubeconfig_credentials_stay_masked_but_its_other_words_do_not(capsys, monkeypatch):
    result = run_main(node_taint, capsys, monkeypatch, FakeKubeApi([make_node("a")]), name="ghost",
                      taints=["x:NoSchedule"])
    assert result["failed"] is True
    assert "node 'ghost' not found on the API server at https://fake.invalid:6443" in result["msg"]
    assert "a-long-fake-bearer-token" not in str(result)
    assert result["invocation"]["module_args"]["kubeconfig"]["clusters"][0]["name"] == "fake"
