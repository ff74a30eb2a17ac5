from ansible_collections.kubesched.scheduler.plugins.modules import priority_class

from ..fake_kube import FakeKubeApi
from .module_runner import run_main


def test_creates_and_returns_the_class(capsys, monkeypatch):
    api = FakeKubeApi()
    result = run_main(priority_class, capsys, monkeypatch, api, name="high-priority", value=1000000)
    assert result["changed"] is True and result["recreated"] is False
    assert result["priority_class"]["value"] == 1000000
    assert result["diff"]["before"] == {}


def test_value_is_required_when_present(capsys, monkeypatch):
    result = run_main(priority_class, capsys, monkeypatch, FakeKubeApi(), name="high-priority")
    assert result["failed"] is True and "state is present but all of the following are missing: value" in result["msg"]


def test_reserved_name_fails_before_any_call(capsys, monkeypatch):
    api = FakeKubeApi()
    result = run_main(priority_class, capsys, monkeypatch, api, name="system-mine", value=1)
    assert result["failed"] is True and "reserved" in result["msg"]
    assert api.dry_runs == []
