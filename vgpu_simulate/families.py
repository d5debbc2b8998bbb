"""Workload variants derived from the default trace, family by family, as the FGD artifact
builds its own (``alibaba/clusterdata`` ``cluster-trace-gpu-v2023``, README: the other pod
lists "are sampled from the default one, emphasizing certain types of workloads"; the
``gpuspec`` lists "augment tasks with GPU type requirements").

A variant is named by its steps, joined with ``+`` and applied left to right, each a
family and a level:

* ``cpuNNN``: the GPU pods as they are, the CPU-only pods sampled (a subset, or clones of
  random ones appended) so that they make up NNN/10 % of the pods (the artifact's
  ``cpu250`` has 25.0 %);
* ``gpushareNN``: as many pods, the CPU-only ones kept, the GPU pods drawn again (with
  replacement) from the sharing and the whole-GPU pods so that sharing pods make up NN % of
  the GPU demand;
* ``multigpuNN``: every pod, plus clones of random multi-GPU pods appended until multi-GPU
  pods make up NN % of the GPU demand;
* ``gpuspecNN``: NN % of the GPU pods, drawn at random, name the GPU models they accept
  (``gpu_spec``), drawn from the sets that the artifact's ``openb_pod_list_gpuspec33.csv``
  gives pods of the same kind (sharing, one whole GPU, several GPUs) with its frequencies;
* ``pinnedNN``: NN % of the GPU pods accept one GPU model, drawn in proportion to the
  cluster's GPUs of each model (no model in demand beyond its size, unlike ``gpuspec``).

A constraint is drawn only among the model sets with a node that could hold the pod alone.
Pods are renumbered ``openb-pod-NNNN`` in list order at the end. Everything is drawn from
Go's ``math/rand`` stream (:class:`GoRand`) with a fixed seed, so a name and a seed always
give the same list.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Sequence

from vgpu_simulate.gorand import GoRand
from vgpu_simulate.trace import MILLI, TraceError, TraceNode, TracePod

#: The generator's seed: fixed, so that the files are the same for everyone.
SEED = 2023

#: The variants ``bench/simulate_generate.py`` writes by default: every family at levels
#: the artifact did not publish results for (or never built), and mixtures of families.
GENERATED: tuple[str, ...] = (
    "gpuspec10", "gpuspec20", "gpuspec33", "gpuspec50",
    "pinned33", "pinned60",
    "multigpu20", "multigpu30", "multigpu50",
    "gpushare10", "gpushare20", "gpushare50", "gpushare70",
    "cpu150", "cpu300", "cpu400",
    "multigpu30+gpuspec20", "cpu200+gpuspec33", "gpushare60+pinned33",
)

_V100 = ("V100M16", "V100M32")
#: The model sets of the artifact's ``gpuspec33`` list by pod kind, with their counts
#: (duplicate names in a set merged).
ARTIFACT_SPECS: dict[str, tuple[tuple[tuple[str, ...], int], ...]] = {
    "share": ((("T4",), 593), (("P100",), 278), (("G2", "P100", "T4", *_V100), 13)),
    "whole": ((("T4",), 698), (("G2",), 321), (_V100, 156), (("P100", *_V100), 102),
              (("G3",), 80), (("P100", "T4", *_V100), 33), (("G2", "P100", "T4", *_V100), 26),
              (("A10", "G2", "T4", *_V100), 24), (("V100M32",), 18), (("A10", "T4"), 6),
              (("P100", "V100M16"), 4), (("A10", "G2", "P100", "T4", *_V100), 3),
              (("V100M16",), 3), (("P100",), 1), (("T4", *_V100), 1)),
    "multi": ((("G2",), 10), (_V100, 7), (("G3",), 6), (("T4", *_V100), 2),
              (("V100M32",), 2), (("P100", *_V100), 1)),
}

Step = Callable[[list[TracePod], Sequence[TraceNode], float, GoRand], list[TracePod]]
_NAME = re.compile(r"([a-z]+?)(\d+)")


def _demand(pods: Sequence[TracePod], keep: Callable[[TracePod], bool] = lambda p: True
            ) -> int:
    return sum(p.total_gpu_milli for p in pods if keep(p))


def _multi(p: TracePod) -> bool:
    return p.num_gpu > 1


def _draw(pool: Sequence[TracePod], rng: GoRand) -> TracePod:
    return pool[rng.intn(len(pool))]


def cpu_only(pods: list[TracePod], nodes: Sequence[TraceNode], share: float,
             rng: GoRand) -> list[TracePod]:
    """CPU-only pods making up ``share`` of the pods; the GPU pods unchanged."""
    gpu = [p for p in pods if p.num_gpu]
    pool = [p for p in pods if not p.num_gpu]
    want = round(share * len(gpu) / (1 - share)) if share < 1 else len(pool)
    if not pool or want <= len(pool):
        kept = set(rng.perm(len(pool))[:want])
        return gpu + [p for i, p in enumerate(pool) if i in kept]
    return gpu + pool + [_draw(pool, rng) for _ in range(want - len(pool))]


def sharing(pods: list[TracePod], nodes: Sequence[TraceNode], share: float,
            rng: GoRand) -> list[TracePod]:
    """As many GPU pods, drawn again so that sharing pods are ``share`` of the GPU demand."""
    cpu = [p for p in pods if not p.num_gpu]
    shared = [p for p in pods if p.is_gpu_share]
    whole = [p for p in pods if p.num_gpu and not p.is_gpu_share]
    count = len(pods) - len(cpu)
    if not shared or not whole:
        raise TraceError("gpushare: the list needs both sharing and whole-GPU pods")
    a = _demand(shared) / len(shared)
    b = _demand(whole) / len(whole)
    n = round(count * share * b / (a * (1 - share) + share * b))
    return (cpu + [_draw(shared, rng) for _ in range(n)]
            + [_draw(whole, rng) for _ in range(count - n)])


def multi_gpu(pods: list[TracePod], nodes: Sequence[TraceNode], share: float,
              rng: GoRand) -> list[TracePod]:
    """Every pod, plus multi-GPU clones until they are ``share`` of the GPU demand."""
    pool = [p for p in pods if _multi(p)]
    if not pool:
        raise TraceError("multigpu: the list has no multi-GPU pod to clone")
    out = list(pods)
    total, multi = _demand(pods), _demand(pods, _multi)
    while multi < share * total:
        clone = _draw(pool, rng)
        out.append(clone)
        total += clone.total_gpu_milli
        multi += clone.total_gpu_milli
    return out


def _kind(pod: TracePod) -> str:
    return "share" if pod.is_gpu_share else "whole" if pod.num_gpu == 1 else "multi"


def _hosts(pod: TracePod, models: Sequence[str], nodes: Sequence[TraceNode]) -> bool:
    return any(n.model in models and n.gpus >= pod.num_gpu and n.cpu_milli >= pod.cpu_milli
               and n.memory_mib >= (pod.memory_mib or 0) for n in nodes)


def _pick(options: Sequence[tuple[tuple[str, ...], int]], rng: GoRand) -> tuple[str, ...]:
    r = rng.intn(sum(w for _, w in options))
    for models, weight in options:
        if r < weight:
            return models
        r -= weight
    raise AssertionError("unreachable: r is below the total weight")


def _constrain(pods: list[TracePod], nodes: Sequence[TraceNode], share: float, rng: GoRand,
               sets: Callable[[TracePod], Sequence[tuple[tuple[str, ...], int]]]
               ) -> list[TracePod]:
    gpu = [i for i, p in enumerate(pods) if p.num_gpu]
    chosen = sorted(gpu[j] for j in rng.perm(len(gpu))[:round(share * len(gpu))])
    out = list(pods)
    for i in chosen:
        options = [(m, w) for m, w in sets(pods[i]) if w > 0 and _hosts(pods[i], m, nodes)]
        if options:
            out[i] = dataclasses.replace(pods[i], gpu_spec=_pick(options, rng))
    return out


def gpu_spec(pods: list[TracePod], nodes: Sequence[TraceNode], share: float,
             rng: GoRand) -> list[TracePod]:
    """``share`` of the GPU pods constrained to the artifact's model sets for their kind."""
    return _constrain(pods, nodes, share, rng, lambda p: ARTIFACT_SPECS[_kind(p)])


