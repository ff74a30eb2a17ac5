"""Run a module's main() in-process against a FakeKubeApi and return its JSON result."""

import contextlib
import json

import pytest

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19: the arguments went through a module global
    @contextlib.contextmanager
    def patch_module_args(args):
        from ansible.module_utils import basic

        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved

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
