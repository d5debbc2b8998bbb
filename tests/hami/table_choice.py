"""Cases built from HAMi's code around its tables, through the whole scheduler: its node
score and moment (pkg/scheduler/score.go ``scoreNode``, pkg/scheduler/policy/node_policy.go
``ComputeDefaultScore``, pkg/scheduler/scheduler.go ``Filter`` taking the last node), its
quota-aware GPU choice (pkg/device/nvidia/device.go ``Fit`` and ``fitQuota``,
pkg/device/quota.go ``FitQuota``) and its order among equal GPUs (score.go
``fitInDevices``: Go's ``sort.Sort`` of one node copy per pod, ``Fit`` walking from the
end). HAMi's answer in each row is what that code gives for the input, derived by hand
from it (Go's sort: :mod:`vgpu_scheduler.placement.go_sort`, checked against Go's own).

An outcome is the node and GPUs the pod lands on (``"n/GPU-n-3"``), or ``"pending"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.hami.rows import Row
from tests.scheduler.e2e_support import setup
from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_SUCCESS
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import decode_assignment
from vgpu.devices import Device
from vgpu_scheduler.host.scheduler import Scheduler

SCORE = "pkg/scheduler/score.go"
FIT = "pkg/device/nvidia/device.go"
#: Every row here says it is HAMi's code, not one of HAMi's tables, that gives its answer.
D = "derived from the code: "
NODE_POLICY = {"hami.io/node-scheduler-policy": "binpack"}
#: (node, GPU index) -> (tasks, MiB, cores) of other pods, each task its own pod.
Held = Mapping[tuple[str, int], tuple[int, int, int]]


def _node(name: str, memories: Sequence[int]) -> dict[str, Any]:
    devices = tuple(Device(f"GPU-{name}-{i}", i, "Tesla T4", m) for i, m in enumerate(memories))
    return builders.node(name, devices, heartbeat=FakeClock().now)


def _hold(sched: Scheduler, cluster: MemoryCluster, held: Held) -> None:
    for (node, index), (tasks, memory, cores) in held.items():
        for t in range(tasks):
            name = f"held-{node}-{index}-{t}"
            cluster.create("pods", builders.pod(name, [builders.container(
                gpumem=memory // tasks, cores=cores // tasks)], annotations={
                "nvidia.com/use-gpuuuid": f"GPU-{node}-{index}"}))
            sched.run_until_idle()
            cluster.patch_annotations("pods", name, {BIND_PHASE: PHASE_SUCCESS}, "default")


def placed(nodes: Mapping[str, Sequence[int]], held: Held, containers: Sequence[Any],
           annotations: Mapping[str, str] | None = None,
           quota: Mapping[str, str] | None = None) -> str:
    """Where the pod lands on ``nodes`` (name -> GPU sizes in MiB) beside ``held``, in
    namespace ``team`` with a ResourceQuota of ``quota``'s hard limits."""
    sched, cluster, _ = setup([_node(n, m) for n, m in nodes.items()])
    _hold(sched, cluster, held)
    if quota:
        cluster.create("resourcequotas", {"metadata": {"name": "q", "namespace": "team"},
                                          "spec": {"hard": dict(quota)}})
    cluster.create("pods", builders.pod("p", list(containers), namespace="team",
                                        annotations=dict(annotations or {})))
    sched.run_until_idle()
    obj = cluster.get("pods", "p", "team")
    raw = obj["metadata"].get("annotations", {}).get(ASSIGNMENT)
    if raw is None:
        return "pending"
    slices = decode_assignment(raw).containers
    return f"{obj['spec']['nodeName']}/" + ",".join(
        s.uuid for c in containers for s in slices[c["name"]])


def _c(name: str = "main", **kw: Any) -> dict[str, Any]:
    return builders.container(name, **kw)


