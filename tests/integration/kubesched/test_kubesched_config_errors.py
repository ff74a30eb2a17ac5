"""Every bad configuration exits non-zero with one line naming the field, before contacting the
cluster (the kubeconfig points at a port where nothing listens), and validate-config agrees."""

import pytest
import yaml
from kubesched_lab import write_unreachable_kubeconfig

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False}}


@pytest.fixture
def unreachable_kubeconfig(tmp_path):
    return write_unreachable_kubeconfig(tmp_path / "unreachable.kubeconfig")


CASES = {
    "unknown field": ({"parallelizm": 8}, "parallelizm: unknown field"),
    "unknown nested field": ({"profiles": [{"schedulerName": "a", "plugins": {"scores": {}}}]},
                             "profiles[0].plugins.scores: unknown field"),
    "unknown plugin": ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NodeResourceFit"}]}}}]},
                       "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeResourceFit'"),
    "bad weight": ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -5}]}}}]},
                   "profiles[0].plugins.score.enabled[0].weight: must be a non-negative integer"),
    "duplicate schedulerName": ({"profiles": [{"schedulerName": "s"}, {"schedulerName": "s"}]},
                                "profiles[1].schedulerName: duplicate schedulerName 's'"),
    "wrong apiVersion": ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion: must be"),
    "wrong kind": ({"kind": "KubeletConfiguration"}, "kind: must be"),
    "bad duration": ({"leaderElection": {"leaderElect": True, "leaseDuration": "15"}},
                     "leaderElection.leaseDuration: invalid duration '15'"),
    "lease shorter than deadline": ({"leaderElection": {"leaderElect": True, "leaseDuration": "5s"}},
                                    "leaderElection.leaseDuration: must be greater than renewDeadline"),
    "bad plugin args": ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit",
                                                         "args": {"scoringStrategy": {"type": "Fanciest"}}}]}]},
                        "profiles[0].pluginConfig[0].args.scoringStrategy.type:"),
    "bad percentage": ({"percentageOfNodesToScore": 150}, "percentageOfNodesToScore: must be in the range [0, 100]"),
    "two bind extenders": ({"extenders": [{"urlPrefix": "http://127.0.0.1:8888", "bindVerb": "bind"},
                                          {"urlPrefix": "http://127.0.0.1:8889", "bindVerb": "bind"}]},
                           'extenders: Invalid value: "found 2 extenders implementing bind": only one extender can '
                           "implement bind"),
}


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_config_exits_with_one_clear_line(case, kubesched_cli, tmp_path, unreachable_kubeconfig):
    fields, expected = CASES[case]
    doc = {**BASE, "clientConnection": {"kubeconfig": unreachable_kubeconfig}, **fields}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, err = kubesched_cli("--config", str(path), "--secure-port", "0", timeout=20)
    assert code != 0
    line = one_line(err)
    assert line.startswith(f"kubesched: error: {path}: ")
    assert expected in line
    v_code, v_out, v_err = kubesched_cli("validate-config", str(path))
    assert v_code != 0 and one_line(v_err) == line


def test_unreadable_kubeconfig(kubesched_cli, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "clientConnection": {"kubeconfig": str(tmp_path / "nope")}}))
    code, _unused, err = kubesched_cli("--config", str(path), timeout=20)
    assert code != 0
    assert "clientConnection.kubeconfig: cannot read kubeconfig" in one_line(err)
    code, _unused, err = kubesched_cli("validate-config", str(path))
    assert code != 0 and "clientConnection.kubeconfig" in one_line(err)


@pytest.mark.parametrize("content, expected", [
    (None, "cannot read the configuration file"),
    ("apiVersion: [", "not valid YAML at line"),
    ("- just\n- a list\n", "must be a YAML object"),
])
def test_unreadable_or_malformed_file(kubesched_cli, tmp_path, content, expected):
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    code, _unused, err = kubesched_cli("--config", str(path), timeout=20)
    assert code != 0 and expected in one_line(err)


def test_valid_config_passes_validate_config(kubesched_cli, tmp_path, lab_kubeconfig):
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump({**BASE, "clientConnection": {"kubeconfig": lab_kubeconfig},
                                    "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]}))
    code, out, err = kubesched_cli("validate-config", str(path))
    assert code == 0 and err == ""
    assert out.strip() == f"{path}: valid (2 profile(s): a, b)"