def pinned(pods: list[TracePod], nodes: Sequence[TraceNode], share: float,
           rng: GoRand) -> list[TracePod]:
    """``share`` of the GPU pods pinned to one model, drawn by the cluster's GPUs per model."""
    gpus = Counter[str]()
    for n in nodes:
        gpus[n.model] += n.gpus
    sets = tuple(((m,), g) for m, g in sorted(gpus.items()) if m and g)
    return _constrain(pods, nodes, share, rng, lambda p: sets)


FAMILIES: dict[str, tuple[Step, float]] = {
    # family: (step, level divisor: cpu250 is 25.0 %)
    "cpu": (cpu_only, 1000.0), "gpushare": (sharing, 100.0), "multigpu": (multi_gpu, 100.0),
    "gpuspec": (gpu_spec, 100.0), "pinned": (pinned, 100.0),
}


def steps(name: str) -> list[tuple[Step, float]]:
    """The steps a variant name stands for, with their shares; TraceError for a bad name."""
    out: list[tuple[Step, float]] = []
    for part in name.split("+"):
        match = _NAME.fullmatch(part)
        if match is None or match.group(1) not in FAMILIES:
            raise TraceError(f"variant {name!r}: {part!r} is not one of "
                             f"{', '.join(f + 'NN' for f in FAMILIES)}")
        step, scale = FAMILIES[match.group(1)]
        share = int(match.group(2)) / scale
        if not 0 <= share <= 1 or (step is cpu_only and share >= 1):
            raise TraceError(f"variant {name!r}: level {match.group(2)} is out of range")
        out.append((step, share))
    return out


def derive(name: str, pods: Sequence[TracePod], nodes: Sequence[TraceNode], *,
           seed: int = SEED) -> list[TracePod]:
    """The variant ``name`` of ``pods`` (see the module docstring), renumbered."""
    rng = GoRand(seed)
    out = list(pods)
    for step, share in steps(name):
        out = step(out, nodes, share, rng)
    width = max(4, len(str(len(out) - 1)))
    return [dataclasses.replace(p, name=f"openb-pod-{i:0{width}d}") for i, p in enumerate(out)]


def describe(pods: Sequence[TracePod]) -> dict[str, float]:
    """The shares the family names speak of, for a check and for the generator's log."""
    gpu = [p for p in pods if p.num_gpu]
    total = _demand(pods) or 1
    return {
        "pods": len(pods),
        "cpu_only_pct": round(100 * (len(pods) - len(gpu)) / max(len(pods), 1), 2),
        "sharing_demand_pct": round(100 * _demand(pods, lambda p: p.is_gpu_share) / total, 2),
        "multi_gpu_demand_pct": round(100 * _demand(pods, _multi) / total, 2),
        "constrained_pct": round(100 * sum(1 for p in gpu if p.gpu_spec) / max(len(gpu), 1), 2),
        "gpu_demand": round(total / MILLI, 1),
    }
