"""`make soak`'s smoke, in `make test`: SOAK_MINUTES (default 5) of kubesched, three instances
with leader election on a private lab of their own, a steady mixed arrival, and every fault kind
of the soak at least once, overlapping. Every invariant the full soak checks must hold
(tests/reliability/soak/run.py verdicts) but memory flatness, which needs the full soak's
length.

It is the full soak made small (10 pods/s on 40 nodes, kubesched only: the comparison with
kube-scheduler is `make soak`'s); its work directory keeps the logs and result.json of the last
run (tests/reliability/work/soak/smoke).
"""

from __future__ import annotations

import os
import shutil

import pytest

from lab.private_lab import ROOT
from tests.reliability.soak.plan import Settings, make_plan
from tests.reliability.soak.run import Run, save, verdicts

SMOKE = dict(rate=10.0, nodes=40, warmup_s=40.0, tail_s=60.0)
WORKDIR = ROOT / "tests" / "reliability" / "work" / "soak" / "smoke"
MINUTES = float(os.environ.get("SOAK_MINUTES") or 5)
MEMORY_VERDICT = "RSS, threads and open files"


# The planned minutes, the lab and workload set-up, the settling (at most 330 s) and the checks.
@pytest.mark.timeout(int(MINUTES * 60) + 900)
def test_soak_smoke_every_invariant_holds_through_every_fault():
    minutes = MINUTES
    plan = make_plan(Settings(minutes=minutes, **SMOKE))
    shutil.rmtree(WORKDIR, ignore_errors=True)
    result = Run("kubesched", plan, WORKDIR, memory_warmup_s=min(300.0, plan.settings.seconds / 3)).execute()
    save(result, WORKDIR / "result.json")
    # Memory is judged by `make soak`: five minutes with a fault every twenty seconds leave no
    # stretch of one role long enough to tell a leak from a new leader's warm-up.
    broken = [f"{name}: {detail}" for name, held, detail in verdicts(result)
              if not held and (minutes >= 20 or not name.startswith(MEMORY_VERDICT))]
    assert not broken, "\n".join(broken) + f"\n(logs and result.json in {WORKDIR})"
