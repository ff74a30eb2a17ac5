"""KubeSchedulerConfiguration decoding, defaults and validation (with the fake plugins)."""

import pytest
import yaml

from kubesched.config import ConfigError, load_config, parse_config
from kubesched.config.load import merge_plugin_set
from kubesched.config.types import PluginRef, PluginSet, parse_duration

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(**fields):
    return parse_config({**BASE, **fields})


def error_of(**fields) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        cfg(**fields)
    return info.value


def test_upstream_defaults(fake_registry):
    c = cfg()
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (16, 0)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    le = c.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15, 10, 2)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == ("leases", "kube-scheduler", "kube-system")
    assert (c.client_connection.qps, c.client_connection.burst) == (50, 100)
    assert [p.scheduler_name for p in c.profiles] == ["default-scheduler"]
    assert [p.name for p in c.profiles[0].plugins["multiPoint"].enabled][:2] == ["FakeGates", "FakeSort"]


def test_durations_parse_like_go():
    assert parse_duration("15s") == 15
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1h") == 3600
    assert parse_duration("0") == 0
    for bad in ("15", "s", "1x", "1.5.5s", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.parametrize("fields, field, words", [
    ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion", "must be"),
    ({"kind": "KubeProxyConfiguration"}, "kind", "must be"),
    ({"parallelizm": 4}, "parallelizm", "unknown field"),
    ({"leaderElection": {"leaseDuraton": "15s"}}, "leaderElection.leaseDuraton", "unknown field"),
    ({"profiles": [{"schedulerName": "a", "plugin": {}}]}, "profiles[0].plugin", "unknown field"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "FakeScore", "wieght": 2}]}}}]},
     "profiles[0].plugins.score.enabled[0].wieght", "unknown field"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
     "profiles[0].plugins.score.enabled[0].name", "unknown plugin 'NoSuchPlugin'"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "FakeScore", "weight": -1}]}}}]},
     "profiles[0].plugins.score.enabled[0].weight", "non-negative"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "FakeScore", "weight": "high"}]}}}]},
     "profiles[0].plugins.score.enabled[0].weight", "integer"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}, {"schedulerName": "a"}]},
     "profiles[2].schedulerName", "duplicate schedulerName 'a'"),
    ({"profiles": [{}, {}]}, "profiles[1].schedulerName", "duplicate schedulerName 'default-scheduler'"),
    ({"leaderElection": {"leaseDuration": "fifteen"}}, "leaderElection.leaseDuration", "invalid duration"),
    ({"leaderElection": {"leaseDuration": 15}}, "leaderElection.leaseDuration", "duration string"),
    ({"leaderElection": {"leaseDuration": "5s", "renewDeadline": "10s"}}, "leaderElection.leaseDuration",
     "greater than renewDeadline"),
    ({"leaderElection": {"renewDeadline": "2s", "retryPeriod": "2s"}}, "leaderElection.renewDeadline",
     "retryPeriod"),
    ({"leaderElection": {"retryPeriod": "0s"}}, "leaderElection.retryPeriod", "greater than zero"),
    ({"leaderElection": {"resourceLock": "endpoints"}}, "leaderElection.resourceLock", "leases"),
    ({"parallelism": 0}, "parallelism", "greater than 0"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore", "[0, 100]"),
    ({"profiles": [{"percentageOfNodesToScore": -1}]}, "profiles[0].percentageOfNodesToScore", "[0, 100]"),
    ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds", "greater than 0"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}, "podMaxBackoffSeconds", "podInitialBackoffSeconds"),
    ({"clientConnection": {"qps": "fast"}}, "clientConnection.qps", "number"),
    ({"clientConnection": {"burst": -1}}, "clientConnection.burst", "negative"),
    ({"profiles": [{"pluginConfig": [{"name": "Missing", "args": {}}]}]}, "profiles[0].pluginConfig[0].name",
     "unknown plugin"),
    ({"profiles": [{"pluginConfig": [{"name": "FakeScore"}, {"name": "FakeScore"}]}]},
     "profiles[0].pluginConfig[1].name", "duplicate pluginConfig"),
    ({"profiles": [{"pluginConfig": [{"name": "FakeScore", "args": [1]}]}]},
     "profiles[0].pluginConfig[0].args", "object"),
    ({"extenders": [{"urlPrefix": "http://127.0.0.1:8888", "filterVerb": "filter"}]}, "extenders",
     "not supported"),
    ({"extenders": [{"filterVerb": "filter"}]}, "extenders[0].urlPrefix", "required"),
    ({"profiles": "default"}, "profiles", "must be a list"),
])
def test_bad_configuration_names_the_field(fake_registry, fields, field, words):
    err = error_of(**fields)
    assert err.field == field
    assert words in err.message
    assert "\n" not in str(err)


def test_queue_sort_must_match_across_profiles(fake_registry):
    err = error_of(profiles=[{"schedulerName": "a"},
                             {"schedulerName": "b", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}])
    assert err.field == "profiles[1].plugins.queueSort"


def test_merge_plugin_set_keeps_default_order_and_appends_custom():
    default = PluginSet(enabled=[PluginRef("A", 1), PluginRef("B", 1), PluginRef("C", 1)])
    custom = PluginSet(enabled=[PluginRef("X", 5), PluginRef("B", 7)], disabled=[PluginRef("C")])
    merged = merge_plugin_set(default, custom)
    assert [(p.name, p.weight) for p in merged.enabled] == [("A", 1), ("B", 7), ("X", 5)]
    assert [p.name for p in merged.disabled] == ["C"]


def test_disabling_star_drops_every_default():
    default = PluginSet(enabled=[PluginRef("A"), PluginRef("B")])
    merged = merge_plugin_set(default, PluginSet(enabled=[PluginRef("Z")], disabled=[PluginRef("*")]))
    assert [p.name for p in merged.enabled] == ["Z"]


def test_load_config_reports_unreadable_and_bad_yaml(tmp_path, fake_registry):
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(str(bad))


def test_load_config_reads_profiles(tmp_path, fake_registry):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "percentageOfNodesToScore": 30, "profiles": [
        {"schedulerName": "one", "plugins": {"score": {"disabled": [{"name": "FakeScore"}]}}},
        {"schedulerName": "two", "pluginConfig": [{"name": "FakeLabelFilter", "args": {"mode": "strict"}}]},
    ]}))
    c = load_config(str(path))
    assert [p.scheduler_name for p in c.profiles] == ["one", "two"]
    assert c.profiles[1].plugin_config["FakeLabelFilter"] == {"mode": "strict"}
    assert c.profiles[1].plugin_config_paths["FakeLabelFilter"] == "profiles[1].pluginConfig[0]"
    assert c.source == str(path)
