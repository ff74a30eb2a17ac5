"""The decoded configuration, with upstream's v1 defaults applied.

Field names are snake_case here; the file uses upstream's camelCase names, and every error
message names the camelCase path the user wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Extension points in the order upstream's framework lists them (getExtensionPoints).
EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore",
                    "score", "reserve", "permit", "preBind", "bind", "postBind")

# The plugin method that makes a plugin implement an extension point.
EXTENSION_POINT_METHODS = {
    "preEnqueue": "pre_enqueue", "queueSort": "less", "preFilter": "pre_filter",
    "filter": "filter", "postFilter": "post_filter", "preScore": "pre_score", "score": "score",
    "reserve": "reserve", "permit": "permit", "preBind": "pre_bind", "bind": "bind",
    "postBind": "post_bind",
}


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string ("15s", "1m30s", "500ms"), as time.ParseDuration reads it."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(s):
        raise ValueError(f"invalid duration {text!r} (use a Go duration such as 15s, 1m30s or 500ms)")
    return sign * total


@dataclass
class PluginRef:
    name: str
    weight: int = 0


@dataclass
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[PluginRef] = field(default_factory=list)


@dataclass
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    percentage_of_nodes_to_score: int | None = None
    # Extension point name ("multiPoint", "filter", ...) -> the set after merging the defaults.
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    # Plugin name -> raw args dict, and where it came from for error messages.
    plugin_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    plugin_config_paths: dict[str, str] = field(default_factory=dict)
    path: str = "profiles[0]"


@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass
class ClientConnection:
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = 100
    content_type: str = "application/vnd.kubernetes.protobuf"
    accept_content_types: str = ""


@dataclass
class KubeSchedulerConfiguration:
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    delay_cache_until_active: bool = False
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    profiles: list[Profile] = field(default_factory=list)
    source: str = ""
