"""Out-of-tree plugins by entry point: found by name, configured with pluginConfig args,
explained when unknown or broken, and guarded so a plugin that raises fails one pod's attempt
(with the plugin's name) while the scheduler goes on and the pod stays queued."""

from __future__ import annotations

import random
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from kubesched_fakes import FakeClient, node_raw, pod_raw

from kubesched.config import ConfigError, parse_config
from kubesched.config.entrypoints import entry_points
from kubesched.plugins import outoftree
from kubesched.scheduler import Scheduler

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "kubesched-plugin-example" / "src"
BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}

RAISING = '''
from kubesched.framework.interface import Code, Status


class Raising:
    """Raises in the extension point named by the pod's label `raise-in`."""

    name = "Raising"

    def __init__(self, args, handle):
        if (args or {}).get("explode"):
            raise RuntimeError("cannot start")

    def _maybe(self, point, pod):
        if pod.labels.get("raise-in") == point:
            raise ValueError(f"boom in {point}")

    def pre_filter(self, state, pod, nodes):
        self._maybe("preFilter", pod)
        return None, None

    def filter(self, state, pod, node):
        self._maybe("filter", pod)
        return None

    def score(self, state, pod, node):
        self._maybe("score", pod)
        return 1

    def reserve(self, state, pod, node):
        self._maybe("reserve", pod)

    def unreserve(self, state, pod, node):
        self._maybe("unreserve", pod)

    def permit(self, state, pod, node):
        self._maybe("permit", pod)
        if pod.labels.get("return") == "junk":
            return "yes please"
        return None

    def pre_bind(self, state, pod, node):
        self._maybe("preBind", pod)

    def post_bind(self, state, pod, node):
        self._maybe("postBind", pod)
'''


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """What pip leaves in site-packages: the modules and a dist-info with entry_points.txt."""
    for name, text in modules.items():
        (site / name).write_text(textwrap.dedent(text))
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[kubesched.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site directory on sys.path holding the example's and the test's distributions."""
    monkeypatch.syspath_prepend(str(tmp_path))
    # A copy: a build of the example leaves an egg-info beside its sources, a second distribution.
    shutil.copytree(EXAMPLE / "kubesched_plugin_example", tmp_path / "kubesched_plugin_example",
                    ignore=shutil.ignore_patterns("__pycache__"))
    install(tmp_path, "kubesched_plugin_example", {"Maintenance": "kubesched_plugin_example.maintenance:Maintenance"},
            {})
    install(tmp_path, "raising_plugin", {"Raising": "raising_plugin:Raising",
                                         "Broken": "missing_module:Thing",
                                         "Misnamed": "raising_plugin:Raising",
                                         "NodeName": "raising_plugin:Raising"}, {"raising_plugin.py": RAISING})
    monkeypatch.setattr(outoftree, "_registry", None)
    entry_points.cache_clear()
    yield tmp_path
    outoftree._registry = None
    entry_points.cache_clear()
    for name in ("raising_plugin", "kubesched_plugin_example", "kubesched_plugin_example.maintenance"):
        sys.modules.pop(name, None)


def profile(*enabled: str, **plugin_args) -> dict:
    return {**BASE, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": n} for n in enabled]}},
                                  "pluginConfig": [{"name": k, "args": v} for k, v in plugin_args.items()]}]}


def test_the_example_is_enabled_by_name_and_steers_pods(site):
    cfg = parse_config(profile("Maintenance", Maintenance={"preferenceLabel": "rank"}))
    sched = Scheduler(cfg, FakeClient(), rng=random.Random(1))
    sched.on_node_add(node_raw("in-maintenance", labels={"example.com/maintenance": "true", "rank": "100"}))
    sched.on_node_add(node_raw("low", labels={"rank": "10"}))
    sched.on_node_add(node_raw("high", labels={"rank": "90"}))
    sched.on_pod_add(pod_raw("p"))
    sched.schedule_one(sched.queue.pop(timeout=0))
    sched.bind_pool.shutdown(wait=True)
    assert [n for _k, n, _u in sched.client.binds] == ["high"]


def test_unknown_plugin_names_the_entry_points_and_how_to_register(site):
    with pytest.raises(ConfigError) as err:
        parse_config(profile("Maintenanse"))
    message = err.value.message
    assert "unknown plugin 'Maintenanse'" in message
    assert "Maintenance = kubesched_plugin_example.maintenance:Maintenance from kubesched_plugin_example 1.0" in message
    assert '[project.entry-points."kubesched.plugins"]' in message and "docs/plugins.md" in message


@pytest.mark.parametrize("name, words", [
    ("Broken", "entry point Broken = missing_module:Thing from raising_plugin 1.0 cannot be imported: "
               "ModuleNotFoundError"),
    ("Misnamed", "whose name attribute is 'Raising'; set name = 'Misnamed' on the class"),
])
def test_a_broken_entry_point_fails_only_the_profiles_that_enable_it(site, name, words):
    from kubesched.cli import validate_frameworks

    validate_frameworks(parse_config(profile("Maintenance")))  # unaffected
    with pytest.raises(ConfigError) as err:
        validate_frameworks(parse_config(profile(name)))
    assert words in err.value.message


def test_plugin_args_errors_and_start_failures_name_the_plugin(site):
    from kubesched.cli import validate_frameworks

    with pytest.raises(ConfigError) as err:
        validate_frameworks(parse_config(profile("Maintenance", Maintenance={"maintenanceLable": "x"})))
    assert err.value.field == "profiles[0].pluginConfig[0].args.maintenanceLable"
    with pytest.raises(ConfigError) as err:
        validate_frameworks(parse_config(profile("Raising", Raising={"explode": True})))
    assert "plugin 'Raising' cannot start: RuntimeError: cannot start" in err.value.message


@pytest.mark.parametrize("point", ["preFilter", "filter", "score", "reserve", "permit", "preBind"])
def test_a_plugin_that_raises_fails_the_pod_not_the_scheduler(site, point):
    cfg = parse_config(profile("Raising"))
    sched = Scheduler(cfg, FakeClient(), rng=random.Random(1), bind_workers=1)
    for n in ("a", "b"):
        sched.on_node_add(node_raw(n))
    sched.on_pod_add(pod_raw("bad", labels={"raise-in": point}))
    sched.on_pod_add(pod_raw("good"))
    while (p := sched.queue.pop(timeout=0)) is not None:
        sched.schedule_one(p)
    sched.bind_pool.shutdown(wait=True)
    assert [k for k, _n, _u in sched.client.binds] == ["default/good"]
    failures = [item[5] for item in list(sched.broadcaster.pending.queue) if item[3] == "FailedScheduling"]
    assert len(failures) == 1 and f'plugin "Raising" failed in {point.lower() if point == "score" else _snake(point)}: ' \
                                  f"ValueError: boom in {point}" in failures[0]
    bad_uid = next(u for u in sched.queue.entries)
    assert sched.queue.entries[bad_uid].pod.name == "bad"  # back in the queue, not lost
    assert not sched.cache.is_assumed(bad_uid)


def _snake(point: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in point)


def test_raising_after_binding_is_logged_and_a_junk_answer_is_an_error(site):
    cfg = parse_config(profile("Raising"))
    sched = Scheduler(cfg, FakeClient(), rng=random.Random(1))
    sched.on_node_add(node_raw("a"))
    sched.on_pod_add(pod_raw("late", labels={"raise-in": "postBind"}))
    sched.on_pod_add(pod_raw("junk", labels={"return": "junk"}))
    while (p := sched.queue.pop(timeout=0)) is not None:
        sched.schedule_one(p)
    sched.bind_pool.shutdown(wait=True)
    assert [k for k, _n, _u in sched.client.binds] == ["default/late"]
    [failure] = [item[5] for item in list(sched.broadcaster.pending.queue) if item[3] == "FailedScheduling"]
    assert failure == 'running Permit plugin "Raising": plugin "Raising" returned str from permit; want a Status or None'
    fwk = sched.frameworks["default-scheduler"]
    assert fwk.plugins["Raising"].plugin.__class__.__name__ == "Raising"


def test_an_entry_point_cannot_replace_an_in_tree_plugin(site):
    from kubesched.plugins.node_name import NodeName

    assert outoftree.full_registry()["NodeName"] is NodeName
