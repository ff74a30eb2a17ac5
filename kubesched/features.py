"""--feature-gates: checked as kube-scheduler v1.37 checks it, honoured where kubesched has the feature.

Every gate kube-scheduler knows (kube_features.py, generated from its source) is accepted; a
value kube-scheduler refuses (an unknown gate, a gate locked to its default, a gate whose
dependencies are off, another component than ``kube``) is refused with kube-scheduler's own
message. Of the accepted gates kubesched honours those in HONOURED; every other one keeps
kubesched at v1.37's default behaviour, and start-up says so in one warning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from kubesched.kube_features import DEPENDENCIES, KNOWN, PRE_ALPHA

# name -> default in v1.37 (pkg/features/kube_features.go)
HONOURED: dict[str, bool] = {
    "OpportunisticBatching": True,  # beta since 1.35
    "GenericWorkload": False,  # beta in 1.37, off by default: gang scheduling (PodGroups)
    "SchedulerAsyncPreemption": True,  # beta since 1.33: victims evicted in the background
}
KUBE_COMPONENT = "kube"
GA, DEPRECATED, ALPHA, BETA = "", "DEPRECATED", "ALPHA", "BETA"


class FeatureGateError(ValueError):
    """A --feature-gates value kube-scheduler refuses; the message is kube-scheduler's, and logs
    the lines it wrote about the gates it had set before it gave up, as (message, fields)."""

    def __init__(self, message: str, logs: list[tuple[str, dict]] | None = None):
        super().__init__(message)
        self.logs = logs or []


@dataclass
class FeatureGates:
    """What --feature-gates set: the gates named (explicitly), every gate that differs from its
    default as a result (AllAlpha and AllBeta set the others of their stage), and the lines
    kube-scheduler logs about them, as (message, fields)."""

    explicit: dict[str, bool] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)
    logs: list[tuple[str, dict]] = field(default_factory=list)


def resolve(overrides: dict[str, bool] | None) -> dict[str, bool]:
    """The honoured gates, each at its default unless the command line set it."""
    return {name: (overrides or {}).get(name, default) for name, default in HONOURED.items()}


def ignored(overrides: dict[str, bool] | None) -> list[str]:
    """The gates a command line set that kubesched does not honour."""
    return sorted(set(overrides or {}) - set(HONOURED))


def parse_feature_gates(values: Iterable[str]) -> FeatureGates:
    """Every --feature-gates value, in order, as kube-scheduler applies them (ComponentGlobalsRegistry.Set,
    then featureGate.Set and SetFromMap). Raises FeatureGateError with kube-scheduler's message."""
    by_component: dict[str, list[str]] = {}
    for value in values:  # ColonSeparatedMultimapStringString, with a default empty component
        for pair in value.split(","):
            if not pair:
                continue
            component, sep, item = pair.partition(":")
            key, item = (component.strip(), item.strip()) if sep else ("", component.strip())
            by_component.setdefault(key, []).append(item)
    for component in sorted(by_component):
        if component not in ("", KUBE_COMPONENT):
            raise FeatureGateError(f"component not registered: {component}")
    if "" in by_component and KUBE_COMPONENT in by_component:
        raise FeatureGateError("set kube feature gates with default empty prefix or kube: prefix consistently, "
                               "do not mix use")
    items = by_component.get("", []) + by_component.get(KUBE_COMPONENT, [])
    requested: dict[str, bool] = {}
    for item in ",".join(items).split(","):
        if not item:
            continue
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {key}")
        text = text.strip()
        if text not in _GO_BOOLS:
            raise FeatureGateError(f"invalid value of {key}={text}, err: strconv.ParseBool: parsing "
                                   f"{json.dumps(text)}: invalid syntax")
        requested[key] = _GO_BOOLS[text]
    return _set_from_map(requested)


# strconv.ParseBool
_GO_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
             **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


def _set_from_map(requested: dict[str, bool]) -> FeatureGates:
    """featureGate.unsafeSetFromMap. Go walks the map in random order; where that order shows
    (several unknown gates, several errors), kubesched takes command-line order."""
    unknown = next((name for name in requested if name not in KNOWN and name not in PRE_ALPHA), None)
    if unknown is not None:
        raise FeatureGateError(f"unrecognized feature gate: {unknown}")
    enabled: dict[str, bool] = {}
    errors: list[str] = []
    logs: list[tuple[str, dict]] = []
    for name, value in requested.items():
        if name in PRE_ALPHA:
            errors.append(f"cannot set feature gate {name} to {_go_bool(value)}, feature is PreAlpha at emulated "
                          "version 1.37, min compatibility version 1.36")
            continue
        default, locked, stage = KNOWN[name]
        if locked and value != default:
            errors.append(f"cannot set feature gate {name} to {_go_bool(value)}, feature is locked to "
                          f"{_go_bool(default)}")
            continue
        enabled[name] = value
        if stage in (DEPRECATED, GA) and name not in ("AllAlpha", "AllBeta"):
            kind = "deprecated" if stage == DEPRECATED else "GA"
            logs.append((f"Warning: setting {kind} feature gate. It will be removed in a future release.",
                         {"featureGate": name, "value": value}))
    if errors:
        raise FeatureGateError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]", logs)
    for special, stage in (("AllAlpha", ALPHA), ("AllBeta", BETA)):  # fill what was not set explicitly
        if special in enabled:
            for name, (_default, _locked, gate_stage) in KNOWN.items():
                if gate_stage == stage and name not in ("AllAlpha", "AllBeta"):
                    enabled.setdefault(name, enabled[special])

    def is_enabled(name: str) -> bool:
        return enabled[name] if name in enabled else KNOWN[name][0]

    missing = [f"{name} is enabled, but depends on features that are disabled: "
               f"[{' '.join(dep for dep in deps if not is_enabled(dep))}]"
               for name, deps in DEPENDENCIES.items() if is_enabled(name) and not all(map(is_enabled, deps))]
    if missing:
        raise FeatureGateError(missing[0] if len(missing) == 1 else "[" + ", ".join(missing) + "]", logs)
    return FeatureGates(explicit=dict(requested), enabled=enabled, logs=logs)


def _go_bool(value: bool) -> str:
    return "true" if value else "false"
