"""/metrics of kubesched against the pinned kube-scheduler's, on the lab.

Both schedulers run with leader election (a Lease each), schedule one pod that fits and fail
one that cannot fit; then both /metrics are scraped and compared family by family:
- every process_* and rest_client_* family kube-scheduler shows is in kubesched's with the same
  type, help text, label names and buckets;
- every metric docs/scheduler.md lists (the "/metrics" paragraph) is in both with the same type,
  the label names the doc gives, and for histograms the same buckets; a family the doc marks as
  kubesched's own is absent from kube-scheduler's;
- kubesched's process_* cover its API I/O children (apiproc.py), as the doc says;
- every feature gate kube-scheduler reports in kubernetes_feature_enabled is in
  kubesched/kube_features.py with the same stage, and the other way round.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
import yaml
from kubesched_lab import KUBESCHED, KubeschedProcess, free_port, pod_manifest, wait_for

from kubesched.kube_features import KNOWN
from lab.binaries import binary
from lab.fake_nodes import create_nodes, delete_nodes

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "scheduler.md"
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "")


class Family:
    def __init__(self, name: str):
        self.name, self.type, self.help = name, "", ""
        self.labels: set[str] = set()
        self.buckets: set[float] = set()
        self.samples: list[tuple[str, dict, float]] = []


def parse(text: str) -> dict[str, Family]:
    """The text exposition format, as families: type, help, label names (le aside), buckets."""
    families: dict[str, Family] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _hash, kind, name, *rest = line.split(" ", 3)
            family = families.setdefault(name, Family(name))
            if kind == "HELP":
                family.help = rest[0] if rest else ""
            else:
                family.type = rest[0]
            continue
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        name, raw_labels, value = match.groups()
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', raw_labels or ""))
        family = next((families[name[:len(name) - len(s)] if s else name] for s in SUFFIXES
                       if name.endswith(s) and (name[:len(name) - len(s)] if s else name) in families), None)
        if family is None:
            continue
        if "le" in labels:
            family.buckets.add(float(labels.pop("le")))
        family.labels.update(labels)
        family.samples.append((name, labels, float(value)))
    return families


def documented_metrics() -> dict[str, set[str] | None]:
    """The metrics the doc's /metrics paragraph lists: name -> label names (None when the doc
    gives none, i.e. the metric has none)."""
    text = DOC.read_text()
    paragraph = text[text.index("`/metrics` (prometheus_client) uses upstream's names"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    found = {}
    for name, labels in re.findall(r"`([a-z_]+)(?:\{([^}]*)\})?`", paragraph):
        found[name] = {label.split("=")[0] for label in labels.split(",")} if labels else None
    return found


def kubesched_only() -> set[str]:
    text = DOC.read_text()
    line = next(x for x in text.splitlines() if x.startswith("kubesched's own"))
    return set(re.findall(r"`([a-z_]+)`", line))


def _metrics(process: KubeschedProcess) -> str:
    code, text = process.get("/metrics", timeout=10)
    assert code == 200, text[:500]
    return text


@pytest.fixture(scope="module")
def scraped(lab_kubeconfig, core_v1, tmp_path_factory):
    """{"kube-scheduler": families, "kubesched": families, "kubesched-pid": pid}."""
    tmp = tmp_path_factory.mktemp("metrics")
    tag = uuid.uuid4().hex[:5]
    names = create_nodes(core_v1, 1, prefix=f"metrics-{tag}-", cpu="4", zones=0)
    namespace = f"metrics-{tag}"
    core_v1.create_namespace({"metadata": {"name": namespace, "labels": {"kubesched.io/test": "true"}}},
                             _preload_content=False)
    ca = str(Path(lab_kubeconfig).parent / "ca.crt")
    processes = {}
    try:
        for kind in ("kube-scheduler", "kubesched"):
            scheduler_name = f"metrics-{kind}-{tag}"
            config = tmp / f"{kind}.yaml"
            config.write_text(yaml.safe_dump({
                "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": lab_kubeconfig},
                "leaderElection": {"leaderElect": True, "resourceName": scheduler_name,
                                   "resourceNamespace": "kube-system"},
                "profiles": [{"schedulerName": scheduler_name}]}))
            command = binary("kube-scheduler") if kind == "kube-scheduler" else str(KUBESCHED)
            port = free_port()
            process = KubeschedProcess(
                [command, "--config", str(config), "--secure-port", str(port), "--bind-address", "127.0.0.1",
                 "--client-ca-file", ca, "--authentication-kubeconfig", lab_kubeconfig,
                 "--authorization-kubeconfig", lab_kubeconfig, "-v=2"], port, tmp / f"{kind}.log", name=kind)
            processes[kind] = process
            process.wait_ready(60)
            wait_for(lambda p=process: re.search(r"^leader_election_master_status\{[^}]*\} 1", _metrics(p), re.M),
                     60, 0.5, f"{kind} to lead")
            fits = pod_manifest(f"fits-{kind}", schedulerName=scheduler_name, containers=[
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}])
            too_big = pod_manifest(f"too-big-{kind}", schedulerName=scheduler_name, containers=[
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100"}}}])
            for pod in (fits, too_big):
                core_v1.create_namespaced_pod(namespace, pod, _preload_content=False)
            wait_for(lambda k=kind: core_v1.read_namespaced_pod(f"fits-{k}", namespace).spec.node_name, 30, 0.2,
                     f"{kind} to bind a pod")
            wait_for(lambda k=kind: any(c.type == "PodScheduled" and c.status == "False" for c in
                                        core_v1.read_namespaced_pod(f"too-big-{k}", namespace).status.conditions
                                        or ()), 30, 0.2, f"{kind} to fail a pod")
        yield {kind: parse(_metrics(process)) for kind, process in processes.items()} | {
            "kubesched-pid": processes["kubesched"].pid}
    finally:
        for process in processes.values():
            process.stop()
        core_v1.delete_namespace(namespace, _preload_content=False)
        delete_nodes(core_v1, names)


def _same(upstream: Family, ours: Family | None, *, help_text: bool) -> list[str]:
    if ours is None:
        return [f"{upstream.name}: missing"]
    problems = []
    if ours.type != upstream.type:
        problems.append(f"{upstream.name}: type {ours.type}, kube-scheduler's {upstream.type}")
    if ours.labels != upstream.labels:
        problems.append(f"{upstream.name}: labels {sorted(ours.labels)}, kube-scheduler's {sorted(upstream.labels)}")
    if upstream.type == "histogram" and ours.buckets != upstream.buckets:
        problems.append(f"{upstream.name}: buckets {sorted(ours.buckets)}, kube-scheduler's {sorted(upstream.buckets)}")
    if help_text and ours.help != upstream.help:
        problems.append(f"{upstream.name}: help {ours.help!r}, kube-scheduler's {upstream.help!r}")
    return problems


@pytest.mark.parametrize("prefix", ["process_", "rest_client_"])
def test_process_and_rest_client_families_are_kube_schedulers(scraped, prefix):
    upstream = {n: f for n, f in scraped["kube-scheduler"].items() if n.startswith(prefix)}
    assert len(upstream) >= (9 if prefix == "process_" else 10), sorted(upstream)
    problems = [p for name, family in sorted(upstream.items())
                for p in _same(family, scraped["kubesched"].get(name), help_text=True)]
    assert problems == []


def test_rest_client_requests_count_the_schedulers_own_requests(scraped):
    """The requests of the watch process (lists, watches) and of the writer (the bind, events) are counted."""
    requests = scraped["kubesched"]["rest_client_requests_total"]
    by_method = {}
    for _name, labels, value in requests.samples:
        assert labels["host"].startswith("127.0.0.1:") and labels["code"].isdigit()
        by_method[labels["method"]] = by_method.get(labels["method"], 0) + value
    assert by_method.get("GET", 0) >= 8  # every informer's list and watch
    assert by_method.get("POST", 0) >= 2  # the binding and the events
    assert by_method.get("PUT", 0) + by_method.get("POST", 0) >= 3  # the Lease


def test_every_documented_metric_is_kube_schedulers(scraped):
    documented = documented_metrics()
    own = kubesched_only()
    assert len(documented) >= 15 and own <= set(documented)
    problems = []
    for name, labels in sorted(documented.items()):
        ours = scraped["kubesched"].get(name)
        if ours is None:
            problems.append(f"{name}: documented, not in kubesched's /metrics")
            continue
        if ours.labels != (labels or set()):
            problems.append(f"{name}: the doc says labels {sorted(labels or ())}, kubesched has {sorted(ours.labels)}")
        if name in own:
            if name in scraped["kube-scheduler"]:
                problems.append(f"{name}: documented as kubesched's own, but kube-scheduler has it")
            continue
        upstream = scraped["kube-scheduler"].get(name)
        if upstream is None:
            problems.append(f"{name}: documented as upstream's, not in kube-scheduler's /metrics")
            continue
        problems += _same(upstream, ours, help_text=False)
    assert problems == []


def _tree(pid: int) -> list[int]:
    out = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            out += [int(child) for child in fh.read().split()]
    return out


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[21]) * os.sysconf("SC_PAGE_SIZE")


def test_process_metrics_cover_the_api_children(scraped):
    tree = _tree(scraped["kubesched-pid"])
    assert len(tree) == 3  # the scheduler, its watch and its writer process
    memory = scraped["kubesched"]["process_resident_memory_bytes"].samples[0][2]
    own, total = _rss(tree[0]), sum(_rss(pid) for pid in tree)
    # The scrape was a moment ago: the tree's sum, not the scheduler's alone.
    assert abs(memory - total) < 0.2 * total and memory > own * 1.2


def test_every_feature_gate_kube_scheduler_reports_is_known(scraped):
    reported = {labels["name"]: labels["stage"] for _name, labels, _value in
                scraped["kube-scheduler"]["kubernetes_feature_enabled"].samples}
    assert len(reported) > 200
    assert reported == {name: stage for name, (_default, _locked, stage) in KNOWN.items()}
