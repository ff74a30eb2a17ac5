"""The command line: flags as kube-scheduler spells them, validate-config, one-line errors."""

import yaml

from kubesched import cli

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def test_klog_and_go_flag_spellings_are_accepted():
    args = cli._parser().parse_args(cli._normalise_argv(["-v=4", "--leader-elect", "--secure-port", "0"]))
    assert (args.verbosity, args.leader_elect, args.secure_port) == (4, True, 0)
    args = cli._parser().parse_args(cli._normalise_argv(["--leader-elect=false", "--v=2"]))
    assert (args.verbosity, args.leader_elect) == (2, False)


def test_leader_election_flags_override_the_file(fake_registry):
    cfg = cli._default_config()
    args = cli._parser().parse_args(["--leader-elect=false", "--leader-elect-retry-period", "500ms",
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
    args = cli._parser().parse_args(["--leader-elect-lease-duration", "5s"])
    with pytest.raises(ConfigError, match="leaderElection.leaseDuration: must be greater than renewDeadline"):
        cli._apply_leader_flags(cfg, args)
