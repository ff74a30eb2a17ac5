"""What upstream's scheduler_perf says about its workloads that carry a threshold: each
one's counts, operations, node and pod templates, feature gates and threshold, read from
k8s.io/kubernetes's own configs (test/integration/scheduler_perf/*/performance-config.yaml
and their templates) and the defaults of the gates they set (pkg/features/kube_features.go).

The extract is committed (tests/bench/scheduler_perf_1.37.1.json), so the unit test that
holds the bench's workloads to upstream's shapes needs no Go module cache:

    .venv/bin/python -m tests.bench.scheduler_perf            # write the extract from the module cache
    .venv/bin/python -m tests.bench.scheduler_perf --check    # exit 1 when it differs from upstream's source
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys

import yaml

from lab.binaries import K8S_VERSION

EXTRACT = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"scheduler_perf_{K8S_VERSION.lstrip('v')}.json")
PERF_DIR = os.path.join("test", "integration", "scheduler_perf")
TEMPLATE_KEYS = ("podTemplatePath", "nodeTemplatePath", "templatePath")


def kubernetes_source() -> str:
    """k8s.io/kubernetes at the pinned version in the Go module cache (make setup puts it there)."""
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    source = os.path.join(cache, "k8s.io", f"kubernetes@{K8S_VERSION}")
    if not os.path.isdir(source):
        raise FileNotFoundError(f"{source} is missing; 'make setup' downloads k8s.io/kubernetes {K8S_VERSION}")
    return source


def _template(path: str) -> dict | str:
    """A template as YAML, or as text when Go template actions make it something else."""
    with open(path) as handle:
        text = handle.read()
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _resolve(op: dict, params: dict, config_dir: str, default_pod_template: str | None, perf_dir: str) -> dict:
    resolved = {}
    for key, value in op.items():
        if isinstance(value, str) and value.startswith("$"):
            value = params.get(value[1:])
        resolved[key] = value
    if op.get("opcode") == "createPods" and not resolved.get("podTemplatePath"):
        resolved["podTemplatePath"] = default_pod_template
    for key in TEMPLATE_KEYS:
        if resolved.get(key):
            path = os.path.normpath(os.path.join(config_dir, resolved[key]))
            resolved[key] = os.path.relpath(path, perf_dir)
            resolved[key.replace("Path", "")] = _template(path)
    if resolved.get("templatePaths"):
        paths = [os.path.normpath(os.path.join(config_dir, path)) for path in resolved["templatePaths"]]
        resolved["templatePaths"] = [os.path.relpath(path, perf_dir) for path in paths]
        resolved["templates"] = [_template(path) for path in paths]
    return resolved


def gate_defaults(source: str, names: set[str]) -> dict[str, bool]:
    """Each gate's default at the pinned minor version, from pkg/features/kube_features.go."""
    with open(os.path.join(source, "pkg", "features", "kube_features.go")) as handle:
        text = handle.read()
    minor = int(K8S_VERSION.split(".")[1])
    defaults = {}
    for name in sorted(names):
        block = re.search(rf"^\t{name}: {{\n(.*?)^\t}},", text, flags=re.M | re.S)
        if not block:
            raise ValueError(f"feature gate {name} is not in kube_features.go")
        stages = re.findall(r'MustParse\("1\.(\d+)"\), Default: (true|false)', block.group(1))
        defaults[name] = [default == "true" for version, default in stages if int(version) <= minor][-1]
    return defaults


def extract(source: str) -> dict:
    perf_dir = os.path.join(source, PERF_DIR)
    workloads = []
    for config in sorted(glob.glob(os.path.join(perf_dir, "**", "performance-config.yaml"), recursive=True)):
        config_dir = os.path.dirname(config)
        with open(config) as handle:
            testcases = yaml.safe_load(handle)
        for testcase in testcases:
            default_pod = testcase.get("defaultPodTemplatePath")
            if default_pod:
                default_pod = os.path.join(config_dir, default_pod)
            for workload in testcase.get("workloads", []):
                if "threshold" not in workload:
                    continue
                params = workload.get("params") or {}
                default_rel = os.path.relpath(default_pod, config_dir) if default_pod else None
                workloads.append({
                    "config": os.path.relpath(config, perf_dir),
                    "name": f"{testcase['name']}/{workload['name']}",
                    "threshold": workload["threshold"],
                    "params": params,
                    "featureGates": {**(testcase.get("featureGates") or {}), **(workload.get("featureGates") or {})},
                    "ops": [_resolve(op, params, config_dir, default_rel, perf_dir) for op in testcase["workloadTemplate"]],
                })
    gates = {gate for workload in workloads for gate in workload["featureGates"]}
    return {"kubernetes": K8S_VERSION, "gateDefaults": gate_defaults(source, gates), "workloads": workloads}


def load_extract() -> dict:
    with open(EXTRACT) as handle:
        return json.load(handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.scheduler_perf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare the committed extract with upstream's source")
    args = parser.parse_args(argv)
    fresh = extract(kubernetes_source())
    if args.check:
        if fresh != load_extract():
            print(f"{EXTRACT} differs from upstream's scheduler_perf {K8S_VERSION}; run without --check to rewrite it",
                  file=sys.stderr)
            return 1
        print(f"{os.path.relpath(EXTRACT)} matches upstream's scheduler_perf {K8S_VERSION}")
        return 0
    with open(EXTRACT, "w") as handle:
        json.dump(fresh, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"wrote {os.path.relpath(EXTRACT)}: {len(fresh['workloads'])} workloads with a threshold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
