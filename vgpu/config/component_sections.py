"""The sections of the configuration each belonging to one component or concern: the
webhook's, the node agent's and the derived quota requests' (the scheduler's and the
top-level keys are in :mod:`vgpu.config.sections`)."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import limits
from vgpu.config.knobs import knob as _knob
from vgpu.errors import ConfigError


@dataclass(frozen=True)
class WebhookConfig:
    port: int = _knob(9443, "HTTPS port of /mutate", lo=1, hi=65535)
    metrics_port: int = _knob(9395, "port of /healthz, /readyz and /metrics (metricsServer)",
                              lo=1, hi=65535)
    max_connections: int = _knob(
        512, "connections the admission port (9443) serves at once; more are closed as they "
        "arrive", lo=1, hi=100000)
    request_timeout_seconds: float = _knob(
        10.0, "how long the admission port waits for a TLS handshake, or a request's body "
        "and answer (the registrations' timeoutSeconds is 5)", lo=0.5, hi=600)
    idle_timeout_seconds: float = _knob(
        120.0, "how long the admission port keeps a connection with no request under way, "
        "or one whose request's headers have not all come: above the API server's 90 s "
        "for an idle connection, so that it never sends on one just closed", lo=1,
        hi=3600)
    denial_events_per_second: float = _knob(
        5.0, "FailedAdmission Events the webhook writes at most per second (a burst of ten "
        "times as many): each is a write on the pod's namespace for whoever sent the "
        "review; 0 = none", lo=0, hi=1000)
    cert_reload_seconds: float = _knob(
        10.0, "how often the certificate and key files are checked for a change", lo=0.1,
        hi=3600)
    annotation_writers: tuple[str, ...] = _knob(
        ("system:serviceaccount:vgpu-system:vgpu-scheduler",
         "system:serviceaccount:vgpu-node:vgpu-nodeagent"),
        "users (as the API server names them in an admission review's userInfo.username) "
        "that may set, change or remove vgpu's own pod annotations: the scheduler's and the "
        "node agent's service accounts; /validate refuses everyone else")
    node_agents: tuple[str, ...] = _knob(
        ("system:serviceaccount:vgpu-node:vgpu-nodeagent",),
        "users (as in an admission review's userInfo.username) that are node agents: "
        "/node-scope lets them write only their own Node and the pods bound to their node, "
        "and there only vgpu.io/ annotations and a pod's vgpu.io/ conditions")


@dataclass(frozen=True)
class QuotaConfig:
    """The derived quota requests the webhook writes (docs/contracts.md#quota-resources)."""

    derived_requests: bool = _knob(
        True, "the webhook writes vgpu.io/vgpus, vgpu.io/memory-mib and vgpu.io/cores on each "
        "GPU pod, its true totals, so that a namespace's ResourceQuota caps them; false = it "
        "writes none and leaves the names as pods give them")
    unknown_gpu_memory_mib: int = _knob(
        0, "GPU memory (MiB, before deviceMemoryScaling) a memory percentage is charged "
        "against when no GPU it may land on is known: no node inventory lists one, none was "
        "seen before and no gpuTypes entry is allowed; 0 = such a pod is refused where a "
        "ResourceQuota of its namespace caps vgpu.io/memory-mib, and otherwise not charged "
        "for memory", lo=0)
    gpu_types: tuple[str, ...] = _knob(
        (), "GPU types the cluster's node pools bring, as MODEL=MiB (NVIDIA "
        "A100-SXM4-80GB=81920): a memory percentage is charged against the largest one the "
        "pod may land on, beside the GPUs node inventories list, so pods created while "
        "those pools are scaled to zero are charged right")
    remember_gpu_types: bool = _knob(
        True, "the webhook keeps the GPU types node inventories showed in the ConfigMap "
        "vgpu-gpu-types of its namespace and charges percentages against them after their "
        "nodes are gone (scaled to zero) and across its restarts")

    def __post_init__(self) -> None:
        self.declared_gpus()

    def declared_gpus(self) -> tuple[tuple[str, int], ...]:
        """``gpu_types`` as (model, MiB) pairs; a malformed entry is a ConfigError."""
        out = []
        for entry in self.gpu_types:
            model, sep, raw = entry.rpartition("=")
            try:
                mib = int(raw.strip()) if sep else 0
            except ValueError:
                mib = 0
            if not model.strip() or not 1 <= mib <= limits.GPU_MEMORY_MIB:
                raise ConfigError(f"quota.gpuTypes: {entry!r} is not MODEL=MiB with a size "
                                  f"from 1 to {limits.GPU_MEMORY_MIB}")
            out.append((model.strip(), mib))
        return tuple(out)


@dataclass(frozen=True)
class NodeAgentConfig:
    resource_name: str = _knob("", "resource advertised to the kubelet; empty = resourceNames.gpu")
    device_plugin_dir: str = _knob("/var/lib/kubelet/device-plugins",
                                   "kubelet device-plugin folder")
    heartbeat_seconds: float = _knob(30.0, "how often the inventory heartbeat is written", lo=1)
    metrics_port: int = _knob(9394, "port of /healthz and /metrics (metricsServer)", lo=1,
                              hi=65535)
    hami_core_path: str = _knob("", "host path of HAMi-core's libvgpu.so, which the agent "
                                "installs from hamiCoreBundle, checks, and hands to containers; "
                                "empty = none")
    hami_core_bundle: str = _knob(
        "/opt/vgpu/hami-core", "folder in the agent's image holding HAMi-core builds per CUDA "
        "major and their index; empty, or a folder that does not exist = install nothing and "
        "check the node's own library at hamiCorePath")
    shared_cache_dir: str = _knob("/tmp/vgpu", "folder holding each container's shared cache file")
    health_quiet_seconds: float = _knob(
        60.0, "how long a GPU must stay free of faults before it is healthy again", lo=0
    )
    allocate_wait_seconds: float = _knob(
        5.0, "how long Allocate waits for the in-flight pod to reach the local pod watch",
        lo=0, hi=60
    )
    pod_resources_socket: str = _knob(
        "/var/lib/kubelet/pod-resources/kubelet.sock",
        "the kubelet's pod-resources socket, read to check each container's GPUs against "
        "its assignment; empty = off"
    )
    pod_resources_seconds: float = _knob(
        10.0, "how often the kubelet's pod resources are read", lo=0.1, hi=3600
    )
    evict_intruders: bool = _knob(
        False, "evict a pod that holds this node's vGPU device IDs in the kubelet's books but "
        "was not placed by a vgpu scheduler (the pod-resources check finds it; it always gets "
        "a Warning event and counts in vgpu_nodeagent_intruder_pods)")
    exclude_devices: tuple[str, ...] = _knob(
        (), "GPUs the agent leaves out, by UUID or NVML index (HAMi's device-plugin "
        "filterdevices): not advertised to the kubelet, not in the inventory")
