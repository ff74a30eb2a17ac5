"""The bad scheduler configuration catalogue: one clear line, non-zero exit, both commands."""

import pytest

from tests.reliability import bad_configs


def test_the_catalogue_has_at_least_fifteen_cases():
    assert len(bad_configs.CASES) >= 15
    assert len({case[0] for case in bad_configs.CASES}) == len(bad_configs.CASES)


@pytest.mark.parametrize("case", bad_configs.CASES, ids=[case[0] for case in bad_configs.CASES])
def test_bad_config_is_rejected_with_one_line_by_both_commands(case, tmp_path):
    case_id, _what, content, expected = case
    kubeconfig = bad_configs._unreachable_kubeconfig(tmp_path)
    path = bad_configs._write_case(tmp_path, case_id, content, kubeconfig)
    v_code, v_err, _seconds = bad_configs._run("validate-config", str(path))
    r_code, r_err, _seconds = bad_configs._run("--config", str(path), "--secure-port", "0", "--bind-address", "127.0.0.1")
    v_ok, v_line, v_why = bad_configs._judge(v_code, v_err, expected)
    r_ok, r_line, r_why = bad_configs._judge(r_code, r_err, expected)
    assert v_ok, f"validate-config: {v_why}: {v_err}"
    assert r_ok, f"--config: {r_why}: {r_err}"
    assert v_line == r_line
    assert r_line.startswith("kubesched: error: ")
