"""One replay: a trace through the real vgpu scheduler on the in-memory cluster.

The nodes are created in the cluster, in the order the FGD artifact breaks ties between
equally scored nodes (:func:`tie_order`); then each arriving pod is created, the scheduler
runs until idle (its informers see the pod, the framework filters, scores, reserves and
binds it through the cluster port exactly as in a real cluster), and the pod is either
bound or, as in the paper's protocol, dropped: a pod that fits nowhere is deleted and
never retried, and bound pods are never deleted. After every pod the allocated and
arrived milli-GPU are sampled.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import assignment_of
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.placement.shapes import Shape, milli_of_percent
from vgpu_simulate import mapping
from vgpu_simulate.arrivals import arrival_order
from vgpu_simulate.links import LinkTally, check_shape
from vgpu_simulate.metrics import Sample, curve, unallocated_at
from vgpu_simulate.policies import SimPolicy
from vgpu_simulate.tenancy import Tenancy
from vgpu_simulate.trace import TraceNode, TracePod, gpu_capacity_milli

#: The replay's clock: fixed, so heartbeats never expire and runs are repeatable.
EPOCH = 1_700_000_000.0

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunResult:
    policy: str
    seed: int
    pods: int
    placed: int
    failed: int
    unallocated_gpu_pct_at_100: float | None
    curve: list[tuple[int, float]]
    seconds: float
    capacity_milli: int
    samples: list[Sample] = field(default_factory=list, repr=False)
    #: With topology-carrying nodes: the multi-GPU pods placed, and the share of them that
    #: got their node's best possible link (:mod:`.links`).
    multi_gpu_pods: int | None = None
    best_link_pct: float | None = None
    #: With tenants: the pods that kept to their namespace's fault domain, and of those
    #: the ones placed.
    isolated_pods: int | None = None
    isolated_placed: int | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "policy": self.policy, "seed": self.seed, "pods": self.pods,
            "placed": self.placed, "failed": self.failed,
            "unallocated_gpu_pct_at_100": self.unallocated_gpu_pct_at_100,
            "curve": [[p, v] for p, v in self.curve], "seconds": round(self.seconds, 2)}
        if self.multi_gpu_pods is not None:
            out.update(multi_gpu_pods=self.multi_gpu_pods, best_link_pct=self.best_link_pct)
        if self.isolated_pods is not None:
            out.update(isolated_pods=self.isolated_pods,
                       isolated_placed=self.isolated_placed)
        return out


def trace_shape(pod: TracePod) -> Shape:
    """A trace pod as the fragmentation policies see pods (a zero CPU request counts 100m)."""
    share = milli_of_percent(mapping.percent(pod.gpu_milli)) if pod.num_gpu else 0
    return Shape(pod.cpu_milli or 100, share, pod.num_gpu, pod.gpu_spec, pod.memory_mib or 0)


def tie_order(nodes: Sequence[TraceNode], perm: Sequence[int]) -> list[TraceNode]:
    """The nodes in the order the artifact breaks score ties: it sorts them by name, renames
    the ``i``-th ``f"{perm[i]:04d}-{name}"`` and picks the smallest name among equal scores
    (``selectHost``); the framework here picks the first in snapshot order, which is
    creation order."""
    by_name = sorted(nodes, key=lambda n: n.name.encode())
    return [by_name[i] for i in sorted(range(len(by_name)), key=lambda i: perm[i])]


def replay(nodes: Sequence[TraceNode], pods: Sequence[TracePod], policy: SimPolicy, *,
           seed: int, inflate: float = 1.3, progress: Progress | None = None,
           topology: str | None = None, hide_links: bool = False,
           tenancy: Tenancy | None = None) -> RunResult:
    """``topology`` gives every node that shape (:mod:`.links`); ``hide_links`` keeps the
    links out of the inventories, so that only the measure knows them; ``tenancy`` spreads
    the pods over namespaces, some keeping to theirs (:mod:`.tenancy`)."""
    capacity = gpu_capacity_milli(nodes)
    if capacity <= 0:
        from vgpu_simulate.trace import TraceError  # noqa: PLC0415

        raise TraceError("the node list has no GPUs; nothing to measure")
    started = time.perf_counter()
    arrivals = arrival_order(pods, seed=seed, ratio=inflate, capacity_milli=capacity,
                             node_count=len(nodes))
    workload = [trace_shape(p) for p in pods]
    config = policy.config()
    cluster = MemoryCluster(copy_objects=False)
    tally = None
    if topology is not None:
        check_shape(topology)
        tally = LinkTally(topology)
        tally.add_nodes(nodes)
    tenancy = tenancy or Tenancy()
    tenants = tenancy.assign(arrivals.pods, seed)
    uids = tenancy.uids(arrivals.pods, seed)
    for node in tie_order(nodes, arrivals.node_perm):
        cluster.create("nodes", mapping.node_object(node, EPOCH, topology=topology,
                                                    publish_links=not hide_links,
                                                    isolation=tenancy.mode))
    sched = Scheduler(config, cluster, clock=lambda: EPOCH,
                      registry=policy.registry(workload, arrivals.rng))
    outcomes: dict[str, str] = {}

    def listen(decision: AttemptRecord) -> None:
        outcomes[decision.pod] = decision.outcome

    sched.listeners.append(listen)
    sched.run_until_idle()
    arrived = allocated = placed = failed = isolated = isolated_placed = 0
    samples: list[Sample] = []
    total = len(arrivals.pods)
    for i, pod in enumerate(arrivals.pods):
        namespace, keeps = tenants[pod.name]
        obj = mapping.pod_object(pod, config, namespace=namespace,
                                 extra=tenancy.annotations(keeps), run_as_user=uids[pod.name])
        key = f"{namespace}/{pod.name}"
        cluster.create("pods", obj)
        sched.run_until_idle()
        arrived += pod.total_gpu_milli
        isolated += keeps
        if outcomes.get(key) == "bound":
            placed += 1
            isolated_placed += keeps
            allocated += mapping.allocated_milli(pod)
            if tally is not None and pod.num_gpu > 1:
                assignment = assignment_of(cluster.get("pods", pod.name, namespace))
                if assignment is not None:
                    tally.record(assignment)
        else:
            failed += 1
            cluster.delete("pods", pod.name, namespace)
            sched.run_until_idle()
        outcomes.pop(key, None)
        samples.append(Sample(arrived, allocated))
        if progress is not None:
            progress(i + 1, total)
    points = curve(samples, capacity)
    return RunResult(policy=policy.name, seed=seed, pods=total, placed=placed, failed=failed,
                     unallocated_gpu_pct_at_100=unallocated_at(points), curve=points,
                     seconds=time.perf_counter() - started, capacity_milli=capacity,
                     samples=samples,
                     multi_gpu_pods=None if tally is None else tally.multi_gpu,
                     best_link_pct=None if tally is None else tally.best_pct,
                     isolated_pods=isolated if tenancy.tenants > 1 else None,
                     isolated_placed=isolated_placed if tenancy.tenants > 1 else None)


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
