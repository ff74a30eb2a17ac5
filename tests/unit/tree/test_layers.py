"""kubesched's layers, lowest first: a module may import its own part of the tree, and parts
of the layers below it; never a layer above, nor a sibling part of its own layer. Imports
inside functions and under TYPE_CHECKING count: a rule that holds only because an import
hides in a function does not hold. docs/architecture.md draws the same layers.

The product never imports a harness: kubesched and the collection's plugins import nothing
from lab/ or tests/, and lab/ nothing from tests/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_import_cycles import import_graph, module_files, write_modules

# Each layer is a tuple of parts; a part is one module, or a package with ".*" (the package
# and everything under it). A module belongs to the most specific part naming it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # what every part uses: logs, JSON, the collector's settings, TLS from memory, the gate list,
    # worker threads
    ("kubesched", "kubesched.klog", "kubesched.jsoncodec", "kubesched.gctuning", "kubesched.transport",
     "kubesched.kube_features", "kubesched.process_collector", "kubesched.workers"),
    ("kubesched.metrics", "kubesched.features"),  # the registry and feature gates
    ("kubesched.restclient_metrics",),   # the client's metrics, in that registry
    ("kubesched.client",),               # the API client
    ("kubesched.api.*",),                # the API's own rules: selectors, node affinity, taints, names
    ("kubesched.config.*",),             # KubeSchedulerConfiguration, the default plugin set by name
    ("kubesched.framework.*",),          # extension points, statuses, PodInfo/NodeInfo, snapshot, signers
    ("kubesched.dra.*",),                # the DRA library: allocator, CEL, the DRA manager's state
    ("kubesched.backend.*",),            # informers, cache, queue, storage objects
    # what the scheduler talks to beside the API objects
    ("kubesched.extender", "kubesched.events", "kubesched.leaderelection", "kubesched.auth"),
    ("kubesched.server", "kubesched.apiproc"),
    ("kubesched.framework.handle",),     # what plugins are given
    # the runtime runs plugins it is handed by name, never importing one
    ("kubesched.framework.runtime", "kubesched.plugins.*"),
    ("kubesched.eventhandlers", "kubesched.schedule_one"),  # the informer side and the cycle, siblings
    ("kubesched.scheduler",),            # the assembly
    ("kubesched.explain", "kubesched.whatif", "kubesched.flags", "kubesched.backend.debugger"),  # tools over a scheduler
    ("kubesched.cli",),
)

PRODUCT = ("kubesched", "ansible_collections.kubesched.scheduler.plugins")
HARNESSES = ("lab", "tests.bench", "tests.reliability")


def part_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> tuple[int, str] | None:
    """(layer index, part) of the most specific part naming module, or None."""
    best: tuple[int, int, str] | None = None
    for index, parts in enumerate(layers):
        for part in parts:
            if part.endswith(".*"):
                package = part[:-2]
                if module != package and not module.startswith(package + "."):
                    continue
                specificity = package.count(".") * 2
            elif module == part:
                specificity = part.count(".") * 2 + 1
            else:
                continue
            if best is None or specificity > best[1]:
                best = (index, specificity, part)
    return (best[0], best[2]) if best is not None else None


def violations(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        own = part_of(module, layers)
        if own is None:
            continue
        for target in sorted(targets):
            other = part_of(target, layers)
            if other is None or other[1] == own[1] or other[0] < own[0]:
                continue
            where = "a sibling in its own layer" if other[0] == own[0] else f"layer {other[0]}, above its {own[0]}"
            found.append(f"{module} ({own[1]}) imports {target} ({other[1]}: {where})")
    return found


def test_every_kubesched_module_has_a_layer():
    unplaced = [m for m in module_files() if m.split(".")[0] == "kubesched" and part_of(m) is None]
    assert not unplaced, f"add these to LAYERS (and docs/architecture.md): {unplaced}"


def test_kubesched_imports_run_downward_only():
    found = violations(import_graph(module_files()))
    assert not found, "imports that run back up:\n" + "\n".join(found)


def test_the_product_imports_no_harness():
    graph = import_graph(module_files())
    found = [f"{module} imports {target}" for module, targets in sorted(graph.items())
             if module.startswith(PRODUCT) for target in sorted(targets) if target.startswith(HARNESSES)]
    found += [f"{module} imports {target}" for module, targets in sorted(graph.items())
              if module.startswith("lab") for target in sorted(targets) if target.startswith("tests")]
    assert not found, "\n".join(found)


def test_the_architecture_document_names_every_layer():
    text = (Path(__file__).resolve().parents[3] / "docs" / "architecture.md").read_text(encoding="utf-8")
    for parts in LAYERS:
        for part in parts:
            name = part.removesuffix(".*").removeprefix("kubesched.").replace(".", "/")
            if name != "kubesched":
                assert name in text, f"docs/architecture.md's layers do not name {name}"


@pytest.mark.parametrize("layers, source, found", [
    # A function-level import runs back up as surely as a module-level one.
    ([("low",), ("high",)], {"low": "def f():\n    import high\n", "high": ""},
     ["low (low) imports high (high: layer 1, above its 0)"]),
    # Siblings of one layer stay apart; a part's own modules do not.
    ([("pkg.*", "side")], {"pkg": "", "pkg.a": "from pkg import b", "pkg.b": "", "side": "import pkg.a"},
     ["side (side) imports pkg (pkg.*: a sibling in its own layer)",
      "side (side) imports pkg.a (pkg.*: a sibling in its own layer)"]),
    # An exact part inside a package is its own part, above the package.
    ([("pkg.*",), ("pkg.top",)], {"pkg": "", "pkg.core": "", "pkg.top": "import pkg.core",
                                  "pkg.leaf": "from pkg import top"},
     ["pkg.leaf (pkg.*) imports pkg.top (pkg.top: layer 1, above its 0)"]),
])
def test_upward_and_sideways_imports_are_found(tmp_path, layers, source, found):
    assert violations(import_graph(write_modules(tmp_path, source)), layers) == found
