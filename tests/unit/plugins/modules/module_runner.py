"""Run a module's main() in-process against a FakeKubeApi and return its JSON result."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.kubesched.scheduler.plugins.module_utils import k8s_client


def run_main(module, capsys, monkeypatch, api, check_mode=False, diff=True, **args):
    monkeypatch.setattr(k8s_client, "KubeApi", lambda api_client: api)
    args = dict(args, kubeconfig=dict(args.get("kubeconfig") or FAKE_KUBECONFIG),
                _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


FAKE_KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "fake",
    "clusters": [{"name": "fake", "cluster": {"server": "https://fake.invalid:6443"}}],
    "users": [{"name": "fake", "user": {"token": "a-long-fake-bearer-token"}}],
    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
}
