"""What runs on the masters runs on their oldest Python, 3.9 (requires-python): kubesched's
package and the collection's modules parse as 3.9 parses them (no match statement, no
parenthesized context managers), and no ``X | Y`` type union is evaluated at run time (3.10+):
only inside annotations, which ``from __future__ import annotations`` keeps as strings.
kubesched failed to start on a Python 3.9 master once for one module-level alias."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(p for top in ("kubesched", "plugins") for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)
TYPE_NAMES = {"list", "dict", "tuple", "set", "frozenset", "type", "Callable", "Optional", "Union", "Any"}


def annotation_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside an annotation (arguments, returns, annotated assignments)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        roots = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        for root in roots:
            inside.update(id(n) for n in ast.walk(root))
    return inside


def is_type(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id in TYPE_NAMES


def runtime_unions(source: str) -> list[int]:
    tree = ast.parse(source)
    annotations = annotation_nodes(tree)
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and id(node) not in annotations
            and (is_type(node.left) or is_type(node.right))]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_parses_as_python_3_9_and_evaluates_no_type_union(path):
    source = path.read_text()
    ast.parse(source, feature_version=(3, 9))
    assert runtime_unions(source) == [], f"{path.relative_to(ROOT)}: X | Y evaluated at run time needs Python 3.10"


def test_the_check_finds_a_module_level_union_and_leaves_annotations_alone():
    assert runtime_unions("Fragments = list[tuple[str, int]] | None\n") == [1]
    assert runtime_unions("def f(x: int | None) -> list[int] | None:\n    y: dict | None = None\n") == []
    assert runtime_unions("flags = 1 | 2\n") == []
