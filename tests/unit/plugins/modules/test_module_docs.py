import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def test_module_reference_in_docs_is_up_to_date():
    completed = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "hack", "gen-module-docs.py"), "--check"],
                               capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr


def test_every_module_has_a_page():
    modules = sorted(name[:-3] for name in os.listdir(os.path.join(REPO_ROOT, "plugins", "modules"))
                     if name.endswith(".py"))
    assert modules == ["node_cordon", "node_label", "node_taint", "priority_class"]
    for module in modules:
        assert os.path.exists(os.path.join(REPO_ROOT, "docs", "modules", module + ".md"))
