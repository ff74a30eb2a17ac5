"""The `kubesched.plugins` entry points by name, read from installed distributions' metadata
without importing them: what the configuration needs to know which plugin names exist.
Loading them is plugins/outoftree.py's job.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

ENTRY_POINT_GROUP = "kubesched.plugins"
HOW_TO_REGISTER = (f'declare it in a distribution\'s pyproject.toml under [project.entry-points."{ENTRY_POINT_GROUP}"] '
                   '(Name = "package.module:Class"), pip install it into kubesched\'s environment, and see '
                   "docs/plugins.md")


@functools.lru_cache(maxsize=None)
def entry_points() -> tuple[Any, ...]:
    """The installed entry points of the group, without importing them; read once per process
    (a scan of every installed distribution's metadata costs tens of milliseconds)."""
    from importlib import metadata

    if sys.version_info >= (3, 10):
        return tuple(metadata.entry_points(group=ENTRY_POINT_GROUP))
    return tuple(metadata.entry_points().get(ENTRY_POINT_GROUP, ()))  # pragma: no cover - Python 3.9


def describe(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    where = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"{ep.name} = {ep.value}{where}"


def entry_point_names() -> frozenset[str]:
    """The names installed entry points offer, read from metadata without importing them."""
    return frozenset(ep.name for ep in entry_points())


def unknown_plugin_message(name: str, known: frozenset[str] | set[str]) -> str:
    """What to say about a plugin name nobody provides."""
    installed = entry_points()
    offered = {ep.name for ep in installed}
    in_tree = sorted(n for n in known if n not in offered)
    return (f"unknown plugin {name!r}; in-tree plugins: {', '.join(in_tree)}; out-of-tree plugins "
            f"(entry points in group {ENTRY_POINT_GROUP}): "
            f"{', '.join(sorted(describe(ep) for ep in installed)) or 'none installed'}. "
            f"To add {name!r}, {HOW_TO_REGISTER}")
