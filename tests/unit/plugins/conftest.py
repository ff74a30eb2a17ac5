"""Make the collection importable as ansible_collections.kubesched.scheduler for plain pytest.

ansible-test puts the collection on the path itself; a plain `pytest tests/unit` from the
checkout relies on the git-ignored link ansible_collections/kubesched/scheduler -> the
checkout, which `make setup` creates (and which is created here if it is missing).
"""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _make_collection_importable():
    link = os.path.join(REPO_ROOT, "ansible_collections", "kubesched", "scheduler")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO_ROOT, link)
    if REPO_ROOT not in sys.path:
        sys.path.insert(0, REPO_ROOT)


_make_collection_importable()
