"""No import cycle anywhere in the tree: kubesched, the collection's plugins, the lab and
the harnesses under tests/. Imports inside functions and under TYPE_CHECKING count too: a
cycle a function-level import hides still ties two modules together.

The graph is read from the source with ast, nothing is imported. A module that imports
a.b.c also runs the packages a and a.b that it is not itself part of, so those count as
edges as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Where the packages live, and the name Python imports each one by.
PACKAGES = {
    "kubesched": "kubesched",
    "plugins": "ansible_collections.kubesched.scheduler.plugins",
    "lab": "lab",
    "tests/bench": "tests.bench",
    "tests/reliability": "tests.reliability",
}


def module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for folder, dotted in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((dotted, *parts))] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name module imports, at any depth of the file, relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        own = {module.rsplit(".", i)[0] for i in range(module.count(".") + 1)}
        targets: set[str] = set()
        for name in imported_names(module, path):
            parts = name.split(".")
            # The module itself and the packages above it that the importer is not inside.
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix not in own:
                    targets.add(prefix)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_the_tree():
    graph = import_graph(module_files())
    assert "kubesched.schedule_one" in graph["kubesched.scheduler"]
    assert "kubesched.config.default_plugins" in graph["kubesched.config.load"]
    assert "ansible_collections.kubesched.scheduler.plugins.module_utils.errors" in \
        graph["ansible_collections.kubesched.scheduler.plugins.modules.node_taint"]
    assert "lab.pod_watch" in graph["tests.bench.runner"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph(module_files()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("source, cycle", [
    ({"a": "from b import x", "b": "def f():\n    import a\n"}, ["a", "b", "a"]),
    ({"a": "from . import b", "a.b": "from .. import a"}, None),  # a package and its own child
    ({"a": "", "a.b": "import c", "c": "from a.b import y"}, ["a.b", "c", "a.b"]),
])
def test_cycles_are_found_through_function_level_and_relative_imports(tmp_path, source, cycle):
    assert find_cycle(import_graph(write_modules(tmp_path, source))) == cycle


def write_modules(tmp_path: Path, source: dict[str, str]) -> dict[str, Path]:
    """Module name -> text written as files under tmp_path; name -> path."""
    modules = {}
    for name, text in source.items():
        is_package = any(other.startswith(name + ".") for other in source)
        path = tmp_path / (name.replace(".", "/") + ("/__init__.py" if is_package else ".py"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules[name] = path
    return modules
