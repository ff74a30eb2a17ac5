"""The feature gates kubesched honours (--feature-gates), at kube-scheduler v1.37's defaults.
Every other gate kube-scheduler knows is accepted and ignored: kubesched behaves as v1.37
with that gate at its default."""

from __future__ import annotations

# name -> default in v1.37 (pkg/features/kube_features.go)
HONOURED: dict[str, bool] = {
    "OpportunisticBatching": True,  # beta since 1.35
}


def resolve(overrides: dict[str, bool] | None) -> dict[str, bool]:
    """The honoured gates, each at its default unless the command line set it."""
    return {name: (overrides or {}).get(name, default) for name, default in HONOURED.items()}


def ignored(overrides: dict[str, bool] | None) -> list[str]:
    """The gates a command line set that kubesched does not honour."""
    return sorted(set(overrides or {}) - set(HONOURED))
