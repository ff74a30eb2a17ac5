"""In-place resize: a pod's usage is the larger of spec, actuated (status resources) and
allocated resources, as component-helpers' PodRequests with UseStatusResources (on in 1.37)."""

import copy

from kubesched_fakes import node_raw, pod_raw

from kubesched.backend.cache import SchedulerCache
from kubesched.backend.trim import trim_pod
from kubesched.eventhandlers import EventHandlers
from kubesched.framework.types import PodInfo


def resized(spec_cpu, actual_cpu=None, allocated_cpu=None, infeasible=False, node="n1"):
    raw = pod_raw("p", node=node, cpu=spec_cpu, uid="uid-p")
    status = {"name": "c"}
    if actual_cpu is not None:
        status["resources"] = {"requests": {"cpu": actual_cpu}}
    if allocated_cpu is not None:
        status["allocatedResources"] = {"cpu": allocated_cpu}
    raw["status"]["containerStatuses"] = [status]
    if infeasible:
        raw["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return raw


def test_usage_is_the_largest_of_spec_actual_and_allocated():
    assert PodInfo(resized("1", "2", "2")).requests.milli_cpu == 2000      # resize up done, spec behind
    assert PodInfo(resized("500m", "1", "1")).requests.milli_cpu == 1000   # shrink not actuated yet
    assert PodInfo(resized("2", "1", "1")).requests.milli_cpu == 2000      # growth pending: spec counts
    assert PodInfo(resized("1", None, "3")).requests.milli_cpu == 3000     # allocated only
    assert PodInfo(resized("1")).requests.milli_cpu == 1000                # no status resources


def test_an_infeasible_resize_counts_what_runs_not_the_spec():
    assert PodInfo(resized("4", "1", "1", infeasible=True)).requests.milli_cpu == 1000


def test_pod_level_status_resources_are_used_when_set():
    raw = resized("1", "1", "1")
    raw["spec"]["resources"] = {"requests": {"cpu": "1"}}
    raw["status"]["resources"] = {"requests": {"cpu": "3"}}
    raw["status"]["allocatedResources"] = {"cpu": "3"}
    assert PodInfo(raw).requests.milli_cpu == 3000


def test_trim_keeps_the_status_resources_and_the_cache_follows_a_status_only_resize():
    handlers = EventHandlers()
    handlers.cache = SchedulerCache()
    handlers.cache.add_node(node_raw("n1"))

    class NoQueue:
        def move_all_to_active_or_backoff(self, *args, **kwargs):
            pass

        def delete(self, pod):
            pass

    handlers.queue = NoQueue()
    old = trim_pod(resized("1", "1", "1"))
    handlers.on_pod_add(old)
    assert handlers.cache.nodes["n1"].requested.milli_cpu == 1000
    new = trim_pod(copy.deepcopy(resized("1", "2", "2")))
    new["metadata"]["resourceVersion"] = "2"
    handlers.on_pod_update(old, new)
    assert handlers.cache.nodes["n1"].requested.milli_cpu == 2000
