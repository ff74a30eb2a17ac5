"""scheduler_perf's churn and deletePods operations as the bench runs them beside a scheduler."""

from __future__ import annotations

import threading

from lab.cluster import ApiError
from tests.bench.operations import Churn, DeletePods, OperationErrors, RunningOperations


class RecordingCluster:
    """Records the requests an operation sends, ends the run after stop_after of them, and
    fails the ones failing() names."""

    def __init__(self, stop_after: int, failing=lambda method, path: False):
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.failing = failing
        self.stop_after = stop_after
        self.stop = threading.Event()

    def request(self, method, path, body=None, query=None, ok=(200, 201), timeout=60):
        if method == "POST":
            path = f"{path}/{body['metadata']['name']}"
        with self.lock:
            self.requests.append((method, path))
            if len(self.requests) == self.stop_after:
                self.stop.set()
        if self.failing(method, path):
            raise ApiError(method, path, 500, "injected")
        return {}

    def fan_out(self, call, items, workers=24, on_done=None):
        for item in items:
            call(item)


def _template(kind: str):
    return lambda index, namespace, _scheduler: (f"/api/v1/{kind}s", {"metadata": {"name": f"{kind}-{index}"}})


def _run(operation, cluster) -> OperationErrors:
    errors = OperationErrors()
    thread = threading.Thread(target=operation, args=(cluster, "ns", "bench-scheduler", cluster.stop, errors))
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return errors


def test_recreate_churn_creates_then_deletes_each_object_in_turn_and_leaves_nothing():
    cluster = RecordingCluster(stop_after=5)
    _run(Churn("recreate", (_template("node"), _template("service")), 0.01), cluster)
    created = [path for method, path in cluster.requests if method == "POST"]
    deleted = [path for method, path in cluster.requests if method == "DELETE"]
    assert cluster.requests[:4] == [("POST", "/api/v1/nodes/node-0"), ("POST", "/api/v1/services/service-0"),
                                    ("DELETE", "/api/v1/nodes/node-0"), ("DELETE", "/api/v1/services/service-0")]
    assert cluster.requests[4][1] == "/api/v1/nodes/node-2"  # a new object on every create tick
    assert sorted(created) == sorted(deleted)  # what was live when the run ended is gone too


def test_create_churn_adds_one_of_each_per_tick_and_counts_errors():
    cluster = RecordingCluster(stop_after=3, failing=lambda method, path: path.endswith("pod-1"))
    errors = _run(Churn("create", (_template("pod"),), 0.01), cluster)
    assert [path for _method, path in cluster.requests] == [f"/api/v1/pods/pod-{i}" for i in range(3)]
    assert all(method == "POST" for method, _path in cluster.requests)
    assert errors.count == 1 and "injected" in errors.first[0]


def test_delete_pods_deletes_the_named_pods_at_its_rate_and_then_drops_their_finalizers():
    cluster = RecordingCluster(stop_after=4)
    names = [f"finalizer-{i:06d}" for i in range(4)]
    _run(DeletePods(100, lambda: names, strip_finalizers=True), cluster)
    path = "/api/v1/namespaces/ns/pods/"
    assert cluster.requests == [("DELETE", path + name) for name in names] + [("PATCH", path + name) for name in names]


def test_delete_pods_stops_when_the_run_ends():
    cluster = RecordingCluster(stop_after=3)
    _run(DeletePods(100, lambda: [f"init-{i:06d}" for i in range(100)]), cluster)
    assert [path.rsplit("/", 1)[1] for _method, path in cluster.requests] == ["init-000000", "init-000001",
                                                                              "init-000002"]


def test_running_operations_report_the_errors_each_met():
    cluster = RecordingCluster(stop_after=2, failing=lambda method, path: True)
    running = RunningOperations((Churn("create", (_template("pod"),), 0.01),), cluster, "ns", "bench-scheduler")
    cluster.stop.wait(30)
    problems = running.stop()
    assert len(problems) == 1 and problems[0].startswith("Churn: ") and "API errors, e.g. POST" in problems[0]
