import pytest
from kubesched_fakes import FAKE_DEFAULT_PLUGINS, FAKE_REGISTRY


@pytest.fixture
def fake_registry(monkeypatch):
    """Make the config loader know the fake plugins by name; the scheduler gets their classes."""
    from kubesched.config import load

    queue_sort = frozenset(name for name, cls in FAKE_REGISTRY.items() if hasattr(cls, "less"))
    monkeypatch.setattr(load, "_plugin_names", lambda: (frozenset(FAKE_REGISTRY), FAKE_DEFAULT_PLUGINS, queue_sort))
    return FAKE_REGISTRY
