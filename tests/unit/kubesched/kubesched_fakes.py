"""Small plugins and objects for testing the runtime apart from the real plugins, and the one
fake API client of the unit tests.

Each fake plugin does one visible thing (rejects nodes by a label, scores by a label), so a
test reads as "this node is rejected because of that label".
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from kubesched.backend.informers import RESOURCES
from kubesched.client import ApiError
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status
from kubesched.framework.types import PodInfo

_uid = itertools.count(1)


def pod_raw(name: str, namespace: str = "default", *, node: str = "", priority: int = 0, cpu: str = "",
            scheduler: str = "default-scheduler", labels: dict | None = None, gates: list[str] | None = None,
            uid: str | None = None, created: str = "2026-01-01T00:00:00Z", deleting: bool = False,
            phase: str = "Pending") -> dict:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": scheduler, "priority": priority}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{next(_uid)}",
                            "resourceVersion": "1", "creationTimestamp": created, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pod(name: str, **kwargs: Any) -> PodInfo:
    return PodInfo(pod_raw(name, **kwargs))


def node_raw(name: str, *, cpu: str = "4", pods: int = 110, labels: dict | None = None,
             taints: list[dict] | None = None, zone: str = "", rv: str = "1") -> dict:
    labels = dict(labels or {})
    labels.setdefault("kubernetes.io/hostname", name)
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "resourceVersion": rv},
            "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)},
                       "capacity": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)}}}


class FakeSort:
    name = "FakeSort"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def less(self, a: PodInfo, b: PodInfo) -> bool:
        return a.priority > b.priority or (a.priority == b.priority and a.timestamp < b.timestamp)


class FakeGates:
    name = "FakeGates"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if pod.scheduling_gates:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]


class FakeLabelFilter:
    """Rejects nodes labelled reject=yes (resolvably) and broken=yes (unresolvably)."""

    name = "FakeLabelFilter"

    def __init__(self, args: dict | None, handle: Any):
        from kubesched.framework.interface import PluginArgsError

        args = args or {}
        if "mode" in args and args["mode"] not in ("strict", "lenient"):
            raise PluginArgsError("mode", "must be one of strict, lenient")
        self.handle = handle

    def filter(self, state: Any, pod: PodInfo, node_info: Any) -> Status | None:
        if node_info.labels.get("broken") == "yes":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were broken")
        if node_info.labels.get("reject") == "yes":
            return Status(Code.UNSCHEDULABLE, "node(s) had reject label")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]


class FakeCpuFit:
    """Rejects nodes without room for the pod's cpu request."""

    name = "FakeCpuFit"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def filter(self, state: Any, pod: PodInfo, node_info: Any) -> Status | None:
        if node_info.requested.milli_cpu + pod.requests.milli_cpu > node_info.allocatable.milli_cpu:
            return Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return None

    def filter_nodes(self, state: Any, pod: PodInfo, nodes: list) -> list:
        return [self.filter(state, pod, n) for n in nodes]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                ClusterEvent(EventResource.POD, ActionType.DELETE)]


class FakeScore:
    """Scores a node by its integer label `score` (0..100)."""

    name = "FakeScore"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def score(self, state: Any, pod: PodInfo, node_info: Any) -> int:
        return int(node_info.labels.get("score", "0"))


