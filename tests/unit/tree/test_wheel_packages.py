"""kubesched's wheel carries every package: setuptools finds only directories with an
__init__.py (pyproject.toml, namespaces = false, because the collection links loop back to
the checkout), so a package directory without one would be left out of the masters' venvs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_every_kubesched_directory_with_python_files_is_a_package():
    missing = [str(d.relative_to(ROOT)) for d in (ROOT / "kubesched").rglob("*")
               if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert missing == [], f"add an __init__.py to {missing}: setuptools would leave them out of the wheel"
