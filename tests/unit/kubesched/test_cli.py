"""The command line: flags as kube-scheduler spells them, validate-config, one-line errors."""

import yaml

from kubesched import cli

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


def test_run_without_kubeconfig_fails_before_contacting_anything(tmp_path, capsys, fake_registry, monkeypatch):
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
    args, warnings = cli.parse_flags(["--feature-gates=A=true", "--profiling", "--http2-max-streams-per-connection=9",
                                      "--logging-format=text", "--profiling=false"])
    assert args.feature_gates == {"A": True}
    # --feature-gates is honoured for OpportunisticBatching; a gate kubesched lacks is named.
    assert [w.split(" is ")[0] for w in warnings] == ["flag --http2-max-streams-per-connection", "feature gate A"]


def test_deprecated_flags_apply_only_without_a_config_file(fake_registry):
    args, warnings = cli.parse_flags(["--kube-api-qps=7", "--kube-api-burst=9", "--profiling=false"])
    cfg = cli.effective_config(args)
    assert (cfg.client_connection.qps, cfg.client_connection.burst, cfg.enable_profiling) == (7, 9, False)
    assert warnings == []
    _unused, warnings = cli.parse_flags(["--config", "c.yaml", "--kube-api-qps=7"])
    assert warnings == ["flag --kube-api-qps is ignored because --config is given (as kube-scheduler: set it in "
                        "the configuration file)"]


def test_a_malformed_value_is_a_usage_error(capsys):
    assert cli.main(["--feature-gates=NoEquals"]) == 2
    assert "'NoEquals' is not key=value" in capsys.readouterr().err
    assert cli.main(["--authentication-token-webhook-cache-ttl=soon"]) == 2


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
