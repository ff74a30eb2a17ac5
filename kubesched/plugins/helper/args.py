"""pluginConfig args: decoded strictly, with errors that name the field to fix."""

from __future__ import annotations

from typing import Any, Iterable

from kubesched.framework.interface import PluginArgsError


def check_known_fields(args: dict, known: Iterable[str], path: str = "") -> None:
    """Reject fields the args type does not define, as the strict decoder does."""
    known = set(known)
    for key in args:
        if key not in known and key not in ("apiVersion", "kind"):
            raise PluginArgsError(f"{path}{key}", f"unknown field {key!r}; valid fields: {', '.join(sorted(known))}")


def int_arg(args: dict, key: str, default: int, path: str = "") -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise PluginArgsError(f"{path}{key}", f"must be an integer, got {value!r}")
    return value


def list_arg(args: dict, key: str, path: str = "") -> list:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise PluginArgsError(f"{path}{key}", f"must be a list, got {type(value).__name__}")
    return value


def dict_arg(args: dict, key: str, path: str = "") -> dict | None:
    value = args.get(key)
    if value is not None and not isinstance(value, dict):
        raise PluginArgsError(f"{path}{key}", f"must be a mapping, got {type(value).__name__}")
    return value


def args_dict(args: Any, plugin: str) -> dict:
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise PluginArgsError("", f"{plugin} args must be a mapping, got {type(args).__name__}")
    return args


def resource_specs(raw: list, path: str) -> list[tuple[str, int]]:
    """[{name, weight}] with weight 0 or unset defaulted to 1, as SetDefaults_* does."""
    specs = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise PluginArgsError(f"{path}[{i}]", "must be a mapping with name and weight")
        check_known_fields(item, ("name", "weight"), f"{path}[{i}].")
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise PluginArgsError(f"{path}[{i}].name", "must be a resource name such as cpu or memory")
        weight = int_arg(item, "weight", 0, f"{path}[{i}].")
        specs.append((name, weight or 1))
    return specs