class FakeLeastPods:
    """Prefers nodes with fewer pods; normalised to [0, 100]."""

    name = "FakeLeastPods"

    def __init__(self, args: dict | None, handle: Any):
        pass

    def score(self, state: Any, pod: PodInfo, node_info: Any) -> int:
        return len(node_info.pods)

    def normalize_score(self, state: Any, pod: PodInfo, scores: list) -> None:
        top = max((s.score for s in scores), default=0)
        for s in scores:
            s.score = 100 - (s.score * 100 // top if top else 0)


class FakeBinder:
    """Binds through handle.client; records calls when the client is a FakeClient."""

    name = "FakeBinder"

    def __init__(self, args: dict | None, handle: Any):
        self.handle = handle

    def bind(self, state: Any, pod: PodInfo, node_name: str) -> Status | None:
        try:
            self.handle.client.bind(pod.namespace, pod.name, pod.uid, node_name)
        except Exception as err:  # noqa: BLE001
            return Status.as_error(err)
        return None


class FakePreemption:
    """PostFilter that nominates the node named by the pod's `nominate` label."""

    name = "FakePreemption"

    def __init__(self, args: dict | None, handle: Any):
        self.handle = handle

    def post_filter(self, state: Any, pod: PodInfo, statuses: dict) -> tuple[str | None, Status]:
        target = pod.labels.get("nominate")
        if target:
            return target, Status()
        n = self.handle.snapshot().num_nodes()
        # No candidate: clear any earlier nomination, as DefaultPreemption does.
        return "", Status(Code.UNSCHEDULABLE,
                          f"preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod.")


FAKE_REGISTRY = {cls.name: cls for cls in (FakeSort, FakeGates, FakeLabelFilter, FakeCpuFit, FakeScore,
                                           FakeLeastPods, FakeBinder, FakePreemption)}
FAKE_DEFAULT_PLUGINS = [("FakeGates", 0), ("FakeSort", 0), ("FakeLabelFilter", 0), ("FakeCpuFit", 0),
                        ("FakePreemption", 0), ("FakeScore", 2), ("FakeLeastPods", 1), ("FakeBinder", 0)]


class FakeClient:
    """The unit tests' API client; nothing leaves the process.

    Every call is recorded in `calls` as (verb, target, body): verb is bind, patch_status,
    delete, create_event, patch_event, list or the HTTP method of request(), target the pod's
    namespace/name or the path. Writes are answered as the API server answers them (a
    resourceVersion one higher, a name and uid for a generateName), and come back through
    `informers` when the client has them, as the watch would bring them. fail(verb, error,
    match) makes the calls of verb whose target contains match raise error; fail_binds names
    pods whose bind is refused. `answers` (path -> object) are what get() and request() of
    that path return. `listings` and `watches` script list_pages() and watch(), one step per
    call."""

    def __init__(self, informers: Any = None, *, answers: dict | None = None, listings: list | dict | None = None,
                 watches: list | None = None, stop: Any = None) -> None:
        self.informers = informers
        self.answers = dict(answers or {})
        self.calls: list[tuple[str, str, Any]] = []
        self.fail_binds: set[str] = set()
        self._failures: list[tuple[str, str, BaseException]] = []
        self.listings = dict(listings) if isinstance(listings, dict) else list(listings or ())
        self.watches = list(watches or ())
        self.watch_rvs: list[str] = []
        self.stop = stop

    def fail(self, verb: str, error: BaseException, match: str = "") -> None:
        self._failures.append((verb, match, error))

    def _call(self, verb: str, target: str, body: Any = None) -> None:
        self.calls.append((verb, target, copy.deepcopy(body)))
        for failing, match, error in self._failures:
            if failing == verb and match in target:
                raise error

    # -- what the scheduling and binding cycles call ----------------------------------------

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        if name in self.fail_binds:
            raise RuntimeError(f"pods \"{name}\" binding refused")
        self._call("bind", f"{namespace}/{name}", {"uid": uid, "node": node_name})

    def patch_pod_status(self, namespace: str, name: str, patch: dict) -> dict:
        self._call("patch_status", f"{namespace}/{name}", patch)
        return {}

    def delete_pod(self, namespace: str, name: str, uid: str | None = None, grace_period: int | None = None) -> None:
        self._call("delete", f"{namespace}/{name}", {"uid": uid})

    def create_event(self, namespace: str, event: dict, api: str = "events.k8s.io/v1") -> dict:
        self._call("create_event", namespace, event)
        return event

    def patch_event(self, namespace: str, name: str, patch: dict) -> dict:
        self._call("patch_event", f"{namespace}/{name}", patch)
        return {}

    def request(self, method: str, path: str, body: Any = None, params: dict | None = None, **_kwargs: Any) -> dict:
        self._call(method, path, body)
        if path in self.answers:
            return copy.deepcopy(self.answers[path])
        answer = copy.deepcopy(body) if body is not None else {}
        meta = answer.setdefault("metadata", {})
        if method == "POST" and meta.get("generateName"):
            meta.update(name=meta["generateName"] + "x1y2z", uid="created-uid")
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 1) + 1)
        resource = _resource_of(path)
        if self.informers is not None and method in ("POST", "PUT") and resource is not None:
            self.informers.put(resource, answer)
        return answer

    def get(self, path: str, params: dict | None = None) -> dict:
        self._call("GET", path)
        if path in self.answers:
            return copy.deepcopy(self.answers[path])
        if path.rpartition("/")[2] in RESOURCES:
            return {"items": []}  # a collection the API server serves
        raise ApiError(404, "NotFound", f"{path} not found")

    def list(self, path: str, params: dict | None = None, page_size: int = 0) -> dict:
        self._call("list", path)
        return {"items": []}

    def list_pages(self, path: str, params: dict | None = None, page_size: int = 0):
        """The next listing step (or, with listings a dict, the path's): one page (a dict), or
        several (a list), or an error to raise."""
        self._call("list", path)
        empty = {"metadata": {"resourceVersion": "1"}, "items": []}
        if isinstance(self.listings, dict):
            step = self.listings.get(path, empty)
        else:
            step = self.listings.pop(0) if self.listings else empty
        for page in step if isinstance(step, list) else [step]:
            if isinstance(page, Exception):
                raise page
            yield page

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300, bookmarks: bool = True):
        """The next watch step (events, or an error to raise); with none left, stop is set."""
        self._call("watch", path, {"resourceVersion": resource_version, "timeoutSeconds": timeout_seconds})
        self.watch_rvs.append(resource_version)
        if not self.watches:
            if self.stop is not None:
                self.stop.set()
            return
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step

    # -- what the tests read back ------------------------------------------------------------

    def made(self, verb: str) -> list[tuple[str, Any]]:
        """(target, body) of every call of verb, in order."""
        return [(target, body) for called, target, body in list(self.calls) if called == verb]

    @property
    def binds(self) -> list[tuple[str, str, str]]:
        """(namespace/name, node, uid) of every bind."""
        return [(target, body["node"], body["uid"]) for target, body in self.made("bind")]

    @property
    def status_patches(self) -> list[tuple[str, str, dict]]:
        """(namespace/name, name, patch) of every pod status patch."""
        return [(target, target.rpartition("/")[2], body) for target, body in self.made("patch_status")]

    @property
    def events(self) -> list[dict]:
        """The events created, and each patch of one as {"patch": ..., "name": ...}."""
        return [body if verb == "create_event" else {"patch": body, "name": target.rpartition("/")[2]}
                for verb, target, body in list(self.calls) if verb in ("create_event", "patch_event")]

    def deleted(self) -> list[str]:
        """The names of the pods deleted, in order."""
        return [target.rpartition("/")[2] for target, _body in self.made("delete")]


