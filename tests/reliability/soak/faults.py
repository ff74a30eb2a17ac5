"""The fault driver: carries out the plan's faults on time, each on a thread of its own, so
they overlap as the plan has them overlap.

Faults that act on the same part wait for each other (the control plane, the extender, the
certificates); an instance held by one fault is left alone by the supervisor and by the
next leader kill, which takes whoever leads by then. Each fault leaves a record: when it was
planned, when it began and ended (seconds from the run's start), what it did, and for an
outage of the API server or etcd the window in which the API did not answer, which the
leader-gap check allows for.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from lab.cluster import Cluster
from lab.fake_nodes import create_nodes, delete_nodes, make_not_ready, make_ready, wait_until_ready
from lab.private_lab import ROOT, PrivateLab
from tests.reliability.instances import free_port, wait_until
from tests.reliability.proxy import ResettingProxy
from tests.reliability.soak.certificates import Certificates
from tests.reliability.soak.plan import Fault, Plan
from tests.reliability.soak.schedulers import SchedulerSet
from tests.reliability.soak.workload import NODE_CPU, NODE_MEMORY

EXTENDER_SERVER = ROOT / "tests" / "integration" / "kubesched" / "extender_server.py"
EXTENDER_TIMEOUT_S = 2.0
# The configuration change the rollout makes, and back again on the next one.
ROLLOUT_CHANGES = ({"percentageOfNodesToScore": 70}, {"percentageOfNodesToScore": 0})


class Extender:
    """tests/integration/kubesched/extender_server.py on a port of its own, told at run time how
    to misbehave (its /control verb), or stopped and continued by its pid."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.log = open(Path(workdir) / "extender.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, str(EXTENDER_SERVER), "--port", str(self.port),
                                      "--score", "soak-node-1=5"], stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        if not wait_until(lambda: self._control({}) is not None, 30, 0.2):
            raise RuntimeError(f"the soak's extender did not answer on 127.0.0.1:{self.port}")

    def config(self) -> dict:
        """The extenders: entry of the schedulers' configuration."""
        return {"urlPrefix": f"http://127.0.0.1:{self.port}", "filterVerb": "filter", "prioritizeVerb": "prioritize",
                "weight": 1, "nodeCacheCapable": True, "ignorable": False,
                "httpTimeout": f"{EXTENDER_TIMEOUT_S:g}s",
                "managedResources": [{"name": "example.com/soak-ext", "ignoredByScheduler": True}]}

    def _control(self, misbehave: dict) -> dict | None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/control",
                                         data=json.dumps({"misbehave": misbehave}).encode(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return json.loads(resp.read())
        except OSError:
            return None

    def misbehave(self, rules: dict) -> None:
        if self._control(rules) is None:
            raise RuntimeError("the extender did not take its new rules")

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class FaultDriver:
    def __init__(self, plan: Plan, *, lab: PrivateLab, cluster: Cluster, schedulers: SchedulerSet,
                 extender: Extender, proxy: ResettingProxy, certificates: Certificates, origin: float):
        self.plan = plan
        self.lab = lab
        self.cluster = cluster
        self.schedulers = schedulers
        self.extender = extender
        self.proxy = proxy
        self.certificates = certificates
        self.origin = origin
        self.records: list[dict] = []
        self.outages: list[tuple[float, float]] = []  # (from, to) seconds: the API did not answer
        self.rollouts = 0
        self.locks = {name: threading.Lock() for name in ("control_plane", "extender", "certificates", "rollout")}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def now(self) -> float:
        return round(time.monotonic() - self.origin, 2)

    def start(self) -> None:
        for fault in self.plan.faults:
            thread = threading.Thread(target=self._run, args=(fault,), name=f"fault-{fault.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        self._stop.set()
        self.wait(120)

    def _run(self, fault: Fault) -> None:
        if self._stop.wait(max(0.0, self.origin + fault.at - time.monotonic())):
            return
        record = {"kind": fault.kind, "planned_at": fault.at, "planned_s": fault.duration, "began": self.now()}
        try:
            record.update(getattr(self, fault.kind)(fault) or {})
            record["ok"] = True
        except Exception as err:  # noqa: BLE001 - a fault that cannot be carried out is recorded, not fatal
            record.update(ok=False, error=repr(err)[:400])
        record["ended"] = self.now()
        self.records.append(record)

    def _hold(self, began: float, seconds: float) -> None:
        self._stop.wait(max(0.0, began + seconds - time.monotonic()))

    # -- the scheduler instances ----------------------------------------------------------

    def _leader_signal(self, fault: Fault, sig: int) -> dict:
        # An outage of the API server may leave no leader for a while: wait it out.
        slot = self.schedulers.leader(timeout=90)
        if slot is None:
            return {"skipped": "no single leader within 90 s"}
        acted = self.now()
        return {"began": acted, **self.schedulers.stop_for(slot, sig, fault.duration, f"fault:{fault.kind}")}

    def leader_sigkill(self, fault: Fault) -> dict:
        return self._leader_signal(fault, signal.SIGKILL)

    def leader_sigterm(self, fault: Fault) -> dict:
        return self._leader_signal(fault, signal.SIGTERM)

    def config_rollout(self, _fault: Fault) -> dict:
        with self.locks["rollout"]:
            acted = self.now()
            change = ROLLOUT_CHANGES[self.rollouts % len(ROLLOUT_CHANGES)]
            self.rollouts += 1
            return {"began": acted, "change": change, "steps": self.schedulers.roll_out(change)}

    def ca_rotation(self, _fault: Fault) -> dict:
        """The serving certificate first, then the client CA: each must be taken on its own (a
        reload of one that happens to carry the other along would hide that it is not watched)."""
        with self.locks["certificates"]:
            acted = self.now()
            serving = self.certificates.rotate_serving()
            ports = {s.index: s.port for s in self.schedulers.alive()}
            serving["instances"] = self.certificates.wait_serving(ports)
            client_ca = self.certificates.rotate_client_ca()
            ports = {s.index: s.port for s in self.schedulers.alive()}
            client_ca["instances"] = self.certificates.wait_client_ca(ports)
            return {"began": acted, "serving": serving, "client_ca": client_ca}

    # -- the control plane ----------------------------------------------------------------

    def _outage(self, fault: Fault, stop, start, compact: bool = False) -> dict:
        with self.locks["control_plane"]:
            began, stopped_at = time.monotonic(), self.now()
            stop()
            out: dict = {}
            if compact:
                out["compacted_revision"] = self.lab.compact_etcd()
            self._hold(began, fault.duration)
            # lab.sh up waits 30 s for the controllers' `default` ServiceAccount; a lab busy
            # relisting after the restart can take longer (the soak saw it), and up is idempotent.
            self._retry(start, attempts=3)
            answered = wait_until(self.cluster.ready, 120, 0.2)
            back = self.now()
            self.outages.append((stopped_at, back))
            # "began": when it acted, after waiting for an overlapping fault of the control plane.
            return {**out, "began": stopped_at, "api_answered_again": bool(answered),
                    "outage_s": round(back - stopped_at, 2)}

    def apiserver_restart(self, fault: Fault) -> dict:
        return self._outage(fault, lambda: self.lab.stop_apiserver(signal.SIGKILL), self.lab.up)

    def watch_expiry(self, fault: Fault) -> dict:
        """A restart with etcd compacted past every revision anyone has seen: every watch
        resumed from its resourceVersion is answered 410 Gone and must list again."""
        return self._outage(fault, lambda: self.lab.stop_apiserver(signal.SIGKILL), self.lab.up, compact=True)

    def etcd_restart(self, fault: Fault) -> dict:
        return self._outage(fault, lambda: self.lab.stop("etcd"), self.lab.up)

    def connection_reset(self, fault: Fault) -> dict:
        began, resets = time.monotonic(), []
        for _round in range(3):
            resets.append(self.proxy.reset_all())
            self._hold(began, fault.duration * (_round + 1) / 3)
        return {"connections_reset": resets}

    # -- nodes ----------------------------------------------------------------------------

    def node_flap(self, fault: Fault) -> dict:
        nodes = fault.args["nodes"]
        began = time.monotonic()
        for name in nodes:
            make_not_ready(self.cluster.core, name)
        self._hold(began, fault.duration)
        for name in nodes:
            self._retry(lambda name=name: make_ready(self.cluster.core, name, timeout=120))
        return {"nodes": nodes, "ready_again_after_s": round(time.monotonic() - began - fault.duration, 1)}

    def node_recreate(self, fault: Fault) -> dict:
        nodes = fault.args["nodes"]
        began = time.monotonic()
        self._retry(lambda: delete_nodes(self.cluster.core, nodes))
        self._hold(began, fault.duration)
        self._retry(lambda: self._create_missing(nodes))
        return {"nodes": nodes, "ready_again_after_s": round(time.monotonic() - began - fault.duration, 1)}

    def _create_missing(self, nodes: list[str]) -> None:
        """Create the nodes not there yet (an attempt cut short by an outage made some), then
        wait until all of them are Ready."""
        have = set(self.cluster.list_names("/api/v1/nodes"))
        missing = [int(name.rsplit("-", 1)[1]) for name in nodes if name not in have]
        if missing:
            create_nodes(self.cluster.core, len(self.plan.pools.general), prefix="soak-node-", cpu=NODE_CPU,
                         memory=NODE_MEMORY, indices=missing, wait=False)
        wait_until_ready(self.cluster.core, nodes, 120)

    def _retry(self, call, attempts: int = 6) -> None:
        """A call that meets an API server restarted by an overlapping fault, or a lab slow to
        come back, tries again."""
        for attempt in range(attempts):
            try:
                call()
                return
            except Exception:  # noqa: BLE001 - the last failure is raised and recorded
                if attempt == attempts - 1:
                    raise
                time.sleep(5)

    # -- the extender ---------------------------------------------------------------------

    def _extender(self, fault: Fault, begin, end) -> dict:
        with self.locks["extender"]:
            began, acted = time.monotonic(), self.now()
            begin()
            self._hold(began, fault.duration)
            end()
        return {"began": acted}

    def extender_slow(self, fault: Fault) -> dict:
        slow = {"filter": "sleep:1.5", "prioritize": "sleep:1.5"}
        return self._extender(fault, lambda: self.extender.misbehave(slow), lambda: self.extender.misbehave({}))

    def extender_errors(self, fault: Fault) -> dict:
        failing = {"filter": "status:500", "prioritize": "status:500"}
        return self._extender(fault, lambda: self.extender.misbehave(failing), lambda: self.extender.misbehave({}))

    def extender_down(self, fault: Fault) -> dict:
        return self._extender(fault, self.extender.pause, self.extender.resume)
