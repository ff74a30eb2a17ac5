"""Read a KubeSchedulerConfiguration file strictly, apply upstream's v1 defaults, validate.

Every problem is reported as ConfigError with the camelCase field path the user wrote
(e.g. ``profiles[1].plugins.score.enabled[0].weight``), so the one-line error says exactly
what to fix. Nothing here contacts the cluster.
"""

from __future__ import annotations

from typing import Any

import yaml

from kubesched.config import default_plugins
from kubesched.config.entrypoints import entry_point_names, unknown_plugin_message
from kubesched.config.types import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    KIND,
    ClientConnection,
    KubeSchedulerConfiguration,
    LeaderElection,
    PluginRef,
    PluginSet,
    Profile,
    parse_duration,
)

# Upstream's MaxTotalScore is math.MaxInt64; a weight times MaxNodeScore must stay below it.
MAX_WEIGHT = (2**63 - 1) // 100


class ConfigError(ValueError):
    """One problem in the configuration, at field path ``field``."""

    def __init__(self, field: str, message: str, source: str = ""):
        self.field = field
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {message}" if field else f"{where}{message}")


# ---------------------------------------------------------------------------------------------
# Strict decoding: a schema is a dict of camelCase field -> type, where a type is one of the
# scalar names below, a nested schema dict, ("list", type) or "any" (kept as decoded YAML).
# ---------------------------------------------------------------------------------------------

_PLUGIN = {"name": "str", "weight": "int"}
_PLUGIN_SET = {"enabled": ("list", _PLUGIN), "disabled": ("list", _PLUGIN)}
_PLUGINS = {point: _PLUGIN_SET for point in ("multiPoint", *EXTENSION_POINTS)}
_PROFILE = {
    "schedulerName": "str",
    "percentageOfNodesToScore": "int",
    "plugins": _PLUGINS,
    "pluginConfig": ("list", {"name": "str", "args": "any"}),
}
_EXTENDER_TLS = {"insecure": "bool", "serverName": "str", "certFile": "str", "keyFile": "str",
                 "caFile": "str", "certData": "str", "keyData": "str", "caData": "str"}
_EXTENDER = {
    "urlPrefix": "str", "filterVerb": "str", "preemptVerb": "str", "prioritizeVerb": "str",
    "weight": "int", "bindVerb": "str", "enableHTTPS": "bool", "tlsConfig": _EXTENDER_TLS,
    "httpTimeout": "duration", "nodeCacheCapable": "bool",
    "managedResources": ("list", {"name": "str", "ignoredByScheduler": "bool"}),
    "ignorable": "bool",
}
_SCHEMA = {
    "apiVersion": "str",
    "kind": "str",
    "parallelism": "int",
    "leaderElection": {
        "leaderElect": "bool", "leaseDuration": "duration", "renewDeadline": "duration",
        "retryPeriod": "duration", "resourceLock": "str", "resourceName": "str",
        "resourceNamespace": "str",
    },
    "clientConnection": {
        "kubeconfig": "str", "acceptContentTypes": "str", "contentType": "str",
        "qps": "float", "burst": "int",
    },
    "enableProfiling": "bool",
    "enableContentionProfiling": "bool",
    "percentageOfNodesToScore": "int",
    "podInitialBackoffSeconds": "int",
    "podMaxBackoffSeconds": "int",
    "profiles": ("list", _PROFILE),
    "extenders": ("list", _EXTENDER),
    "delayCacheUntilActive": "bool",
}


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "object"}.get(type(value), type(value).__name__)


def _decode(value: Any, spec: Any, path: str) -> Any:
    if spec == "any":
        return value
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be an object, got {_type_name(value)}")
        out = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in spec:
                raise ConfigError(child, "unknown field (check the spelling against "
                                         "kubescheduler.config.k8s.io/v1)")
            out[key] = _decode(item, spec[key], child)
        return out
    if isinstance(spec, tuple) and spec[0] == "list":
        if not isinstance(value, list):
            raise ConfigError(path, f"must be a list, got {_type_name(value)}")
        return [_decode(item, spec[1], f"{path}[{i}]") for i, item in enumerate(value)]
    if value is None:
        return None
    if spec == "str":
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, got {_type_name(value)}")
        return value
    if spec == "bool":
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, got {value!r}")
        return value
    if spec == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"must be an integer, got {value!r}")
        return value
    if spec == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"must be a number, got {value!r}")
        return float(value)
    if spec == "duration":
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a duration string such as \"15s\", got {value!r}")
        try:
            return parse_duration(value)
        except ValueError as err:
            raise ConfigError(path, str(err)) from None
    raise AssertionError(f"unknown schema type {spec!r}")


