from __future__ import annotations

import pytest

from vgpu_simulate.metrics import Sample, curve, unallocated_at, value_at


def test_each_percent_averages_the_events_that_round_to_it() -> None:
    cap = 100_000  # 1 % = 1000 milli
    samples = [Sample(400, 400), Sample(900, 900), Sample(1400, 1000), Sample(2600, 2000)]
    # 0.4 % → 0; 0.9 % and 1.4 % → 1; 2.6 % → 3; 2 % has none: 1 % and 3 % count.
    assert curve(samples, cap, max_pct=3) == [(0, 0.4), (1, 0.95), (2, 1.3), (3, 2.0)]


def test_unallocated_at_100_is_the_complement_of_the_allocation_there() -> None:
    cap = 10_000
    samples = [Sample(9_990, 9_500), Sample(10_040, 9_500), Sample(12_000, 9_600)]
    points = curve(samples, cap)
    assert value_at(points, 100) == 95.0
    assert unallocated_at(points) == 5.0
    assert unallocated_at(points, 130) is None


@pytest.mark.parametrize("cap", [0, -5])
def test_capacity_must_be_positive(cap: int) -> None:
    with pytest.raises(ValueError):
        curve([], cap)
