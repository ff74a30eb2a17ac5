"""The effective configuration as kubescheduler.config.k8s.io/v1 YAML (`--write-config-to`).

kube-scheduler writes its defaulted configuration in the versioned form: every top-level
field, durations in Go's spelling, and each profile's plugin sets after the default plugins
were merged in. Plugin args are written as the configuration gave them (kube-scheduler also
writes the defaulted args of every plugin; kubesched defaults args inside each plugin).
"""

from __future__ import annotations

import yaml

from kubesched.config.types import API_VERSION, KIND, KubeSchedulerConfiguration, PluginSet


def go_duration(seconds: float) -> str:
    """time.Duration.String() for the whole and fractional seconds a configuration holds."""
    if seconds == 0:
        return "0s"
    total_ms = round(seconds * 1000)
    hours, rest = divmod(total_ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:g}s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    if minutes:
        return f"{minutes}m{secs}"
    if total_ms < 1000:
        return f"{total_ms}ms"
    return secs


def _plugin_set(plugin_set: PluginSet) -> dict:
    out: dict = {}
    if plugin_set.enabled:
        out["enabled"] = [{"name": p.name, "weight": p.weight} for p in plugin_set.enabled]
    if plugin_set.disabled:
        out["disabled"] = [{"name": p.name} for p in plugin_set.disabled]
    return out


def to_v1(cfg: KubeSchedulerConfiguration) -> dict:
    le, cc = cfg.leader_election, cfg.client_connection
    profiles = []
    for profile in cfg.profiles:
        entry: dict = {"schedulerName": profile.scheduler_name}
        if profile.percentage_of_nodes_to_score is not None:
            entry["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
        entry["plugins"] = {point: _plugin_set(plugin_set) for point, plugin_set in profile.plugins.items()}
        entry["pluginConfig"] = [{"name": name, "args": args} for name, args in profile.plugin_config.items()]
        profiles.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "clientConnection": {"acceptContentTypes": cc.accept_content_types, "burst": cc.burst,
                             "contentType": cc.content_type, "kubeconfig": cc.kubeconfig,
                             "qps": int(cc.qps) if float(cc.qps).is_integer() else cc.qps},
        "delayCacheUntilActive": cfg.delay_cache_until_active,
        "enableContentionProfiling": cfg.enable_contention_profiling,
        "enableProfiling": cfg.enable_profiling,
        "leaderElection": {"leaderElect": le.leader_elect, "leaseDuration": go_duration(le.lease_duration),
                           "renewDeadline": go_duration(le.renew_deadline), "resourceLock": le.resource_lock,
                           "resourceName": le.resource_name, "resourceNamespace": le.resource_namespace,
                           "retryPeriod": go_duration(le.retry_period)},
        "parallelism": cfg.parallelism,
        "percentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": cfg.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": cfg.pod_max_backoff_seconds,
        "profiles": profiles,
    }


def encode_config(cfg: KubeSchedulerConfiguration) -> str:
    return yaml.safe_dump(to_v1(cfg), sort_keys=True, default_flow_style=False)