# ---------------------------------------------------------------------------------------------
# Defaults (pkg/scheduler/apis/config/v1/defaults.go) and the default-plugin merge
# (mergePluginSet in default_plugins.go).
# ---------------------------------------------------------------------------------------------

def _plugin_names() -> tuple[frozenset[str], list[tuple[str, int]], frozenset[str]]:
    """The plugin names a profile may use (in-tree, and out-of-tree by entry point name: read
    without importing them), the default profile, and the queueSort plugins (a seam: the unit
    tests put their fake plugins' names here)."""
    return (default_plugins.IN_TREE_PLUGINS | entry_point_names(), default_plugins.DEFAULT_PLUGINS,
            default_plugins.QUEUE_SORT_PLUGINS)


def _plugin_set(raw: dict | None) -> PluginSet:
    raw = raw or {}
    return PluginSet(
        enabled=[PluginRef(p.get("name") or "", p.get("weight") or 0) for p in raw.get("enabled") or ()],
        disabled=[PluginRef(p.get("name") or "") for p in raw.get("disabled") or ()],
    )


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream's mergePluginSet: custom disables (or '*') drop defaults, a re-enabled default
    keeps its place with the custom settings, other custom plugins are appended."""
    disabled = [PluginRef(p.name) for p in custom.disabled] + [PluginRef(p.name) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            if plugin.name in custom_index:
                replaced.add(custom_index[plugin.name])
                plugin = custom.enabled[custom_index[plugin.name]]
            enabled.append(plugin)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled=enabled, disabled=disabled)


def _profile(raw: dict, index: int, default_plugins: list[tuple[str, int]]) -> Profile:
    path = f"profiles[{index}]"
    profile = Profile(path=path)
    # As upstream's v1 defaulting: only an absent schedulerName becomes default-scheduler; an
    # empty one (say, a template variable left empty) is an error, not a claim on every pod.
    if "schedulerName" in raw and not raw["schedulerName"]:
        raise ConfigError(f"{path}.schedulerName", "Required value: set the name pods use in spec.schedulerName")
    profile.scheduler_name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    profile.percentage_of_nodes_to_score = raw.get("percentageOfNodesToScore")
    raw_plugins = raw.get("plugins") or {}
    defaults = {"multiPoint": PluginSet(enabled=[PluginRef(n, w) for n, w in default_plugins])}
    for point in ("multiPoint", *EXTENSION_POINTS):
        profile.plugins[point] = merge_plugin_set(defaults.get(point, PluginSet()),
                                                  _plugin_set(raw_plugins.get(point)))
    for i, entry in enumerate(raw.get("pluginConfig") or ()):
        name = entry.get("name") or ""
        entry_path = f"{path}.pluginConfig[{i}]"
        if not name:
            raise ConfigError(f"{entry_path}.name", "required: name the plugin these args are for")
        if name in profile.plugin_config:
            raise ConfigError(f"{entry_path}.name", f"duplicate pluginConfig for plugin {name!r} "
                                                    f"(first at {profile.plugin_config_paths[name]})")
        args = entry.get("args")
        if args is not None and not isinstance(args, dict):
            raise ConfigError(f"{entry_path}.args", f"must be an object, got {_type_name(args)}")
        profile.plugin_config[name] = args or {}
        profile.plugin_config_paths[name] = entry_path
    return profile


# ---------------------------------------------------------------------------------------------
# Validation (pkg/scheduler/apis/config/validation), with one message per problem.
# ---------------------------------------------------------------------------------------------

def _validate_profile_plugins(profile: Profile, raw: dict, known: frozenset[str]) -> None:
    raw_plugins = raw.get("plugins") or {}
    for point, raw_set in raw_plugins.items():
        for kind in ("enabled", "disabled"):
            for i, plugin in enumerate((raw_set or {}).get(kind) or ()):
                where = f"{profile.path}.plugins.{point}.{kind}[{i}]"
                name = plugin.get("name") or ""
                if not name:
                    raise ConfigError(f"{where}.name", "required: the plugin's name")
                if name == "*" and kind == "disabled":
                    continue
                if name not in known:
                    raise ConfigError(f"{where}.name", _unknown_plugin(name, known))
                weight = plugin.get("weight")
                if weight is not None and not 0 <= weight <= MAX_WEIGHT:
                    raise ConfigError(f"{where}.weight", f"must be a non-negative integer (0 means the "
                                                         f"default weight 1), got {weight}")
    for name, where in profile.plugin_config_paths.items():
        if name not in known:
            raise ConfigError(f"{where}.name", _unknown_plugin(name, known))


def _unknown_plugin(name: str, known: frozenset[str]) -> str:
    return unknown_plugin_message(name, known)


def validate_leader_election(le: LeaderElection) -> None:
    """The leaderElection checks; also run after the --leader-elect-* flags are applied."""
    if le.leader_elect:
        for name, value in (("leaseDuration", le.lease_duration), ("renewDeadline", le.renew_deadline),
                            ("retryPeriod", le.retry_period)):
            if value <= 0:
                raise ConfigError(f"leaderElection.{name}", f"must be greater than zero, got {value}s")
        if le.lease_duration <= le.renew_deadline:
            raise ConfigError("leaderElection.leaseDuration",
                              f"must be greater than renewDeadline ({le.lease_duration}s <= {le.renew_deadline}s)")
        if le.renew_deadline <= le.retry_period * 1.2:
            raise ConfigError("leaderElection.renewDeadline",
                              f"must be greater than retryPeriod*1.2 ({le.renew_deadline}s <= "
                              f"{round(le.retry_period * 1.2, 3)}s)")
        if le.resource_lock != "leases":
            raise ConfigError("leaderElection.resourceLock",
                              f"must be \"leases\" (the only lock kube-scheduler supports), got {le.resource_lock!r}")
        if not le.resource_name:
            raise ConfigError("leaderElection.resourceName", "must not be empty")
        if not le.resource_namespace:
            raise ConfigError("leaderElection.resourceNamespace", "must not be empty")


def _validate(cfg: KubeSchedulerConfiguration, raw: dict) -> None:
    if cfg.parallelism <= 0:
        raise ConfigError("parallelism", f"must be greater than 0, got {cfg.parallelism}")
    if not 0 <= cfg.percentage_of_nodes_to_score <= 100:
        raise ConfigError("percentageOfNodesToScore",
                          f"must be in the range [0, 100] (0 = adaptive), got {cfg.percentage_of_nodes_to_score}")
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError("podInitialBackoffSeconds", f"must be greater than 0, got {cfg.pod_initial_backoff_seconds}")
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError("podMaxBackoffSeconds",
                          f"must be greater than or equal to podInitialBackoffSeconds "
                          f"({cfg.pod_initial_backoff_seconds}), got {cfg.pod_max_backoff_seconds}")
    validate_leader_election(cfg.leader_election)
    cc = cfg.client_connection
    if cc.burst < 0:
        raise ConfigError("clientConnection.burst", f"must not be negative, got {cc.burst}")
    if raw.get("extenders"):
        _parse_extenders(cfg, raw["extenders"])
    known, _unused, queue_sort = _plugin_names()
    seen: dict[str, int] = {}
    for i, profile in enumerate(cfg.profiles):
        raw_profile = (raw.get("profiles") or [{}])[i] if raw.get("profiles") else {}
        if profile.scheduler_name in seen:
            raise ConfigError(f"profiles[{i}].schedulerName",
                              f"duplicate schedulerName {profile.scheduler_name!r} (also profiles[{seen[profile.scheduler_name]}])")
        seen[profile.scheduler_name] = i
        pct = profile.percentage_of_nodes_to_score
        if pct is not None and not 0 <= pct <= 100:
            raise ConfigError(f"profiles[{i}].percentageOfNodesToScore", f"must be in the range [0, 100], got {pct}")
        _validate_profile_plugins(profile, raw_profile, known)
    # Upstream requires every profile to share the queueSort plugin and its args, because there
    # is one queue for all profiles.
    if len(cfg.profiles) > 1:
        first = _queue_sort(cfg.profiles[0], queue_sort)
        for i, profile in enumerate(cfg.profiles[1:], start=1):
            if _queue_sort(profile, queue_sort) != first:
                raise ConfigError(f"profiles[{i}].plugins.queueSort",
                                  "must be the same for all profiles (one queue serves them all)")


def _queue_sort(profile: Profile, queue_sort: frozenset[str]) -> tuple:
    """The profile's queueSort plugins (explicit, then multiPoint) and their args."""
    names = [p.name for p in profile.plugins["queueSort"].enabled]
    disabled = {p.name for p in profile.plugins["queueSort"].disabled}
    if "*" not in disabled:
        names += [p.name for p in profile.plugins["multiPoint"].enabled
                  if p.name not in disabled and p.name not in names and p.name in queue_sort]
    return tuple(names), tuple(repr(profile.plugin_config.get(n)) for n in names)


