"""`make soak`: the soak, kubesched then kube-scheduler, each on its own private lab.

    .venv/bin/python -m tests.reliability.soak                          both, SOAK_MINUTES (default 30)
    .venv/bin/python -m tests.reliability.soak --scheduler kubesched    one
    .venv/bin/python -m tests.reliability.soak --minutes 5 --rate 20 --nodes 60   a small one
    .venv/bin/python -m tests.reliability.soak --render                 only the plot and docs/reliability.md

Each run replaces its scheduler's entry in tests/reliability/results/soak.json; the plot
(tests/reliability/results/soak.png) and docs/reliability.md are generated from that file.
Exit status 1 when an invariant broke in a kubesched run (a kube-scheduler run is the
comparison, and what it shows is reported, not judged).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import sys

from lab.private_lab import ROOT
from tests.bench.load import become_subreaper
from tests.reliability import report
from tests.reliability.instances import stop_all
from tests.reliability.soak import results
from tests.reliability.soak.plan import Settings, make_plan
from tests.reliability.soak.run import Run, save, verdicts
from tests.reliability.soak.schedulers import IMPLEMENTATIONS

WORKDIR = ROOT / "tests" / "reliability" / "work" / "soak"


def main(argv: list[str] | None = None) -> int:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheduler", action="append", choices=IMPLEMENTATIONS,
                        help="run only this scheduler (repeatable; default both, kubesched first)")
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES") or defaults.minutes))
    parser.add_argument("--rate", type=float, default=defaults.rate, help="pods per second arriving (default 50)")
    parser.add_argument("--nodes", type=int, default=defaults.nodes, help="general kwok nodes (default 300)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--render", action="store_true", help="only regenerate the plot and docs/reliability.md")
    parser.add_argument("--no-save", action="store_true", help="print the verdicts, write no results")
    args = parser.parse_args(argv)
    if args.render:
        return _render()
    if args.minutes <= 0 or args.rate <= 0 or args.nodes < 20:
        parser.error("--minutes and --rate must be positive and --nodes at least 20")
    settings = Settings(seed=args.seed, minutes=args.minutes, rate=args.rate, nodes=args.nodes,
                        warmup_s=min(defaults.warmup_s, args.minutes * 60 / 5),
                        tail_s=min(defaults.tail_s, args.minutes * 60 / 4))
    plan = make_plan(settings)
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # As the bench: the lab's daemons, orphaned when lab.sh exits, are re-parented here rather
    # than to init, so a kube-apiserver or etcd that a fault stops keeps its CPU time in the
    # run's account (the last run, without this, charged 1,083 CPU-s of the kubesched half's
    # stopped daemons to pid 1 and called the machine busy). Not in the smoke: pytest would
    # adopt every orphan of the test session.
    if not become_subreaper():
        print("soak: this kernel refuses PR_SET_CHILD_SUBREAPER: CPU the lab's stopped daemons spent counts as "
              "other processes'", file=sys.stderr)
    failed = False
    for implementation in args.scheduler or list(IMPLEMENTATIONS):
        workdir = WORKDIR / implementation
        shutil.rmtree(workdir, ignore_errors=True)
        result = Run(implementation, plan, workdir, memory_warmup_s=min(300.0, settings.seconds / 3)).execute()
        save(result, workdir / "result.json")
        for name, held, detail in verdicts(result):
            print(f"{'PASS' if held else 'FAIL'}  {implementation}: {name}: {detail}")
            failed |= implementation == "kubesched" and not held
        if not args.no_save:
            results.record(result, report.commit())
    if not args.no_save:
        _render()
    return 1 if failed else 0


def _render() -> int:
    data = results.load()
    if not data:
        print(f"soak: {results.RESULTS.relative_to(ROOT)} is missing; run the soak first", file=sys.stderr)
        return 1
    results.plot(data)
    report.write_doc(report.load() or report.build([], {}))
    print(f"soak: wrote {results.PLOT.relative_to(ROOT)} and {report.DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