def _rows() -> list[Row]:
    small = {("a", 0): (6, 600, 6), ("b", 0): (1, 2000, 20)}
    sizes = {("x", 0): (1, 5000, 50), ("y", 0): (1, 800, 40)}
    pod = [_c(gpumem=1000, cores=10)]
    rows = [
        # ComputeDefaultScore before the pod: a = 10 x (6/10 + 6/100 + 600/16384) = 6.97,
        # b = 10 x (1/10 + 20/100 + 2000/16384) = 4.22; binpack takes the last of the
        # ascending sort (the highest), spread the lowest.
        Row(f"{SCORE}: {D}scoreNode/binpack: six small tasks outscore one large",
            lambda: placed({"a": [16384], "b": [16384]}, small, pod, NODE_POLICY),
            "a/GPU-a-0"),
        Row(f"{SCORE}: {D}scoreNode/spread: one large task is the emptier node",
            lambda: placed({"a": [16384], "b": [16384]}, small, pod,
                           {"hami.io/node-scheduler-policy": "spread"}), "b/GPU-b-0"),
        # x = 10 x (1/10 + 50/100 + 5000/10000) = 11, y = 10 x (1/10 + 40/100 + 800/2000) = 9.
        Row(f"{SCORE}: {D}scoreNode/binpack: the fuller node, not the one fuller with the pod",
            lambda: placed({"x": [10000], "y": [2000]}, sizes, pod, NODE_POLICY), "x/GPU-x-0"),
    ]
    quota = {"limits.nvidia.com/gpumem": "2000"}
    four = {"n": [8000, 4000, 6000, 2000]}
    for case, containers, annos, want in [
        ("a whole GPU, only the 2000 MiB GPU within the quota", [_c()], {}, "n/GPU-n-3"),
        ("a whole GPU, HAMi's spread (all tie; Fit from the end)", [_c()],
         {"hami.io/gpu-scheduler-policy": "spread"}, "n/GPU-n-3"),
        ("50 % of a GPU, the first GPU within the quota in rank order", [_c(percent=50)], {},
         "n/GPU-n-1"),
        ("50 % of a GPU, HAMi's binpack (all tie; Fit from the end)", [_c(percent=50)],
         {"hami.io/gpu-scheduler-policy": "binpack"}, "n/GPU-n-3"),
        # a: all tie at 3.5, Fit takes GPU 3 (500 MiB); b: GPU 3 now scores 7.0 and spread
        # sorts it first, Fit takes GPU 2 (1500 MiB), the quota's 2000 reached, not passed.
        ("two containers of 25 %, HAMi's spread: the second within what the first left",
         [_c("a", percent=25), _c("b", percent=25)],
         {"hami.io/gpu-scheduler-policy": "spread"}, "n/GPU-n-3,GPU-n-2"),
    ]:
        rows.append(Row(f"{FIT}: {D}Fit/fitQuota skips a GPU the quota refuses: {case}",
                        lambda c=containers, a=annos: placed(four, {}, c, a, quota),
                        want))
    rows.append(Row(f"{FIT}: {D}Fit/fitQuota: no GPU within the quota leaves the node out",
                    lambda: placed(four, {}, [_c(percent=100)], {},
                                   {"limits.nvidia.com/gpumem": "1000"}), "pending"))
    # gpu-0: 2 tasks, 4000 MiB, 20 %; gpu-1: 1 task, 3000 MiB, 40 %; the pod 1000 MiB, 10 %:
    # both score 10 x (3/10 + 30/100 + 5000/10000) = 10 x (2/10 + 50/100 + 4000/10000) = 11.0
    # in float32. Go sorts 2 elements by insertion, keeping their order; Fit takes gpu-1.
    tie = {("n", 0): (2, 4000, 20), ("n", 1): (1, 3000, 40)}
    for policy in ("spread", "binpack"):
        rows.append(Row(f"{SCORE}: {D}fitInDevices/sort.Sort keeps equal GPUs in order, Fit "
                        f"takes the last ({policy})",
                        lambda p=policy: placed({"n": [10000, 10000]}, tie, pod,
                                                {"hami.io/gpu-scheduler-policy": p}),
                        "n/GPU-n-1"))
    # 13 GPUs, 3, 4 and 6 each holding a task (so scoring higher), binpack: past 12 GPUs
    # Go's pdqsort partitions and the busy ones end [3, 6, 4] (Go 1.26's sort.Sort on these
    # keys, run: 10 1 2 0 12 5 11 7 8 9 3 6 4), where a stable sort ends [3, 4, 6].
    busy = {("n", i): (1, 1000, 10) for i in (3, 4, 6)}
    rows.append(Row(f"{SCORE}: {D}fitInDevices/sort.Sort past 12 GPUs is Go's pdqsort",
                    lambda: placed({"n": [16384] * 13}, busy, pod,
                                   {"hami.io/gpu-scheduler-policy": "binpack"}),
                    "n/GPU-n-4"))
    # Two containers: the second sorts the list the first left (one node copy per pod).
    rows.append(Row(f"{SCORE}: {D}fitInDevices/a second container sorts the list the first "
                    f"left", lambda: placed({"n": [10000, 10000, 10000]}, {}, [
                        _c("a", gpumem=1000, cores=10), _c("b", gpumem=1000, cores=10)],
                        {"hami.io/gpu-scheduler-policy": "spread"}),
                    "n/GPU-n-2,GPU-n-1"))
    return rows


ROWS = _rows()
