from __future__ import annotations

import pytest

from vgpu_simulate import bundled, published
from vgpu_simulate.arrivals import arrival_order
from vgpu_simulate.metrics import Sample, curve
from vgpu_simulate.trace import TracePod, gpu_capacity_milli


def pods(*milli: int) -> list[TracePod]:
    return [TracePod(f"p{i:02d}", 1000, 0, 1 if m else 0, m) for i, m in enumerate(milli)]


def test_order_is_a_seeded_shuffle_of_the_name_sorted_list() -> None:
    listed = list(reversed(pods(*[100] * 20)))
    a = arrival_order(listed, seed=42, ratio=0, capacity_milli=10_000, node_count=3)
    b = arrival_order(pods(*[100] * 20), seed=42, ratio=0, capacity_milli=10_000, node_count=3)
    assert [p.name for p in a.pods] == [p.name for p in b.pods]
    assert sorted(p.name for p in a.pods) == [f"p{i:02d}" for i in range(20)]
    c = arrival_order(listed, seed=43, ratio=0, capacity_milli=10_000, node_count=3)
    assert [p.name for p in c.pods] != [p.name for p in a.pods]
    assert sorted(a.node_perm) == [0, 1, 2]


def test_tuning_up_appends_clones_until_the_next_would_exceed_the_target() -> None:
    base = pods(1000, 500, 0)
    a = arrival_order(base, seed=1, ratio=1.3, capacity_milli=10_000, node_count=1)
    clones = a.pods[a.original:]
    assert a.original == 3 and clones
    assert all("-tuned-" in p.name for p in clones)
    assert [p.name.split("-tuned-")[1] for p in clones] == [str(i) for i in range(len(clones))]
    total = sum(p.total_gpu_milli for p in a.pods)
    assert total <= 13_000
    assert total + 1000 > 13_000  # some pod of the list would no longer have fitted


def test_tuning_down_drops_pods_until_the_demand_fits() -> None:
    a = arrival_order(pods(*[1000] * 10), seed=5, ratio=0.5, capacity_milli=10_000,
                      node_count=1)
    assert len(a.pods) == a.original == 5
    assert sum(p.total_gpu_milli for p in a.pods) == 5000


@pytest.mark.parametrize("variant", ["default", "cpu250", "gpushare100"])
def test_arrivals_reproduce_the_papers_order(variant: str) -> None:
    """Until the first pod fails, every policy's allocation curve is the arrival curve
    itself; the published curves (means over seeds 42..51) match the mean of ours there
    to the rounding: the same pods arrive in the same order."""
    nodes = bundled.nodes()
    cap = gpu_capacity_milli(nodes)
    trace = bundled.pods(variant)
    curves = []
    for seed in range(42, 52):
        a = arrival_order(trace, seed=seed, ratio=1.3, capacity_milli=cap,
                          node_count=len(nodes))
        samples, arrived = [], 0
        for p in a.pods:
            arrived += p.total_gpu_milli
            samples.append(Sample(arrived, arrived))
        points = dict(curve(samples, cap))
        assert max(points) == 130
        curves.append(points)
    paper = dict(published.load()[variant]["fgd"].curve)
    for pct in range(0, 60):
        mean = sum(c[pct] for c in curves) / len(curves)
        assert abs(mean - paper[pct]) <= 0.006, pct
