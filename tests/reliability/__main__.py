"""`make reliability`: run the suites, print a summary, write the JSON and the doc.

    .venv/bin/python -m tests.reliability                      everything (35-45 minutes on 2 busy CPUs)
    .venv/bin/python -m tests.reliability --suite failover     one suite (repeatable)
    .venv/bin/python -m tests.reliability --keep-lab           leave the private lab running
    .venv/bin/python -m tests.reliability --keep-masters       leave the container masters running, and
                                                         reuse running ones (for work on one suite)

The private lab (default /tmp/rel-lab on 127.0.0.1:16643, etcd on 12579/12580; override with
RELIABILITY_LAB_DIR, RELIABILITY_LAB_API_PORT, RELIABILITY_LAB_ETCD_PORT,
RELIABILITY_LAB_ETCD_PEER_PORT) is started here and stopped at the end. A run of only some
suites replaces those suites in tests/reliability/results/latest.json and keeps the others.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import signal
import sys
import time

from lab.cluster import Cluster
from lab.private_lab import ROOT, PrivateLab
from tests.reliability import apiserver, bad_configs, bad_module_inputs, failover, races, report, roles, security
from tests.reliability.instances import stop_all
from tests.reliability.masters import Masters, image_available
from tests.reliability.result import SuiteResult

SUITES = ("bad_configs", "failover", "apiserver", "races", "bad_module_inputs", "roles", "security")
# The suites' own directory: emptied at each run. The soak keeps its logs beside it, in work/soak,
# until the next soak (they are what a broken invariant is diagnosed from).
WORKDIR = ROOT / "tests" / "reliability" / "work" / "suites"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", action="append", choices=SUITES, help="run only this suite (repeatable)")
    parser.add_argument("--pods", type=int, default=2000, help="failover backlog (default 2000)")
    parser.add_argument("--restart-pods", type=int, default=1000, help="API server suite backlog (default 1000)")
    parser.add_argument("--keep-lab", action="store_true", help="leave the private lab running at the end")
    parser.add_argument("--keep-masters", action="store_true",
                        help="leave the container masters running at the end, and reuse them when they already run")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite docs/reliability.md from tests/reliability/results/latest.json")
    args = parser.parse_args(argv)
    chosen = args.suite or list(SUITES)
    if args.render:
        data = report.load()
        if data is None:
            print(f"reliability: {report.RESULTS.relative_to(ROOT)} is missing or unreadable; run the suites first",
                  file=sys.stderr)
            return 1
        report.write_doc(data)
        return 0

    shutil.rmtree(WORKDIR, ignore_errors=True)
    WORKDIR.mkdir(parents=True)
    workdir = str(WORKDIR)
    lab = PrivateLab.from_env()
    wants_masters = ("roles" in chosen or "security" in chosen) and image_available()
    masters = Masters(lab, WORKDIR / "masters") if wants_masters else None

    def clean_up() -> None:
        stop_all()
        if masters is not None and not args.keep_masters:
            masters.remove()
        if not args.keep_lab:
            try:
                lab.down()
            except Exception as err:  # noqa: BLE001 - best effort on the way out
                print(f"reliability: could not stop the private lab: {err}", file=sys.stderr)

    atexit.register(clean_up)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    print(f"reliability: starting the private lab at https://127.0.0.1:{lab.api_port} ({lab.directory})", flush=True)
    lab.up()
    cluster = Cluster(lab.kubeconfig)
    cluster.ensure_nodes(50)
    results: list[SuiteResult] = []
    for name in chosen:
        started = time.monotonic()
        print(f"reliability: suite {name} ...", flush=True)
        if name == "bad_configs":
            result = bad_configs.run(workdir)
        elif name == "failover":
            result = failover.run(cluster, workdir, pods=args.pods)
        elif name == "apiserver":
            result = apiserver.run(lab, cluster, workdir, pods=args.restart_pods)
            cluster = Cluster(lab.kubeconfig)  # the old connection pool saw the restart
        elif name == "races":
            result = races.run(cluster, workdir)
        elif name == "bad_module_inputs":
            result = bad_module_inputs.run(cluster, workdir)
        elif name == "roles":
            if masters is None:
                result = SuiteResult("roles", "Role failure modes and the role's config validation")
                result.check("the container master image exists (make setup builds it)", False,
                             "localhost/kubesched-master:bookworm is missing")
                result.finish()
            else:
                result = roles.run(lab, cluster, workdir, masters, reuse=args.keep_masters)
        else:
            converged = masters is not None and masters.converged
            result = security.run(lab, cluster, workdir, masters, masters_ready=converged, reuse=args.keep_masters)
        print(f"reliability: suite {name}: {'passed' if result.passed else 'FAILED'} "
              f"in {time.monotonic() - started:.0f} s", flush=True)
        results.append(result)

    settings = {"suites": chosen, "failover_pods": args.pods, "apiserver_pods": args.restart_pods,
                "lab": {"api_port": lab.api_port, "etcd_port": lab.etcd_port}}
    fresh = [r.to_dict() for r in results]
    print("\n".join(report.summary_lines(report.build(fresh, settings))))
    merged = report.merge(report.load(), fresh)
    settings["suites"] = [suite["name"] for suite in merged]
    settings["last_run_suites"] = chosen
    data = report.build(merged, settings)
    report.write_json(data)
    report.write_doc(data)
    print(f"reliability: wrote {report.RESULTS.relative_to(ROOT)} and {report.DOC.relative_to(ROOT)}"
          + ("" if set(chosen) == set(SUITES) else f" (suites {', '.join(chosen)} replaced, the others kept)"))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
