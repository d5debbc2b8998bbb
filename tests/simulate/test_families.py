"""Generated workload variants: each family does what its name says, the same name and seed
give the same pods, and the files read back as they were written."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu_simulate import families
from vgpu_simulate.trace import TraceError, TraceNode, TracePod, load_pods, write_pods

NODES = [TraceNode("n-g2", 96000, 393216, 8, "G2"), TraceNode("n-t4", 104000, 524288, 2, "T4"),
         TraceNode("n-p100", 8000, 61440, 2, "P100")]


def _pods() -> list[TracePod]:
    pods = []
    for i in range(400):
        if i % 10 == 0:
            pods.append(TracePod(f"p{i}", 4000, 8192, 0, 0))
        elif i % 10 < 5:
            pods.append(TracePod(f"p{i}", 6000, 16384, 1, 250 + 50 * (i % 4)))
        elif i % 20 == 9:
            pods.append(TracePod(f"p{i}", 32000, 65536, 4 if i % 40 == 9 else 8, 1000))
        else:
            pods.append(TracePod(f"p{i}", 12000, 32768, 1, 1000))
    return pods


@pytest.mark.parametrize(("name", "key", "expected"), [
    ("cpu250", "cpu_only_pct", 25.0),
    ("cpu050", "cpu_only_pct", 5.0),
    ("gpushare60", "sharing_demand_pct", 60.0),
    ("gpushare100", "sharing_demand_pct", 100.0),
    ("multigpu50", "multi_gpu_demand_pct", 50.0),
    ("gpuspec33", "constrained_pct", 33.0),
    ("pinned60", "constrained_pct", 60.0),
])
def test_each_family_reaches_its_share(name: str, key: str, expected: float) -> None:
    got = families.describe(families.derive(name, _pods(), NODES))
    # Resampled shares land near the target; counted ones (pods) exactly, up to rounding.
    assert got[key] == pytest.approx(expected, abs=3.0 if key.endswith("demand_pct") else 0.5)


def test_families_keep_what_they_do_not_change() -> None:
    base = families.describe(_pods())
    cpu = families.describe(families.derive("cpu300", _pods(), NODES))
    assert cpu["gpu_demand"] == base["gpu_demand"]  # the GPU pods are the same
    share = families.derive("gpushare60", _pods(), NODES)
    assert len(share) == len(_pods())
    assert sum(1 for p in share if not p.num_gpu) == sum(1 for p in _pods() if not p.num_gpu)
    spec = families.derive("gpuspec50", _pods(), NODES)
    assert [(p.cpu_milli, p.num_gpu, p.gpu_milli) for p in spec] == [
        (p.cpu_milli, p.num_gpu, p.gpu_milli) for p in _pods()]
    assert [p.name for p in spec] == [f"openb-pod-{i:04d}" for i in range(len(spec))]


def test_constraints_name_models_that_can_hold_the_pod() -> None:
    pods = families.derive("gpuspec100", _pods(), NODES)
    pinned = [p for p in pods if p.gpu_spec]
    assert pinned and all(not p.gpu_spec for p in pods if not p.num_gpu)
    for p in pinned:
        assert any(n.model in p.gpu_spec and n.gpus >= p.num_gpu and n.cpu_milli >= p.cpu_milli
                   for n in NODES)
    # An 8-GPU pod fits only the G2 node here; a pod with 12 CPUs is never P100-only.
    assert {p.gpu_spec for p in pinned if p.num_gpu == 8} == {("G2",)}
    assert not any(p.gpu_spec == ("P100",) for p in pinned if p.cpu_milli > 8000)


def test_pinned_draws_models_by_their_gpus() -> None:
    pods = families.derive("pinned100", _pods(), NODES)
    # Whole-GPU pods with 12 CPUs fit G2 (8 GPUs) and T4 (2): about four to one.
    whole = [p.gpu_spec for p in pods if p.num_gpu == 1 and not p.is_gpu_share]
    assert set(whole) <= {("G2",), ("T4",)}
    assert 2.5 < whole.count(("G2",)) / whole.count(("T4",)) < 6.5


def test_the_same_name_and_seed_give_the_same_pods(tmp_path: Path) -> None:
    name = "multigpu30+gpuspec20"
    once = families.derive(name, _pods(), NODES)
    assert once == families.derive(name, _pods(), NODES)
    assert once != families.derive(name, _pods(), NODES, seed=families.SEED + 1)
    target = tmp_path / "pods.csv"
    write_pods(target, once)
    assert load_pods(target) == once


@pytest.mark.parametrize("name", ["gpuspec", "bogus10", "cpu1000", "gpushare101", "cpu50+x1"])
def test_a_bad_name_is_refused(name: str) -> None:
    with pytest.raises(TraceError):
        families.derive(name, _pods(), NODES)


def test_the_generated_list_spans_the_families() -> None:
    named = {families._NAME.fullmatch(part).group(1)  # type: ignore[union-attr]
             for name in families.GENERATED for part in name.split("+")}
    assert named == set(families.FAMILIES)
    assert len(families.GENERATED) >= 12
