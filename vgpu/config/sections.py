"""The settings, as frozen dataclasses.

Each field carries its default, its bounds or choices and a one-line doc in its metadata;
:mod:`vgpu.config.loading` checks values against them and ``vgpu config defaults --explain``
prints the docs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from vgpu import policy
from vgpu.config.component_sections import NodeAgentConfig, QuotaConfig, WebhookConfig
from vgpu.config.isolation_section import IsolationConfig, check_split
from vgpu.config.knobs import knob as _knob
from vgpu.config.knobs import section as _section
from vgpu.config.metrics_section import MetricsServerConfig
from vgpu.config.plugin_args import (
    InterPodAffinityArgs,
    NodeReservationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
)
from vgpu.errors import ConfigError
from vgpu.pods import DEFAULT_SCHEDULER


@dataclass(frozen=True)
class ResourceNames:
    """The extended-resource names users write in ``resources.limits``."""

    gpu: str = _knob("nvidia.com/gpu", "number of vGPUs; each on a distinct physical GPU")
    gpumem: str = _knob("nvidia.com/gpumem", "device memory per vGPU, MiB")
    gpumem_percentage: str = _knob(
        "nvidia.com/gpumem-percentage", "device memory per vGPU, percent of the chosen GPU"
    )
    gpucores: str = _knob("nvidia.com/gpucores", "compute share per vGPU, percent")
    priority: str = _knob("nvidia.com/priority", "task priority for the in-container limiter")

    def all(self) -> tuple[str, str, str, str, str]:
        return (self.gpu, self.gpumem, self.gpumem_percentage, self.gpucores, self.priority)


#: HAMi-core's compute limit policies (GPU_CORE_UTILIZATION_POLICY).
CORE_POLICY_DEFAULT = "default"
CORE_POLICY_FORCE = "force"
CORE_POLICY_DISABLE = "disable"
CORE_POLICIES = (CORE_POLICY_DEFAULT, CORE_POLICY_FORCE, CORE_POLICY_DISABLE)

#: Every resource name under this prefix is vgpu's (:meth:`Config.owns_resource`).
OWNED_PREFIX = "vgpu.io/"


#: The scheduler's default profile: plugins in the order their extension points run.
DEFAULT_SCHEDULER_PLUGINS: tuple[str, ...] = (
    "SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName", "TaintToleration",
    "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
    "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "ImageLocality",
    "IsolationRequired", "FaultDomain", "MpsUser", "VGPU", "HamiQuota", "QuotaCharge",
    "DefaultPreemption", "NodeReservation", "AllocationGate", "VGPUBinder",
)

#: kube-scheduler's default score weights (current kube's; v1.20's were 1 but for
#: PodTopologySpread's 2), for the plugins of the profile that the configuration gives no
#: weight; every other score plugin weighs 1, as ImageLocality and NodeResourcesFit do there.
DEFAULT_SCORE_WEIGHTS: dict[str, int] = {
    "TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2,
}


def _plugin_name_ok(name: str) -> bool:
    return name.isascii() and name.replace("_", "").replace("-", "").isalnum()


@dataclass(frozen=True)
class SchedulerConfig:
    permit_timeout_seconds: float = _knob(
        30.0, "how long a node's gate waits for the in-flight pod to be allocated", lo=0.1)
    permit_gate: str = _knob(
        policy.PERMIT_AMBIGUOUS, "which GPU pods wait at Permit for a pod in flight on the same "
        "node: ambiguous = only one the node agent could confuse with it (same GPU count on "
        "overlapping GPUs, different limits); node = every one (one pod in flight per node)",
        choices=policy.PERMIT_GATES,
    )
    assume_ttl_seconds: float = _knob(
        120.0, "how long a bound placement stays assumed until the watch confirms it", lo=1
    )
    bind_in_doubt_seconds: float = _knob(
        35.0, "how long a Binding whose answer was lost keeps its room held while the pod is "
        "not seen bound (far past writeTimeoutSeconds: a proxy may send it on late)", lo=1)
    write_timeout_seconds: float = _knob(
        5.0, "the longest a write the scheduler sends stays in flight: its client deadline "
        "and the API server's timeout; a new leader waits the old one's renew deadline plus "
        "this after it last saw the Lease renewed", lo=0.5, hi=60)
    plugins: tuple[str, ...] = _knob(
        DEFAULT_SCHEDULER_PLUGINS,
        "plugins of the profile, in the order their extension points run (names from the "
        "scheduler's registry)",
    )
    score_weights: tuple[str, ...] = _knob(
        (), "score weights as Name=weight (default: current kube-scheduler's, "
        "TaintToleration=3, NodeAffinity=2, PodTopologySpread=2, InterPodAffinity=2; 1 for "
        "the others: ImageLocality and the GPU placement policy, VGPU or "
        "FragmentationAware); a GPU placement weight above a soft rule's is warned about"
    )
    percentage_of_nodes_to_score: int = _knob(
        0, "share of the cluster's nodes, in percent, to find feasible and score per pod, "
        "from a start that moves on every cycle (kube-scheduler's percentageOfNodesToScore): "
        "0 = adaptive, 50 % of 100 nodes falling to 5 % from 5,625 nodes on; never fewer "
        "than 100 nodes, every node in a smaller cluster; 100 = every node", lo=0, hi=100,
    )
    nodes_to_score: int = _knob(
        -1, "deprecated, replaced by percentageOfNodesToScore; -1 = not set. An older "
        "config's value is read as percentageOfNodesToScore 100 for 0 (every feasible node) "
        "and as 0 (adaptive, at least 100 nodes) for any count, with a warning at start",
        lo=-1,
    )
    pod_initial_backoff_seconds: float = _knob(1.0, "backoff after a pod's first failed attempt",
                                               lo=0)
    pod_max_backoff_seconds: float = _knob(10.0, "backoff cap; it doubles per failed attempt",
                                           lo=0)
    pod_max_unschedulable_seconds: float = _knob(
        300.0, "an unschedulable pod no cluster event woke is retried after this long", lo=1
    )
    bind_workers: int = _knob(
        64, "threads that run bindings in the threaded scheduler; 0 = bind in the scheduling "
        "thread", lo=0, hi=256,
    )
    api_qps: float = _knob(
        500.0, "client-side limit on the scheduler's API requests per second (bindings, "
        "lists, watches); 0 = no limit", lo=0,
    )
    api_burst: int = _knob(1000, "requests allowed above apiQps in a burst", lo=1)
    event_qps: float = _knob(
        50.0, "client-side limit on Events written per second (a connection of their own, so "
        "that events never delay bindings); 0 = no limit", lo=0,
    )
    event_burst: int = _knob(100, "Events allowed above eventQps in a burst", lo=1)
    event_repeat_seconds: float = _knob(
        10.0, "a pod's event of the same reason goes out again at the earliest after this "
        "long; the same message again after twice as long each time", lo=0,
    )
    event_repeat_max_seconds: float = _knob(
        600.0, "the longest spacing between repeats of the same event of a pod", lo=0,
    )
    volume_bind_timeout_seconds: float = _knob(
        600.0, "how long PreBind waits for the PersistentVolumeClaims it bound or asked to "
        "be provisioned to be bound before the pod is retried (kube-scheduler's "
        "VolumeBinding bindTimeoutSeconds)", lo=0,
    )
    volume_bind_poll_seconds: float = _knob(
        1.0, "how often that wait reads the claims from the API server", lo=0.001, hi=60,
    )
    cache_reconcile_seconds: float = _knob(
        30.0, "how often the cache is compared with a fresh tally from the watches' stores "
        "and any difference repaired (vgpu_scheduler_cache_drift_total); also after every "
        "re-list", lo=1, hi=3600,
    )
    inter_pod_affinity: InterPodAffinityArgs = _section(
        InterPodAffinityArgs, "the InterPodAffinity plugin")
    node_resources_fit: NodeResourcesFitArgs = _section(
        NodeResourcesFitArgs, "the NodeResourcesFit plugin")
    pod_topology_spread: PodTopologySpreadArgs = _section(
        PodTopologySpreadArgs, "the PodTopologySpread plugin")
    node_reservation: NodeReservationArgs = _section(
        NodeReservationArgs, "the NodeReservation plugin: a node held for a pod that asks "
        "for whole GPUs and waited")

    def __post_init__(self) -> None:
        if not self.plugins:
            raise ConfigError("scheduler.plugins: empty; name at least a queue sort, a filter "
                              "and a binder")
        seen: set[str] = set()
        for name in self.plugins:
            if not _plugin_name_ok(name):
                raise ConfigError(f"scheduler.plugins: {name!r} is not a plugin name")
            if name in seen:
                raise ConfigError(f"scheduler.plugins: {name!r} is listed twice")
            seen.add(name)
        self.weights()
        if self.nodes_to_score >= 0 and self.percentage_of_nodes_to_score:
            raise ConfigError(
                "scheduler.nodesToScore: deprecated, and percentageOfNodesToScore is given "
                "too; keep percentageOfNodesToScore alone")
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ConfigError(
                f"scheduler.podMaxBackoffSeconds: {self.pod_max_backoff_seconds!r} is below "
                f"podInitialBackoffSeconds ({self.pod_initial_backoff_seconds!r})")

    def weights(self) -> dict[str, int]:
        """``score_weights`` as a mapping over kube-scheduler's defaults for the plugins of
        the profile; every name given must be one of ``plugins``."""
        out = {name: w for name, w in DEFAULT_SCORE_WEIGHTS.items() if name in self.plugins}
        for entry in self.score_weights:
            name, sep, raw = entry.partition("=")
            name = name.strip()
            try:
                weight = int(raw.strip()) if sep else -1
            except ValueError:
                weight = -1
            if weight < 0 or weight > 1000:
                raise ConfigError(f"scheduler.scoreWeights: {entry!r} is not Name=weight with a "
                                  "weight from 0 to 1000")
            if name not in self.plugins:
                raise ConfigError(f"scheduler.scoreWeights: {name!r} is not in scheduler.plugins")
            out[name] = weight
        return out
    metrics_port: int = _knob(9396, "port of /healthz, /readyz and /metrics (metricsServer)",
                              lo=1, hi=65535)
    per_gpu_metrics: bool = _knob(False, "also serve what the scheduler allocated on each "
                                  "GPU (vgpu_scheduler_gpu_*): about 16 MB a scrape at 40,000 "
                                  "GPUs; off, the per-node sums (vgpu_scheduler_node_gpu_*)")
    scheduled_events: bool = _knob(False, "also write kube-scheduler's Normal Scheduled Event "
                                   "per bound pod: one API write a pod for what the Binding "
                                   "carries (spec.nodeName, vgpu.io/bind-time)")


@dataclass(frozen=True)
class Config:
    """Cluster-wide settings. Defaults match HAMi's so existing pods behave the same."""

    resource_names: ResourceNames = _section(ResourceNames, "resource names users write")
    device_split_count: int = _knob(10, "tasks per physical GPU", lo=1, hi=1024)
    device_memory_scaling: float = _knob(
        1.0, "device memory multiplier; above 1 oversubscribes memory", lo=0.01, hi=100
    )
    default_mem: int = _knob(0, "MiB per vGPU when a container gives none; 0 = whole GPU", lo=0)
    default_cores: int = _knob(0, "compute percent per vGPU when a container gives none",
                               lo=0, hi=100)
    disable_core_limit: bool = _knob(False, "do not hand a compute limit to containers")
    gpu_core_policy: str = _knob(
        CORE_POLICY_DEFAULT, "HAMi-core's compute limit policy, handed to containers as "
        "GPU_CORE_UTILIZATION_POLICY (HAMi's gpuCorePolicy): default; force = the limit holds "
        "even for a task alone on its GPU; disable = no limit, as disableCoreLimit",
        choices=CORE_POLICIES)
    memory_factor: int = _knob(
        1, "HAMi's memoryFactor: nvidia.com/gpumem is given in units of this many MiB, and "
        "so is a HAMi quota's limits.nvidia.com/gpumem", lo=1, hi=1024)
    default_gpu_num: int = _knob(
        1, "vGPUs of a container that gives memory or cores but no count (HAMi's "
        "defaultGPUNum); 0 = such a container asks for no GPU", lo=0, hi=128)
    runtime_class_name: str = _knob(
        "", "spec.runtimeClassName the webhook gives a GPU pod that names none (HAMi's "
        "runtimeClassName); empty = none")
    overwrite_env: bool = _knob(
        False, "the webhook sets NVIDIA_VISIBLE_DEVICES=none on each container of a GPU pod "
        "that asks for no GPU and does not set it (HAMi's overwriteEnv)")
    scheduler_name: str = _knob("vgpu-scheduler", "spec.schedulerName of GPU pods")
    extra_scheduler_names: tuple[str, ...] = _knob(
        (), "other spec.schedulerName values trusted to place GPU pods as vgpu's scheduler "
        "does (a second vGPU-aware scheduler writing vgpu.io/assignment in its Binding): "
        "their GPU pods pass admission and their assignments count in every component; "
        "empty = only schedulerName")
    default_gpu_policy: str = _knob(policy.DEFAULT_GPU_POLICY, "GPU choice policy",
                                    choices=policy.GPU_POLICIES)
    default_node_policy: str = _knob(policy.DEFAULT_NODE_POLICY, "node ranking policy",
                                     choices=policy.NODE_POLICIES)
    node_heartbeat_expiry_seconds: float = _knob(
        180.0, "a node whose inventory heartbeat is older is not scheduled onto", lo=1
    )
    webhook: WebhookConfig = _section(WebhookConfig, "admission webhook")
    scheduler: SchedulerConfig = _section(SchedulerConfig, "scheduler")
    nodeagent: NodeAgentConfig = _section(NodeAgentConfig, "node agent")
    isolation: IsolationConfig = _section(IsolationConfig, "isolation backends and watchdog")
    quota: QuotaConfig = _section(QuotaConfig, "derived requests for namespace quotas")
    metrics_server: MetricsServerConfig = _section(
        MetricsServerConfig, "every component's operations port: /metrics and the probes")

    def __post_init__(self) -> None:
        problem = check_split(self.isolation.mode, self.device_split_count, self.isolation.mps)
        if problem is not None:
            raise ConfigError(f"isolation.mode mps: {problem}")
        if self.disable_core_limit and self.gpu_core_policy == CORE_POLICY_FORCE:
            raise ConfigError("gpuCorePolicy: force contradicts disableCoreLimit: true; keep one")
        if DEFAULT_SCHEDULER in self.extra_scheduler_names:
            raise ConfigError(
                f"extraSchedulerNames: {DEFAULT_SCHEDULER!r} places pods without vgpu's "
                f"assignment; list only schedulers that write vgpu.io/assignment")

    @property
    def core_policy(self) -> str:
        """The compute limit policy containers get: ``disable`` with ``disableCoreLimit``."""
        return CORE_POLICY_DISABLE if self.disable_core_limit else self.gpu_core_policy

    @property
    def vgpu_schedulers(self) -> frozenset[str]:
        """Every ``spec.schedulerName`` whose pods vgpu trusts to be placed its way."""
        return frozenset((self.scheduler_name, *self.extra_scheduler_names))

    def owns_resource(self, name: str) -> bool:
        """Whether vgpu accounts for resource ``name`` itself: every name under
        ``vgpu.io/`` and every configured vGPU resource name. No node advertises them as
        Kubernetes counts resources (or, for the count, not as vgpu counts it), so the
        scheduler never checks them against a node's allocatable."""
        return name.startswith(OWNED_PREFIX) or name in self._owned_names

    @functools.cached_property
    def _owned_names(self) -> frozenset[str]:
        return frozenset((*self.resource_names.all(), self.nodeagent.resource_name))