def _resource_of(path: str) -> str | None:
    """The resource a write's path names: /api/v1/namespaces/ns/persistentvolumeclaims/x -> persistentvolumeclaims."""
    return next((part for part in reversed(path.strip("/").split("/")) if part in RESOURCES), None)


class CatchUpProbe:
    """What a new leader's catch-up asks of each resource (owed_version's two calls): the
    server's version now (a listing of one item), and a watch that replays changes[path] and
    then raises `then` (a quiet stream's timeout, a 410) if given. A path containing one of
    `broken` gets no answer."""

    def __init__(self, now: str, changes: dict[str, list] | None = None, then: Exception | None = None,
                 broken: tuple[str, ...] = ()):
        self.now, self.changes, self.then, self.broken = now, changes or {}, then, broken
        self.watched: list[tuple] = []

    def request(self, method, path, body=None, params=None, **_):
        assert (method, params) == ("GET", {"limit": "1"})
        if any(name in path for name in self.broken):
            raise ConnectionRefusedError("connection refused")
        return {"metadata": {"resourceVersion": self.now}, "items": []}

    def watch(self, path, resource_version, timeout_seconds=300, bookmarks=True, idle_timeout=None):
        self.watched.append((resource_version, bookmarks, idle_timeout))
        yield from self.changes.get(path, [])
        if self.then is not None:
            raise self.then
