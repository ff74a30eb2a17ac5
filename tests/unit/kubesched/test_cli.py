"""The command line: flags as kube-scheduler spells them, validate-config, one-line errors."""

import json
import sys

import pytest
import yaml

from kubesched import cli, klog

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def test_klog_and_go_flag_spellings_are_accepted():
    args, _unused = cli.parse_flags(["-v=4", "--leader-elect", "--secure-port", "0"])
    assert (args.verbosity, args.leader_elect, args.secure_port) == (4, True, 0)
    args, _unused = cli.parse_flags(["--leader-elect=false", "--v=2", "--leader_elect_resource_name=x"])
    assert (args.verbosity, args.leader_elect, args.leader_elect_resource_name) == (2, False, "x")


def test_leader_election_flags_override_the_file(fake_registry):
    cfg = cli._default_config()
    args, _unused = cli.parse_flags(["--leader-elect=false", "--leader-elect-retry-period", "500ms",
                                     "--leader-elect-resource-name", "mine"])
    cli._apply_leader_flags(cfg, args)
    le = cfg.leader_election
    assert (le.leader_elect, le.retry_period, le.resource_name) == (False, 0.5, "mine")


def test_validate_config_reports_one_line(tmp_path, capsys, fake_registry, monkeypatch):
    from kubesched_fakes import FAKE_REGISTRY

    from kubesched.plugins import registry

    monkeypatch.setattr(registry, "REGISTRY", FAKE_REGISTRY)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({**BASE, "profiles": [{"schedulerName": "a"}]}))
    assert cli.main(["validate-config", str(good)]) == 0
    assert capsys.readouterr().out.strip() == f"{good}: valid (1 profile(s): a)"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, "profiles": [{"pluginConfig": [{"name": "FakeLabelFilter",
                                                                           "args": {"mode": "x"}}]}]}))
    assert cli.main(["validate-config", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kubesched: error: {bad}: profiles[0].pluginConfig[0].args.mode: must be one of strict, lenient"]


@pytest.mark.parametrize("command", [["validate-config", "{config}"], ["--config", "{config}"]])
def test_a_bad_plugin_argument_is_named_before_an_unusable_kubeconfig(tmp_path, capsys, fake_registry, monkeypatch,
                                                                      command):
    """kube-scheduler validates the configuration, plugin args included, before it reads the
    kubeconfig: with both wrong, the line names the plugin argument."""
    from kubesched_fakes import FAKE_REGISTRY

    from kubesched.plugins import registry

    monkeypatch.setattr(registry, "REGISTRY", FAKE_REGISTRY)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": __file__}}],
        "users": [{"name": "u", "user": {"token": "t"}}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({**BASE, "clientConnection": {"kubeconfig": str(kubeconfig)},
                                      "profiles": [{"pluginConfig": [{"name": "FakeLabelFilter", "args": {"mode": "x"}}]}]}))
    assert cli.main([part.format(config=config) for part in command]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kubesched: error: {config}: profiles[0].pluginConfig[0].args.mode: must be one of strict, lenient"]
    config.write_text(yaml.safe_dump({**BASE, "clientConnection": {"kubeconfig": str(kubeconfig)}}))
    assert cli.main([part.format(config=config) for part in command]) == 1
    assert "clientConnection.kubeconfig" in capsys.readouterr().err


def test_run_without_kubeconfig_fails_before_contacting_anything(tmp_path, capsys, fake_registry, monkeypatch):
    from kubesched_fakes import FAKE_REGISTRY

    from kubesched.plugins import registry

    monkeypatch.setattr(registry, "REGISTRY", FAKE_REGISTRY)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert cli.main(["--config", str(path)]) == 1
    assert "clientConnection.kubeconfig: required" in capsys.readouterr().err


def test_leader_election_flags_are_validated_too(fake_registry):
    import pytest

    from kubesched.config import ConfigError

    cfg = cli._default_config()
    args, _unused = cli.parse_flags(["--leader-elect-lease-duration", "5s"])
    with pytest.raises(ConfigError, match="leaderElection.leaseDuration: must be greater than renewDeadline"):
        cli._apply_leader_flags(cfg, args)


def test_flags_kubesched_lacks_are_accepted_with_one_warning_each():
    args, warnings = cli.parse_flags(["--feature-gates=InPlacePodVerticalScaling=true", "--profiling",
                                      "--http2-max-streams-per-connection=9", "--logging-format=text",
                                      "--profiling=false"])
    assert args.feature_gates == {"InPlacePodVerticalScaling": True}
    # --feature-gates is honoured for OpportunisticBatching; a gate kubesched lacks is named.
    named = [w.split(" is ")[0] for w in warnings]
    assert named == ["flag --http2-max-streams-per-connection", "feature gate InPlacePodVerticalScaling"]


def test_deprecated_flags_apply_only_without_a_config_file(fake_registry):
    args, warnings = cli.parse_flags(["--kube-api-qps=7", "--kube-api-burst=9", "--profiling=false"])
    cfg = cli.effective_config(args)
    assert (cfg.client_connection.qps, cfg.client_connection.burst, cfg.enable_profiling) == (7, 9, False)
    assert warnings == []
    _unused, warnings = cli.parse_flags(["--config", "c.yaml", "--kube-api-qps=7"])
    assert warnings == ["flag --kube-api-qps is ignored because --config is given (as kube-scheduler: set it in "
                        "the configuration file)"]


def test_a_malformed_value_is_a_usage_error(capsys):
    assert cli.main(["--authentication-token-webhook-cache-ttl=soon"]) == 2
    assert "(see kubesched --help)" in capsys.readouterr().err


@pytest.mark.parametrize("gates, said", [
    (["NoEquals"], "missing bool value for NoEquals"),
    (["NoSuchGate=true"], "unrecognized feature gate: NoSuchGate"),
    (["OpportunisticBatching=maybe"],
     'invalid value of OpportunisticBatching=maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax'),
    (["wardle:A=true"], "component not registered: wardle"),
    (["OpportunisticBatching=true", "kube:OpportunisticBatching=false"],
     "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use"),
    (["DynamicResourceAllocation=false"],
     "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
    (["DRAAdminAccess=true,DynamicResourceAllocation=false,CRDValidationRatcheting=false"],
     "[cannot set feature gate DynamicResourceAllocation to false, feature is locked to true, "
     "cannot set feature gate CRDValidationRatcheting to false, feature is locked to true]"),
    (["DRAPartitionableDevicesType=true"],
     "DRAPartitionableDevicesType is enabled, but depends on features that are disabled: [DRAResourcePoolStatus]"),
])
def test_feature_gates_kube_scheduler_refuses_are_refused_in_its_words(monkeypatch, capsys, gates, said):
    """test_kubesched_flags.py runs the pinned kube-scheduler on the same values."""
    monkeypatch.setattr(klog, "_stream", sys.stderr)  # the captured one
    assert cli.main([f"--feature-gates={value}" for value in gates] + ["--version"]) == 1
    *logged, last = capsys.readouterr().err.splitlines()
    assert last.startswith("E") and last.endswith('"command failed" err=' + json.dumps(said))
    assert all("Warning: setting GA feature gate" in line for line in logged)


def test_gates_kube_scheduler_knows_are_accepted_and_a_ga_gate_is_warned_about(monkeypatch, capsys):
    monkeypatch.setattr(klog, "_stream", sys.stderr)
    assert cli.main(["--feature-gates=kube:AllowServiceExternalIPs=true,kube:AllBeta=false", "--version"]) == 0
    err = capsys.readouterr().err
    assert '"Warning: setting GA feature gate. It will be removed in a future release." ' \
           'featureGate="AllowServiceExternalIPs" value=true' in err
    args, _unused = cli.parse_flags(["--feature-gates=AllBeta=false"])
    assert args.feature_gates["OpportunisticBatching"] is False  # a beta gate: AllBeta turns it off too


def test_help_lists_the_commands_and_explains_every_flag(capsys):
    from kubesched import flags

    with pytest.raises(SystemExit):
        flags.build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for command in ("kubesched validate-config FILE", "kubesched explain NAMESPACE/POD", "kubesched [flags]"):
        assert command in text
    silent = [action.option_strings for action in flags.build_parser()._actions if not (action.help or "").strip()]
    assert silent == []
    assert cli.main(["--help"]) == 0


def test_write_config_to_round_trips(tmp_path, fake_registry, monkeypatch):
    from kubesched_fakes import FAKE_REGISTRY

    from kubesched.plugins import registry

    monkeypatch.setattr(registry, "REGISTRY", FAKE_REGISTRY)
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert cli.main(["--write-config-to", str(first), "--leader-elect-lease-duration=90s", "--kube-api-qps=7"]) == 0
    doc = yaml.safe_load(first.read_text())
    assert doc["leaderElection"]["leaseDuration"] == "1m30s" and doc["clientConnection"]["qps"] == 7
    assert doc["profiles"][0]["schedulerName"] == "default-scheduler"
    assert cli.main(["--config", str(first), "--write-config-to", str(second)]) == 0
    assert second.read_text() == first.read_text()
