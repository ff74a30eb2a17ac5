import pytest
from kubesched_fakes import FAKE_DEFAULT_PLUGINS, FAKE_REGISTRY


@pytest.fixture
def fake_registry(monkeypatch):
    """Make the config loader and the scheduler use the fake plugins."""
    from kubesched.config import load

    monkeypatch.setattr(load, "_plugin_registry", lambda: (FAKE_REGISTRY, FAKE_DEFAULT_PLUGINS))
    return FAKE_REGISTRY