def _parse_extenders(cfg: KubeSchedulerConfiguration, raw_extenders: list[dict]) -> None:
    from kubesched.config.extenders import ExtenderConfigError, parse_extenders

    try:
        cfg.extenders = parse_extenders(raw_extenders)
    except ExtenderConfigError as err:
        raise ConfigError(err.field, err.message) from None
    # As upstream's buildExtenders: resources an extender manages with ignoredByScheduler are
    # NodeResourcesFit's ignoredResources in every profile (the extender's list wins).
    ignored = [r.name for ext in cfg.extenders for r in ext.managed_resources if r.ignored_by_scheduler]
    if ignored:
        for profile in cfg.profiles:
            args = dict(profile.plugin_config.get("NodeResourcesFit") or {})
            args["ignoredResources"] = ignored
            profile.plugin_config["NodeResourcesFit"] = args


def parse_config(raw: Any, source: str = "", feature_gates: dict[str, bool] | None = None
                 ) -> KubeSchedulerConfiguration:
    """Decode, default and validate an already-parsed YAML document; feature_gates (as
    --feature-gates set them) decide the default profile, as upstream's v1 defaulting."""
    try:
        return _parse(raw, source, feature_gates or {})
    except ConfigError as err:
        if source and not err.source:
            raise ConfigError(err.field, err.message, source) from None
        raise


