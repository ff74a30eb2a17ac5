"""`kubesched whatif` over a fake API server: the snapshot's consistency, the two passes with
the real default plugins, the plugin that changed a decision, the tie-break, the exit
status, and that nothing can be written."""

from __future__ import annotations

import json

import pytest
import yaml
from kubesched_fakes import node_raw, pod_raw

from kubesched import cli, whatif
from kubesched.backend.informers import RESOURCES
from kubesched.client import ApiError, ClusterCredentials
from kubesched.config import parse_config

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
RV = "100"


def config(**profile) -> object:
    return parse_config({**BASE, "profiles": [{"schedulerName": "default-scheduler", **profile}]}, source="test")


def most_allocated(**weights) -> object:
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    resources += [{"name": name, "weight": weight} for name, weight in weights.items()]
    return config(pluginConfig=[{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated", "resources": resources}}}])


class FakeApi:
    """Serves lists of `objects` (resource -> items) at one resourceVersion, `page` items per
    page; records every request as (method, path, params). Resources in `missing` answer 404,
    a list at an old resourceVersion answers 410 once `compacted` is set."""

    def __init__(self, objects: dict[str, list[dict]], page: int = 500):
        self.objects = objects
        self.page = page
        self.calls: list[tuple[str, str, dict]] = []
        self.missing: set[str] = set()
        self.compacted = False

    def get(self, path: str, params: dict | None = None) -> dict:
        params = dict(params or {})
        self.calls.append(("GET", path, params))
        resource = next(r for r, spec in RESOURCES.items() if spec.path == path)
        if resource in self.missing:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if self.compacted and (params.get("resourceVersionMatch") == "Exact" or "continue" in params):
            raise ApiError(410, "Expired", "too old resource version")
        if "continue" in params and "resourceVersion" in params:
            raise ApiError(400, "BadRequest", "specifying resource version is not allowed when using continue")
        start = int(params.get("continue") or 0)
        items = self.objects.get(resource, [])
        end = start + min(int(params.get("limit") or len(items) or 1), self.page)
        meta = {"resourceVersion": RV}
        if end < len(items):
            meta["continue"] = str(end)
        return {"kind": "List", "apiVersion": "v1", "metadata": meta,
                "items": json.loads(json.dumps(items[start:end]))}


def unreachable_kubeconfig(directory) -> object:
    """A kubeconfig for a server nothing listens on."""
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def cluster(nodes: list[dict], pods: list[dict]) -> FakeApi:
    return FakeApi({"nodes": nodes, "pods": pods})


def two_nodes_one_busy() -> list[dict]:
    return [node_raw("busy"), node_raw("idle")]


@pytest.fixture(autouse=True)
def no_scheduler_runs_here(tmp_path, monkeypatch):
    """The schedulers this machine runs (a lab's, another test's) are no test's current configuration."""
    empty = tmp_path / "no-proc"
    empty.mkdir()
    real = whatif.running_config
    monkeypatch.setattr(whatif, "running_config", lambda proc=str(empty): real(proc))


def test_the_snapshot_reads_every_list_at_the_pods_resource_version_and_pages_without_it():
    api = cluster(two_nodes_one_busy(), [pod_raw(f"p{i}", node="busy", cpu="10m") for i in range(5)])
    api.page = 2
    snapshot = whatif.read_snapshot(api, ["nodes", "pods", "poddisruptionbudgets"])
    assert len(snapshot.objects["pods"]) == 5 and snapshot.resource_version == RV
    first_pages = [(path, params) for _m, path, params in api.calls if "continue" not in params]
    assert first_pages[0] == ("/api/v1/pods", {"limit": whatif.PAGE_SIZE})
    assert all(params == {"resourceVersion": RV, "resourceVersionMatch": "Exact", "limit": whatif.PAGE_SIZE}
               for _path, params in first_pages[1:])
    assert [p for _m, path, p in api.calls if path == "/api/v1/pods"][1:] == [
        {"limit": whatif.PAGE_SIZE, "continue": "2"}, {"limit": whatif.PAGE_SIZE, "continue": "4"}]


def test_a_cluster_that_moved_past_the_snapshot_is_one_line_and_unserved_dra_is_skipped():
    api = cluster(two_nodes_one_busy(), [])
    api.missing = {"resourceclaims"}
    snapshot = whatif.read_snapshot(api, ["nodes", "pods", "resourceclaims"])
    assert snapshot.unserved == {"resourceclaims"}
    api.compacted = True
    with pytest.raises(whatif.SnapshotError, match="resourceVersion 100 is no longer served while listing nodes"):
        whatif.read_snapshot(api, ["nodes", "pods"])
    api.objects["pods"] = [pod_raw(f"p{i}") for i in range(3)]
    api.page = 2  # the pods' second page needs the continue token, which expired too
    with pytest.raises(whatif.SnapshotError, match="the pods' listing is no longer served while listing pods"):
        whatif.read_snapshot(api, ["nodes", "pods"])


def test_most_allocated_moves_a_pending_pod_to_the_busy_node_and_names_the_score_plugin():
    api = cluster(two_nodes_one_busy(), [pod_raw("running", node="busy", cpu="1"),
                                         pod_raw("web", cpu="500m")])
    report = whatif.what_if(config(), most_allocated(), api)
    (row,) = report["pending"]
    assert (row["pod"], row["current"]["node"], row["new"]["node"]) == ("default/web", "idle", "busy")
    assert row["changedBy"][0]["plugin"] == "NodeResourcesFit" and row["changedBy"][0]["via"] == "score"
    assert row["changedBy"][0]["delta"] > 0
    assert report["plugins"][0] == {"plugin": "NodeResourcesFit", "pods": 1}
    assert report["exitCode"] == whatif.EXIT_WITHIN_BOUNDS
    assert {method for method, _p, _q in api.calls} == {"GET"}


def test_pending_pods_are_placed_in_queue_order_each_seeing_the_last():
    nodes = [node_raw("a", cpu="1"), node_raw("b", cpu="1")]
    pods = [pod_raw("late", cpu="600m", created="2026-01-01T00:00:02Z"),
            pod_raw("early", cpu="600m", created="2026-01-01T00:00:01Z"),
            pod_raw("urgent", cpu="600m", priority=10, created="2026-01-01T00:00:03Z")]
    report = whatif.what_if(config(), config(), cluster(nodes, pods))
    order = [row["pod"] for row in report["pending"]]
    assert order == ["default/urgent", "default/early", "default/late"]
    placed = [row["new"]["node"] for row in report["pending"]]
    assert sorted(placed[:2]) == ["a", "b"] and placed[2] is None
    # unschedulable under both: not "newly"
    assert report["newlyUnschedulable"] == [] and report["exitCode"] == 0
    assert "Insufficient cpu" in report["pending"][2]["new"]["reason"]


def test_a_filter_that_strands_a_pod_exits_3_and_is_named():
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}
    new = config(pluginConfig=[{"name": "NodeAffinity", "args": {"addedAffinity": added}}])
    report = whatif.what_if(config(), new, cluster(two_nodes_one_busy(), [pod_raw("web", cpu="100m")]))
    (row,) = report["pending"]
    assert row["current"]["node"] is not None and row["new"]["node"] is None
    assert row["changedBy"] == [{"plugin": "NodeAffinity", "via": "filter"}]
    assert "didn't match scheduler-enforced node affinity" in row["new"]["reason"]
    assert report["newlyUnschedulable"] == ["default/web"]
    assert report["exitCode"] == whatif.EXIT_NEWLY_UNSCHEDULABLE


def test_gated_pending_pods_are_predicted_as_if_ungated():
    report = whatif.what_if(config(), config(), cluster([node_raw("a")], [pod_raw("held", gates=["wait"])]))
    (row,) = report["pending"]
    assert row["gated"] is True and row["new"]["node"] == "a"


def test_a_removed_profile_strands_its_pods():
    current = parse_config({**BASE, "profiles": [{"schedulerName": "default-scheduler"},
                                                 {"schedulerName": "batch"}]}, source="current")
    pods = [pod_raw("job", scheduler="batch"), pod_raw("other", scheduler="someone-else")]
    report = whatif.what_if(current, config(), cluster([node_raw("a")], pods))
    assert [row["pod"] for row in report["pending"]] == ["default/job"]  # not a profile of either config
    (row,) = report["pending"]
    assert row["new"]["reason"] == "no profile 'batch' in this configuration"
    assert row["changedBy"] == [{"plugin": "", "via": "profile"}]
    assert report["exitCode"] == whatif.EXIT_NEWLY_UNSCHEDULABLE


def test_re_placement_from_a_cluster_without_the_running_pods_packs_them_under_most_allocated():
    nodes = [node_raw(name, zone=zone) for name, zone in (("n1", "z1"), ("n2", "z1"), ("n3", "z2"))]
    pods = [pod_raw(f"r{i}", node=f"n{i % 3 + 1}", cpu="500m", created=f"2026-01-01T00:00:0{i}Z")
            for i in range(6)]
    pods.append(pod_raw("done", node="n1", cpu="3", phase="Succeeded"))
    report = whatif.what_if(config(), most_allocated(), cluster(nodes, pods))
    replacement = report["replacement"]
    assert replacement["pods"] == 6 and [row["pod"] for row in replacement["rows"]] == [
        f"default/r{i}" for i in range(6)]
    current_nodes = {row["current"]["node"] for row in replacement["rows"]}
    new_nodes = {row["new"]["node"] for row in replacement["rows"]}
    assert len(current_nodes) == 3 and len(new_nodes) == 1  # spread vs packed on one node
    assert replacement["moved"] >= 4 and replacement["newlyUnschedulable"] == 0
    by_node = {n["node"]: n for n in report["spread"]["nodes"]}
    assert sum(by_node[n]["new"]["pods"] for n in by_node) == 6
    packed = next(n for n in by_node.values() if n["new"]["pods"] == 6)
    assert packed["new"]["cpu"] == 75.0 and packed["now"]["pods"] == 2
    zones = {z["zone"]: z for z in report["spread"]["zones"]}
    assert zones["z1"]["now"] == 4 and zones["z2"]["now"] == 2
    assert zones["z1"]["new"] + zones["z2"]["new"] == 6
    text = whatif.render(report)
    assert "Spread per node" in text and "NodeResourcesFit (score" in text


def test_ties_are_broken_by_the_seed_the_same_way_twice_and_under_both_configs():
    nodes = [node_raw(f"n{i}") for i in range(8)]
    pods = [pod_raw(f"p{i}", uid=f"uid-p{i}") for i in range(6)]
    first = whatif.what_if(config(), config(), cluster(nodes, pods), seed=7)
    again = whatif.what_if(config(), config(), cluster(nodes, pods), seed=7)
    other = whatif.what_if(config(), config(), cluster(nodes, pods), seed=8)
    picks = [row["new"]["node"] for row in first["pending"]]
    assert picks == [row["new"]["node"] for row in again["pending"]]
    assert picks == [row["current"]["node"] for row in first["pending"]]
    assert picks != [row["new"]["node"] for row in other["pending"]]
    assert len(first["pending"][0]["new"]["tied"]) == 8


def test_sample_re_places_a_seeded_subset_and_leaves_the_rest_where_they_run():
    nodes = [node_raw("a"), node_raw("b")]
    pods = [pod_raw(f"r{i}", node="a", cpu="100m", created=f"2026-01-01T00:00:{i:02d}Z") for i in range(10)]
    report = whatif.what_if(config(), config(), cluster(nodes, pods), sample=3, seed=1)
    rows = report["replacement"]["rows"]
    again = whatif.what_if(config(), config(), cluster(nodes, pods), sample=3, seed=1)["replacement"]["rows"]
    assert len(rows) == 3 and [r["pod"] for r in rows] == [r["pod"] for r in again]
    assert [r["pod"] for r in rows] == sorted(r["pod"] for r in rows)  # creation order
    # 7 pods stay on a, so the re-placed ones all go to b (LeastAllocated)
    assert {r["new"]["node"] for r in rows} == {"b"}


def test_the_read_only_client_refuses_every_write_before_it_leaves():
    client = whatif.ReadOnlyClient(ClusterCredentials(server="http://127.0.0.1:1"))
    writes = [lambda: client.bind("ns", "p", "uid", "n"), lambda: client.delete_pod("ns", "p"),
              lambda: client.patch_pod_status("ns", "p", {"status": {}}),
              lambda: client.create_event("ns", {"metadata": {"name": "e"}}),
              lambda: client.request("PUT", "/api/v1/nodes/n", {})]
    for write in writes:
        with pytest.raises(whatif.WriteRefused, match="writes nothing"):
            write()
    with pytest.raises(whatif.WriteRefused):
        next(client.watch("/api/v1/pods", "1"))


def test_a_config_with_a_plugin_kubesched_lacks_stops_with_one_line(tmp_path, capsys):
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**BASE, "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]}))
    assert cli.main(["whatif", "--config", str(new), "--kubeconfig", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NoSuchPlugin" in err[0]


def test_an_unreachable_cluster_is_one_line(tmp_path, capsys):
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(BASE))
    kubeconfig = unreachable_kubeconfig(tmp_path)
    assert cli.main(["whatif", "--config", str(new), "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kubesched: error: cannot reach the API server http://127.0.0.1:1")


def test_changed_by_names_a_filter_first_then_the_window_then_scores_then_the_tie():
    from kubesched.framework.interface import Code, Status

    def decision(node, scores=None, tied=(), rejected=None):
        return whatif.Decision(node, tied=list(tied), scores=scores or {}, rejected=rejected or {})

    taint = Status(Code.UNSCHEDULABLE, "untolerated taint", plugin="TaintToleration")
    assert whatif.changed_by(decision("a"), decision("b", rejected={"a": taint})) == [
        {"plugin": "TaintToleration", "via": "filter"}]
    window = whatif.changed_by(decision("a", {"Fit": {"a": 10}}), decision("b", {"Fit": {"a": 0, "b": 10}}))
    assert window == [{"plugin": "", "via": "window"}]
    both = {"a": 50, "b": 50}
    scores = whatif.changed_by(decision("a", {"Fit": {"a": 60, "b": 40}, "Spread": both}),
                               decision("b", {"Fit": {"a": 40, "b": 60}, "Spread": both}))
    assert scores == [{"plugin": "Fit", "via": "score", "delta": 40}]
    tie = whatif.changed_by(decision("a", {"Fit": both}, tied="ab"), decision("b", {"Fit": both}, tied="ab"))
    assert tie == [{"plugin": "", "via": "tie"}]


def test_bounds_refuse_with_one_line_that_names_the_pods_and_the_plugin():
    nodes = [node_raw(name) for name in ("n1", "n2", "n3")]
    pods = [pod_raw(f"r{i}", node=f"n{i % 3 + 1}", cpu="500m", created=f"2026-01-01T00:00:0{i}Z") for i in range(6)]
    report = whatif.what_if(config(), most_allocated(), cluster(nodes, pods))
    moved = report["replacement"]["moved"]
    assert report["exitCode"] == whatif.EXIT_WITHIN_BOUNDS and report["refused"] is None  # no move bound by default
    whatif.judge(report, max_moved_percent=100.0 * moved / 6)
    assert report["exitCode"] == whatif.EXIT_WITHIN_BOUNDS
    whatif.judge(report, max_moved_percent=10)
    assert report["exitCode"] == whatif.EXIT_TOO_MANY_MOVES
    assert report["refused"].startswith(f"{moved} of 6 re-placed pods ({100.0 * moved / 6:.1f}%) land on another "
                                        "node (at most 10% allowed): default/r")
    assert "(NodeResourcesFit (score" in report["refused"]
    assert report["bounds"] == {"maxNewlyUnschedulable": 0, "maxMovedPercent": 10}


def test_a_stranded_pod_within_its_bound_is_reported_not_refused():
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}
    new = config(pluginConfig=[{"name": "NodeAffinity", "args": {"addedAffinity": added}}])
    report = whatif.what_if(config(), new, cluster([node_raw("a")], [pod_raw("web"), pod_raw("api")]))
    assert report["refused"] == ("2 pod(s) the current configuration places become unschedulable under the new one "
                                 "(at most 0 allowed): default/api (NodeAffinity (filter)), default/web "
                                 "(NodeAffinity (filter))")
    whatif.judge(report, max_newly_unschedulable=2)
    assert report["exitCode"] == whatif.EXIT_WITHIN_BOUNDS
    assert "2 pod(s) the current configuration places become unschedulable under the new one, within the bound" \
        in whatif.render(report)


def test_the_command_prints_json_and_the_refusal_and_exits_with_the_bound_it_passed(tmp_path, capsys, monkeypatch):
    pods = [pod_raw("r0", node="a", cpu="1", created="2026-01-01T00:00:01Z"),
            pod_raw("r1", node="b", cpu="1", created="2026-01-01T00:00:02Z"), pod_raw("web", cpu="100m")]
    monkeypatch.setattr(whatif, "ReadOnlyClient", lambda *_args, **_kwargs: cluster([node_raw("a"), node_raw("b")], pods))
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**BASE, "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]}))
    kubeconfig = unreachable_kubeconfig(tmp_path)
    args = ["whatif", "--config", str(new), "--kubeconfig", str(kubeconfig), "-o", "json"]
    assert cli.main(args) == whatif.EXIT_WITHIN_BOUNDS
    report = json.loads(capsys.readouterr().out)
    assert report["replacement"]["moved"] == 1 and report["refused"] is None  # spread over two nodes, then packed
    assert cli.main([*args, "--max-moved-percent", "50"]) == whatif.EXIT_WITHIN_BOUNDS
    capsys.readouterr()
    assert cli.main([*args, "--max-moved-percent", "49.5"]) == whatif.EXIT_TOO_MANY_MOVES
    out, err = capsys.readouterr()
    (moved,) = [row["pod"] for row in report["replacement"]["rows"] if row["current"]["node"] != row["new"]["node"]]
    note, line = err.splitlines()
    assert note == ("kubesched: no kube-scheduler or kubesched runs on this host: comparing with kube-scheduler's "
                    "defaults (pass --current with the running scheduler's file)")
    assert line.startswith(f"kubesched: refused: 1 of 2 re-placed pods (50.0%) land on another node (at most 49.5% "
                           f"allowed): {moved} (NodeResourcesFit (score +")
    assert json.loads(out)["exitCode"] == whatif.EXIT_TOO_MANY_MOVES
    assert cli.main([*args, "--max-moved-percent", "101"]) == 1
    assert capsys.readouterr().err.strip() == "kubesched: error: --max-moved-percent must be between 0 and 100, got 101"


# --- the running scheduler's configuration, when --current is not given ----------------------------

def fake_process(proc, pid: int, argv: list[str], cwd=None, root=None) -> None:
    directory = proc / str(pid)
    directory.mkdir(parents=True)
    (directory / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")
    if cwd is not None:
        (directory / "cwd").symlink_to(cwd)
    (directory / "root").symlink_to(root or "/")


def test_the_running_kubesched_s_config_is_the_current_one_and_its_other_commands_are_not(tmp_path):
    proc = tmp_path / "proc"
    config = tmp_path / "etc" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(BASE))
    fake_process(proc, 40, ["/opt/r/venv/bin/python", "/opt/r/venv/bin/kubesched", f"--config={config}", "-v=2"])
    fake_process(proc, 41, ["/opt/r/venv/bin/python", "/opt/r/venv/bin/kubesched", "whatif", "--config", "x"])
    fake_process(proc, 42, ["/usr/bin/python3", "-m", "http.server", "--config=y"])
    fake_process(proc, 43, ["bash", "-c", "kube-scheduler --config=z"])
    assert [(s.pid, s.program, s.config) for s in whatif.running_schedulers(str(proc))] == [
        (40, "kubesched", str(config))]
    path, where = whatif.running_config(str(proc))
    assert path == str(config) and "kubesched (pid 40)" in where


def test_a_container_s_scheduler_is_read_through_its_root_and_a_relative_path_from_its_cwd(tmp_path):
    proc, container = tmp_path / "proc", tmp_path / "container"
    (container / "etc" / "kubernetes").mkdir(parents=True)
    (container / "etc" / "kubernetes" / "scheduler.yaml").write_text(yaml.safe_dump(BASE))
    fake_process(proc, 7, ["kube-scheduler", "--config", "scheduler.yaml"], cwd="/etc/kubernetes", root=container)
    [found] = whatif.running_schedulers(str(proc))
    assert found.config == "/etc/kubernetes/scheduler.yaml"
    assert found.readable == str(proc / "7" / "root") + "/etc/kubernetes/scheduler.yaml"
    assert whatif.running_config(str(proc))[0] == found.readable


def test_no_scheduler_or_one_without_a_config_means_the_defaults(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    path, where = whatif.running_config(str(proc))
    assert path is None and "no kube-scheduler or kubesched runs on this host" in where
    fake_process(proc, 9, ["/usr/local/bin/kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf"])
    path, where = whatif.running_config(str(proc))
    assert path is None and "kube-scheduler (pid 9) has no --config" in where


def test_two_schedulers_with_different_files_must_be_told_apart_with_current(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 10, ["kube-scheduler", "--config=/etc/a.yaml"])
    fake_process(proc, 11, ["/v/bin/python", "/v/bin/kubesched", "--config=/etc/b.yaml"])
    with pytest.raises(whatif.CurrentConfigError, match=r"pid 10 kube-scheduler /etc/a.yaml, pid 11 kubesched "
                                                        r"/etc/b.yaml\): pass --current"):
        whatif.running_config(str(proc))


def test_an_unreadable_running_config_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    proc = tmp_path / "proc"
    fake_process(proc, 12, ["kube-scheduler", f"--config={tmp_path}/missing.yaml"])
    real = whatif.running_config
    monkeypatch.setattr(whatif, "running_config", lambda: real(str(proc)))
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(BASE))
    assert cli.main(["whatif", "--config", str(new), "--kubeconfig", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kubesched: error: the running kube-scheduler (pid 12) runs {tmp_path}/missing.yaml, which this "
                   "user cannot read: run as root, or pass --current with a copy"]


def test_the_scheduler_s_feature_gates_are_taken_and_an_unknown_one_is_one_line(tmp_path, capsys, monkeypatch):
    api = cluster(two_nodes_one_busy(), [pod_raw("web", cpu="100m")])
    monkeypatch.setattr(whatif, "ReadOnlyClient", lambda *_args, **_kwargs: api)
    built = []
    real = whatif.Scheduler
    monkeypatch.setattr(whatif, "Scheduler", lambda cfg, *a, **kw: built.append((cfg, kw["feature_gates"])) or
                        real(cfg, *a, **kw))
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(BASE))
    args = ["whatif", "--config", str(new), "--kubeconfig", str(unreachable_kubeconfig(tmp_path)), "-o", "json"]
    assert cli.main([*args, "--feature-gates=NoSuchGate=true"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("kubesched: error: ") and "NoSuchGate" in line and not built
    assert cli.main([*args, "--feature-gates=GenericWorkload=true"]) == whatif.EXIT_WITHIN_BOUNDS
    report = json.loads(capsys.readouterr().out)
    assert report["pending"][0]["new"] == report["pending"][0]["current"]
    # Both configurations, each twice (pending pods, then the re-placement), with the gate on and
    # the default profile it implies (GangScheduling added).
    assert len(built) == 4 and all(gates["GenericWorkload"] for _cfg, gates in built)
    assert all("GangScheduling" in {p.name for p in cfg.profiles[0].plugins["multiPoint"].enabled}
               for cfg, _gates in built)


def test_a_re_created_pod_keeps_the_claims_made_for_it_and_nothing_else_of_its_status():
    pod = pod_raw("gpu-0", node="a")
    pod["status"] = {"phase": "Running", "nominatedNodeName": "b", "conditions": [{"type": "Ready"}],
                     "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gpu-0-gpu-x7k2p"}]}
    (fresh,) = whatif.recreated([pod])
    assert "nodeName" not in fresh["spec"]
    assert fresh["status"] == {"phase": "Pending",
                               "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gpu-0-gpu-x7k2p"}]}
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "a"  # the snapshot is left as it was
