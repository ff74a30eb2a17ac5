"""The collection tarball carries the product and nothing else: built with ansible-galaxy from
the working tree, as a release would be (conftest.py), and its file list checked."""

from __future__ import annotations

# What a user of the collection gets: the product, its documentation and its identity.
PRODUCT = {"roles", "plugins", "playbooks", "kubesched", "pyproject.toml", "docs", "meta", "README.md",
           "LICENSE", "changelogs", "CHANGELOG.rst", "inventories", "examples", "MANIFEST.json", "FILES.json"}
USER_PLAYBOOKS = {"playbooks/site.yml", "playbooks/verify.yml", "playbooks/remove.yml"}
MUST_SHIP = {"plugins/modules/node_taint.py", "plugins/module_utils/k8s_client.py",
             "plugins/doc_fragments/k8s_auth.py", "roles/scheduler/tasks/main.yml",
             "roles/scheduler/meta/argument_specs.yml", "kubesched/scheduler.py", "kubesched/schedule_one.py",
             "pyproject.toml", "meta/runtime.yml", "docs/user-guide.md", "inventories/example/hosts.yml",
             "changelogs/changelog.yaml", "CHANGELOG.rst", "examples/project/requirements.yml", "LICENSE",
             "README.md", "examples/kubesched-plugin-example/pyproject.toml", "meta/execution-environment.yml"}
# About the checkout, its harnesses and what they measured: they stay with them.
CHECKOUT_DOCS = {"docs/development.md", "docs/performance.md", "docs/reliability.md"}


def test_the_product_ships(shipped):
    assert MUST_SHIP <= set(shipped), f"missing from the tarball: {sorted(MUST_SHIP - set(shipped))}"
    assert {n for n in shipped if n.startswith("playbooks/")} == USER_PLAYBOOKS


def test_nothing_but_the_product_ships(shipped):
    assert {n.split("/", 1)[0] for n in shipped} <= PRODUCT
    assert [n for n in shipped if n.startswith("inventories/") and not n.startswith("inventories/example/")] == []
    assert CHECKOUT_DOCS & set(shipped) == set()
    harness = [n for n in shipped if n.endswith((".png", ".pyc", ".tar.gz")) or "__pycache__" in n
               or "/molecule/" in n or "egg-info" in n or (n.endswith(".json") and "/" in n)]
    assert harness == []