def _parse(raw: Any, source: str, feature_gates: dict[str, bool]) -> KubeSchedulerConfiguration:
    if not isinstance(raw, dict):
        raise ConfigError("", f"must be a YAML object with apiVersion {API_VERSION} and kind {KIND}")
    if raw.get("apiVersion") != API_VERSION:
        raise ConfigError("apiVersion", f"must be {API_VERSION!r}, got {raw.get('apiVersion')!r}")
    if raw.get("kind") != KIND:
        raise ConfigError("kind", f"must be {KIND!r}, got {raw.get('kind')!r}")
    raw = _decode(raw, _SCHEMA, "")
    cfg = KubeSchedulerConfiguration(source=source)
    _set(raw, "parallelism", cfg, "parallelism")
    _set(raw, "percentageOfNodesToScore", cfg, "percentage_of_nodes_to_score")
    _set(raw, "podInitialBackoffSeconds", cfg, "pod_initial_backoff_seconds")
    _set(raw, "podMaxBackoffSeconds", cfg, "pod_max_backoff_seconds")
    _set(raw, "delayCacheUntilActive", cfg, "delay_cache_until_active")
    _set(raw, "enableProfiling", cfg, "enable_profiling")
    _set(raw, "enableContentionProfiling", cfg, "enable_contention_profiling")
    le_raw = raw.get("leaderElection") or {}
    cfg.leader_election = LeaderElection()
    for key, attr in (("leaderElect", "leader_elect"), ("leaseDuration", "lease_duration"),
                      ("renewDeadline", "renew_deadline"), ("retryPeriod", "retry_period"),
                      ("resourceLock", "resource_lock"), ("resourceName", "resource_name"),
                      ("resourceNamespace", "resource_namespace")):
        _set(le_raw, key, cfg.leader_election, attr)
    cc_raw = raw.get("clientConnection") or {}
    cfg.client_connection = ClientConnection()
    for key, attr in (("kubeconfig", "kubeconfig"), ("qps", "qps"), ("burst", "burst"),
                      ("contentType", "content_type"), ("acceptContentTypes", "accept_content_types")):
        _set(cc_raw, key, cfg.client_connection, attr)
    _unused, defaults, _unused = _plugin_names()
    if feature_gates.get("GenericWorkload"):
        defaults = defaults + default_plugins.GENERIC_WORKLOAD_PLUGINS
    raw_profiles = raw.get("profiles") or [{}]
    cfg.profiles = [_profile(p or {}, i, defaults) for i, p in enumerate(raw_profiles)]
    _validate(cfg, raw)
    return cfg


def _set(raw: dict, key: str, obj: Any, attr: str) -> None:
    value = raw.get(key)
    if value is not None:
        setattr(obj, attr, value)


def load_config(path: str, feature_gates: dict[str, bool] | None = None) -> KubeSchedulerConfiguration:
    """Read and validate the file at path; ConfigError says what to fix."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise ConfigError("", f"cannot read the configuration file: {err.strerror}", path) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError("", f"not valid YAML{where}: {problem}", path) from None
    return parse_config(raw, source=path, feature_gates=feature_gates)
