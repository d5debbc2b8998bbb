"""Where two policies part ways on a workload: the pods of one replay, policy by policy.

    python bench/simulate_diverge.py [--pods FILE | --variant NAME] [--seed 42]
        [--policy fragmentation-aware --policy fgd] [--show 5]

Both policies replay the same arrivals in lockstep, each on its own in-memory cluster.
Printed: the first ``--show`` pods they place on different nodes, with each node's state
before the pod in that policy's cluster and both measures' growth there (the clusters are
equal before the first divergence, not after); then, at 100 %
arrived, each policy's idle GPUs per model, the pods each failed by kind and GPU constraint,
and the divergences counted by (pod kind, constraint, model A chose, model B chose). The
last line is one JSON object with the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from _support import sampled

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent))  # bench/_support.py

from vgpu.cluster.memory import MemoryCluster  # noqa: E402
from vgpu_scheduler.host.attempt_record import AttemptRecord  # noqa: E402
from vgpu_scheduler.host.scheduler import Scheduler  # noqa: E402
from vgpu_scheduler.placement import shares, stranding  # noqa: E402
from vgpu_scheduler.placement.demand import NodeKind  # noqa: E402
from vgpu_scheduler.placement.shapes import Shape  # noqa: E402
from vgpu_simulate import bundled, mapping, policies  # noqa: E402
from vgpu_simulate.arrivals import Arrivals, arrival_order  # noqa: E402
from vgpu_simulate.baselines.fragmentation import (  # noqa: E402
    FragModel,
    memory_free,
    typical_shapes,
)
from vgpu_simulate.replay import EPOCH, tie_order, trace_shape  # noqa: E402
from vgpu_simulate.trace import (  # noqa: E402
    TraceNode,
    TracePod,
    gpu_capacity_milli,
    load_pods,
)


class Lane:
    """One policy's cluster and scheduler, stepped a pod at a time."""

    def __init__(self, name: str, nodes: Sequence[TraceNode], workload: Sequence[Shape],
                 arrivals: Arrivals) -> None:
        self.policy = policies.get(name)
        config = self.policy.config()
        self.config = config
        self.cluster = MemoryCluster(copy_objects=False)
        for node in tie_order(nodes, arrivals.node_perm):
            self.cluster.create("nodes", mapping.node_object(node, EPOCH))
        self.sched = Scheduler(config, self.cluster, clock=lambda: EPOCH,
                               registry=self.policy.registry(workload, arrivals.rng))
        self.last: AttemptRecord | None = None
        self.sched.listeners.append(self._listen)
        self.sched.run_until_idle()
        self.failed: Counter[tuple[str, str]] = Counter()
        self.states = {n: self.state(n) for n in self.sched.cache.node_names()}

    def _listen(self, decision: AttemptRecord) -> None:
        self.last = decision

    def place(self, pod: TracePod) -> str | None:
        self.last = None
        self.cluster.create("pods", mapping.pod_object(pod, self.config))
        self.sched.run_until_idle()
        if self.last is not None and self.last.outcome == "bound" and self.last.node:
            self.states[self.last.node] = self.state(self.last.node)
            return self.last.node
        self.cluster.delete("pods", pod.name, mapping.NAMESPACE)
        self.sched.run_until_idle()
        self.failed[(kind(pod), "|".join(pod.gpu_spec) or "-")] += 1
        return None

    def state(self, node: str | None) -> tuple[str, tuple[int, ...], int, int] | None:
        info = self.sched.cache.node_info(node) if node else None
        if info is None:
            return None
        return (shares.model(info), shares.free_milli(info), shares.free_cpu(info),
                shares.free_memory_mib(info))

    def idle_by_model(self) -> dict[str, float]:
        out: Counter[str] = Counter()
        for name in self.sched.cache.node_names():
            info = self.sched.cache.node_info(name)
            if info is not None and info.devices:
                out[shares.model(info)] += sum(shares.free_milli(info)) / 1000
        return {m: round(v, 1) for m, v in sorted(out.items())}


