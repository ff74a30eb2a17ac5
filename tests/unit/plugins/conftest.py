"""Make the collection importable as ansible_collections.kubesched.scheduler for plain pytest.

ansible-test puts the collection on the path itself; a plain `pytest tests/unit` from the
checkout imports it through the committed link collections/ansible_collections/kubesched/scheduler.
"""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _make_collection_importable():
    collections_path = os.path.join(REPO_ROOT, "collections")
    if collections_path not in sys.path:
        sys.path.insert(0, collections_path)


_make_collection_importable()
