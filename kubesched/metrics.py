"""Prometheus metrics under kube-scheduler's names (pkg/scheduler/metrics/metrics.go).

One registry for the process, so /metrics shows exactly the scheduler's series and tests can
read values back with ``REGISTRY.get_sample_value``; the process_* (process_collector.py) and
rest_client_* (restclient_metrics.py) families join it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubesched.process_collector import ProcessTreeCollector

REGISTRY = CollectorRegistry(auto_describe=True)
# process_* as every Kubernetes component has them (component-base's legacyregistry).
REGISTRY.register(ProcessTreeCollector())

# Buckets as upstream: exponential from 1ms, factor 2, 15 buckets (and 20 for the SLI).
_LATENCY_BUCKETS = tuple(0.001 * 2**i for i in range(15))
_SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))
_EXTENSION_BUCKETS = tuple(0.0001 * 2**i for i in range(12))

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
WAITING_ON_PREEMPTION = "waiting_on_preemption"  # a pod group's attempt that preempted for it

schedule_attempts = Counter(
    "scheduler_schedule_attempts_total",
    "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not "
    "be scheduled, while 'error' means an internal scheduler problem.",
    ["result", "profile"], registry=REGISTRY)

scheduling_attempt_duration = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
    ["result", "profile"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)

scheduling_algorithm_duration = Histogram(
    "scheduler_scheduling_algorithm_duration_seconds",
    "Scheduling algorithm latency in seconds", buckets=_LATENCY_BUCKETS, registry=REGISTRY)

pod_scheduling_sli_duration = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
    "and might involve multiple scheduling attempts.",
    ["attempts"], buckets=_SLI_BUCKETS, registry=REGISTRY)

pod_scheduling_attempts = Histogram(
    "scheduler_pod_scheduling_attempts",
    "Number of attempts to successfully schedule a pod.",
    buckets=(1, 2, 4, 8, 16), registry=REGISTRY)

pending_pods = Gauge(
    "scheduler_pending_pods",
    "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
    "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
    "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the "
    "number of unschedulable pods that the scheduler never attempted to schedule because they "
    "are gated.",
    ["queue"], registry=REGISTRY)

queue_incoming_pods = Counter(
    "scheduler_queue_incoming_pods_total",
    "Number of pods added to scheduling queues by event and queue type.",
    ["queue", "event"], registry=REGISTRY)

preemption_attempts = Counter(
    "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now",
    registry=REGISTRY)

preemption_victims = Histogram(
    "scheduler_preemption_victims", "Number of selected preemption victims",
    buckets=(1, 2, 4, 8, 16, 32, 64), registry=REGISTRY)

# SchedulerAsyncPreemption: the background evictions, by result ("success" or "error").
preemption_goroutines_duration = Histogram(
    "scheduler_preemption_goroutines_duration_seconds", "Duration in seconds for running goroutines for the preemption.",
    ["result"], buckets=tuple(0.01 * 2**i for i in range(20)), registry=REGISTRY)

preemption_goroutines_execution = Counter(
    "scheduler_preemption_goroutines_execution_total", "Number of preemption goroutines executed.",
    ["result"], registry=REGISTRY)

framework_extension_point_duration = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.",
    ["extension_point", "status", "profile"], buckets=_EXTENSION_BUCKETS, registry=REGISTRY)

plugin_execution_duration = Histogram(
    "scheduler_plugin_execution_duration_seconds",
    "Duration for running a plugin at a specific extension point.",
    ["plugin", "extension_point", "status"], buckets=tuple(0.00001 * 1.5**i for i in range(20)),
    registry=REGISTRY)

binding_duration = Histogram(
    "scheduler_binding_duration_seconds", "Binding latency in seconds (kubesched: the API call).",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY)

permit_wait_duration = Histogram(
    "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.",
    ["result"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)

cache_size = Gauge(
    "scheduler_cache_size",
    "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
    ["type"], registry=REGISTRY)

goroutines = Gauge(
    "scheduler_goroutines",
    "Number of running goroutines split by the work they do such as binding "
    "(kubesched: binding threads in flight).",
    ["operation"], registry=REGISTRY)

unschedulable_pods = Gauge(
    "scheduler_unschedulable_pods",
    "The number of unschedulable pods broken down by plugin name. A pod will increment the "
    "gauge for all plugins that caused it to not schedule and so this metric have meaning "
    "only when broken down by plugin.",
    ["plugin", "profile"], registry=REGISTRY)

# OpportunisticBatching (framework/runtime/batch.go): whether a pod reused the previous pod's
# ranking, and why a kept ranking was dropped.
_BATCH_BUCKETS = tuple(0.00001 * 2**i for i in range(12))

batch_attempts = Counter(
    "scheduler_batch_attempts_total", "Counts of results when we attempt to use batching.",
    ["profile", "result"], registry=REGISTRY)

batch_cache_flushed = Counter(
    "scheduler_batch_cache_flushed_total", "Counts of cache flushes by reason.",
    ["profile", "reason"], registry=REGISTRY)

batch_rescore_attempts = Counter(
    "scheduler_batch_rescore_attempts_total",
    "Counts of rescore attempts during opportunistic batching.",
    ["profile"], registry=REGISTRY)

batch_rescore_duration = Histogram(
    "scheduler_batch_rescore_duration_seconds", "Latency for rescoring a node during opportunistic batching.",
    ["profile"], buckets=_BATCH_BUCKETS, registry=REGISTRY)

get_node_hint_duration = Histogram(
    "scheduler_get_node_hint_duration_seconds", "Latency for getting a node hint.",
    ["hinted", "profile"], buckets=_BATCH_BUCKETS, registry=REGISTRY)

store_schedule_results_duration = Histogram(
    "scheduler_store_schedule_results_duration_seconds", "Latency for getting a no.",
    ["profile"], buckets=_BATCH_BUCKETS, registry=REGISTRY)

leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"], registry=REGISTRY)

# The pod group metrics: in the registry only with the GenericWorkload gate on, as upstream
# registers them (register_generic_workload, called by the scheduler's assembly).
podgroup_schedule_attempts = Counter(
    "scheduler_podgroup_schedule_attempts_total",
    "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not "
    "be scheduled, while 'error' means an internal scheduler problem.",
    ["result", "profile"], registry=None)

podgroup_scheduling_attempt_duration = Histogram(
    "scheduler_podgroup_scheduling_attempt_duration_seconds", "Pod group scheduling attempt latency in seconds",
    ["result", "profile"], buckets=_LATENCY_BUCKETS, registry=None)

podgroup_scheduling_algorithm_duration = Histogram(
    "scheduler_podgroup_scheduling_algorithm_duration_seconds", "Pod group scheduling algorithm latency in seconds",
    buckets=_LATENCY_BUCKETS, registry=None)

# Workload-aware preemption (a PodGroup's PodGroupPostFilter): the preemptor label is "podgroup".
_PREEMPTION_BUCKETS = tuple(0.001 * 2**i for i in range(16))
_VICTIM_BUCKETS = tuple(float(2**i) for i in range(11))
POD_GROUP_PREEMPTOR = "podgroup"

workload_preemption_attempts = Counter(
    "scheduler_workload_preemption_attempts_total",
    "Total preemption attempts initiated by workload (including pod groups) in the cluster till now.",
    ["result"], registry=None)

workload_preemption_victims = Histogram(
    "scheduler_workload_preemption_victims", "Number of pod preemption victims caused by workload preemption.",
    buckets=_VICTIM_BUCKETS, registry=None)

preemption_workload_disruptions = Histogram(
    "scheduler_preemption_workload_disruptions",
    "Number of workload preemption units being preempted. A single preemption unit can be all pods in a pod "
    "group (in case of DisruptionMode=all), or a single pod (in case of DisruptionMode=single).",
    ["preemptor"], buckets=_VICTIM_BUCKETS, registry=None)

preemption_evaluation_duration = Histogram(
    "scheduler_preemption_evaluation_duration_seconds",
    "Duration in seconds for identifying the target preemption victims.",
    ["preemptor", "result"], buckets=_PREEMPTION_BUCKETS, registry=None)

preemption_execution_duration = Histogram(
    "scheduler_preemption_execution_duration_seconds",
    "Duration in seconds for preempting the target preemption victims. With async preemption enabled, "
    "preemption execution does not block the scheduling of other pods.",
    ["preemptor", "result"], buckets=_PREEMPTION_BUCKETS, registry=None)

preemption_pdb_violations = Counter(
    "scheduler_preemption_pdb_violations_total",
    "Total number of pod disruption budget violations caused by preemption.",
    ["preemptor"], registry=None)

_GENERIC_WORKLOAD = (podgroup_schedule_attempts, podgroup_scheduling_attempt_duration,
                     podgroup_scheduling_algorithm_duration, workload_preemption_attempts,
                     workload_preemption_victims, preemption_workload_disruptions, preemption_evaluation_duration,
                     preemption_execution_duration, preemption_pdb_violations)
_generic_workload_registered = []


def register_generic_workload() -> None:
    """Put the pod group metrics in the registry (once per process)."""
    if not _generic_workload_registered:
        for metric in _GENERIC_WORKLOAD:
            REGISTRY.register(metric)
        _generic_workload_registered.append(True)


def attempts_label(attempts: int) -> str:
    """Upstream caps the attempts label at "15+" to bound cardinality."""
    return "15+" if attempts >= 15 else str(attempts)
