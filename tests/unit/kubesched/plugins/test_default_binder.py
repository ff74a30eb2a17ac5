from plugin_builders import FakeHandle, make_pod

from kubesched.framework.interface import Code, CycleState
from kubesched.plugins.default_binder import DefaultBinder


def test_bind_posts_a_binding_for_the_pod():
    handle = FakeHandle()
    pod = make_pod("web", "ns1", uid="u1")
    assert DefaultBinder(None, handle).bind(CycleState(), pod, "node1") is None
    assert handle.client.binds == [("ns1/web", "node1", "u1")]


def test_bind_failure_is_an_error_status():
    handle = FakeHandle()
    handle.client.fail("bind", RuntimeError("conflict: pod already bound"))
    status = DefaultBinder(None, handle).bind(CycleState(), make_pod(), "node1")
    assert status.code == Code.ERROR and status.plugin == "DefaultBinder"
    assert "already bound" in status.message()
