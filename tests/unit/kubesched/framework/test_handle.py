"""The Handle: what docs/scheduler.md tells plugin authors it provides is there, on the null
handle and on a profile's Framework, and every in-tree plugin is built from the null handle."""

import re
from pathlib import Path

import pytest

from kubesched.config import parse_config
from kubesched.framework.handle import Handle
from kubesched.framework.runtime import Framework
from kubesched.plugins.registry import REGISTRY

DOCS = Path(__file__).resolve().parents[4] / "docs" / "scheduler.md"


def documented() -> set[str]:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## For plugin authors: the handle"):]
    section = section[:section.index("\n## ", 1)]
    return set(re.findall(r"`handle\.(\w+)", section))


def test_the_documentation_names_what_a_handle_has():
    names = documented()
    assert {"snapshot", "informers", "volumes", "dra", "client", "run_filter_plugins_with_nominated_pods"} <= names
    framework = Framework(parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                        "kind": "KubeSchedulerConfiguration"}).profiles[0], REGISTRY)
    for handle in (Handle(), framework):
        missing = sorted(name for name in names if not hasattr(handle, name))
        assert not missing, f"{type(handle).__name__} lacks {missing}"


def test_the_null_handle_has_no_client_and_empty_informers():
    handle = Handle()
    assert handle.client is None and handle.snapshot().num_nodes() == 0
    assert handle.informers.list("pods") == [] and handle.volumes.pv("any") is None
    assert handle.dra.get_claim("default", "any") is None and handle.get_waiting_pod("uid") is None


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_in_tree_plugin_is_built_from_the_null_handle(name):
    assert REGISTRY[name](None, Handle()).name == name