def kind(pod: TracePod) -> str:
    if not pod.num_gpu:
        return "cpu"
    return "share" if pod.is_gpu_share else f"{pod.num_gpu}gpu"


def measures(state: tuple[str, tuple[int, ...], int, int], shape: Shape,
             load: stranding.Workload, frag: FragModel) -> str:
    model, free, cpu, memory = state
    positions = range(len(free)) if shape.gpus == 1 and shape.milli_gpu < 1000 else [None]
    ours = [stranding.delta(free, cpu, memory, model, shape, load=load, position=p)
            for p in positions]
    ours_known = [d for d in ours if d is not None]
    choice = frag.best_choice(cpu, free, model, shape)
    return (f"{model:8} free={free} cpu={cpu} mem={memory}  ours Δ="
            f"{min(ours_known) if ours_known else None!s:.8}  fgd Δ="
            f"{choice.delta if choice else None!s:.8} (score {choice.score if choice else '-'})")


def main() -> int:
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pods")
    source.add_argument("--variant", default="default")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--policy", action="append")
    parser.add_argument("--show", type=int, default=5)
    parser.add_argument("--sample", type=float, default=1.0,
                        help="replay on this share of the nodes (a smoke run: 0.05)")
    args = parser.parse_args()
    a_name, b_name = args.policy or ["fragmentation-aware", "fgd"]
    nodes = sampled(bundled.nodes(), args.sample)
    pods = load_pods(args.pods) if args.pods else bundled.pods(args.variant)
    capacity = gpu_capacity_milli(nodes)
    workload = [trace_shape(p) for p in pods]
    kinds = Counter(NodeKind(n.model, n.gpus, n.cpu_milli, n.memory_mib) for n in nodes)
    load = stranding.workload(workload, kinds)
    frag = FragModel(typical_shapes(memory_free(workload)))
    lanes = []
    for name in (a_name, b_name):
        arrivals = arrival_order(pods, seed=args.seed, ratio=1.3, capacity_milli=capacity,
                                 node_count=len(nodes))
        lanes.append(Lane(name, nodes, workload, arrivals))
    a, b = lanes
    shown = 0
    parted: Counter[tuple[str, str, str, str]] = Counter()
    arrived = 0
    summary: dict[str, object] = {}
    for i, pod in enumerate(arrivals.pods):
        before = {lane.policy.name: dict(lane.states) for lane in lanes} if (
            shown < args.show) else {}
        node_a = a.place(pod)
        node_b = b.place(pod)
        if node_a != node_b:
            model_a = a.state(node_a)[0] if node_a else "failed"
            model_b = b.state(node_b)[0] if node_b else "failed"
            parted[(kind(pod), "|".join(pod.gpu_spec) or "-", model_a, model_b)] += 1
            if shown < args.show:
                shown += 1
                shape = trace_shape(pod)
                print(f"#{i} {pod.name} {kind(pod)} cpu={pod.cpu_milli} mem={pod.memory_mib} "
                      f"gpu={pod.num_gpu}x{pod.gpu_milli} spec={'|'.join(pod.gpu_spec) or '-'}")
                for lane, node in ((a, node_a), (b, node_b)):
                    state = before[lane.policy.name].get(node) if node else None
                    print(f"   {lane.policy.name:>20} -> {node}: "
                          + (measures(state, shape, load, frag) if state else "-"))
        arrived += pod.total_gpu_milli
        if arrived >= capacity and not summary:
            summary = {lane.policy.name: {
                "idle_gpus_by_model": lane.idle_by_model(), "failed": sum(lane.failed.values()),
                "failed_by": {f"{k} {c}": n for (k, c), n in lane.failed.most_common()}}
                for lane in lanes}
            for lane in lanes:
                print(f"at 100 % arrived, {lane.policy.name}: idle GPUs by model "
                      f"{lane.idle_by_model()}; failed {sum(lane.failed.values())}: "
                      f"{dict(lane.failed.most_common(12))}")
    print("divergences (kind, constraint, model A chose, model B chose):")
    for key, count in parted.most_common(20):
        print(f"  {count:5d}  {key}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
