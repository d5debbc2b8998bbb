"""How much memory a request means on a GPU: capacity, percentages and slice sizes.

Separate from ``test_devices`` (does it fit): the arithmetic of memory scaling, of
percentages resolved per GPU (always floored, never past the capacity) and of slice
sizes over whole columns of GPUs.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.devices_support import A100, SCALINGS, T4, req
from vgpu.devices import (
    EMPTY,
    Device,
    fit,
    largest_percent,
    memory_capacity,
    percent_of,
    resolve_memory,
    share_of,
    slice_mib,
)
from vgpu.requests import ContainerRequest

CAPACITY: list[tuple[str, int, float, int]] = [
    ("identity", 40960, 1.0, 40960),
    ("double", 40960, 2.0, 81920),
    ("half", 15360, 0.5, 7680),
    ("floor-of-fraction", 15, 0.5, 7),
    # Decimal scalings whose binary product falls just under the whole number: the
    # operator wrote 2.05 and 0.29, and means 31488 and 29.
    ("t4-2.05", 15360, 2.05, 31488),
    ("small-0.29", 100, 0.29, 29),
    ("v100-1.1", 32768, 1.1, 36044),
]


@pytest.mark.parametrize(("memory", "scaling", "expected"), [c[1:] for c in CAPACITY],
                         ids=[c[0] for c in CAPACITY])


def test_memory_capacity(memory: int, scaling: float, expected: int) -> None:
    assert memory_capacity(Device("u", 0, "m", memory), scaling) == expected


RESOLVE: list[tuple[str, ContainerRequest, Device, float, int]] = [
    ("mib-unchanged", req(mib=3000), A100, 1.0, 3000),
    ("mib-unchanged-by-scaling", req(mib=3000), A100, 2.0, 3000),
    ("percent-50", req(pct=50), A100, 1.0, 20480),
    ("percent-100-is-capacity", req(pct=100), T4, 1.0, 15360),
    ("percent-of-scaled-size", req(pct=50), A100, 2.0, 40960),
    ("percent-floors", req(pct=33), Device("u", 0, "m", 100), 1.0, 33),
    ("percent-floors-odd", req(pct=50), Device("u", 0, "m", 15), 1.0, 7),
    ("neither-means-whole-gpu", req(), T4, 1.0, 15360),
]


@pytest.mark.parametrize(("request_", "device", "scaling", "expected"),
                         [r[1:] for r in RESOLVE], ids=[r[0] for r in RESOLVE])


def test_resolve_memory(request_: ContainerRequest, device: Device, scaling: float,
                        expected: int) -> None:
    assert resolve_memory(request_, device, scaling) == expected


@pytest.mark.parametrize(("percent", "expected"), [(1, 409), (25, 10240), (100, 40960)])
def test_percent_of(percent: int, expected: int) -> None:
    assert percent_of(percent, A100, 1.0) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200_000), st.integers(1, 200_000), st.integers(1, 100),
       st.integers(1, 100), SCALINGS)


def test_percentage_resolution_is_monotone(m1: int, m2: int, p1: int, p2: int,
                                           scaling: float) -> None:
    small, large = sorted((m1, m2))
    low, high = sorted((p1, p2))
    d_small, d_large = Device("a", 0, "m", small), Device("b", 1, "m", large)
    assert percent_of(low, d_small, scaling) <= percent_of(high, d_small, scaling)
    assert percent_of(low, d_small, scaling) <= percent_of(low, d_large, scaling)
    assert memory_capacity(d_small, scaling) <= memory_capacity(d_large, scaling)
    assert percent_of(100, d_small, scaling) == memory_capacity(d_small, scaling)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200_000), st.integers(2, 16), SCALINGS)
def test_two_half_slices_fit_an_empty_gpu(memory: int, split: int, scaling: float) -> None:
    device = Device("GPU-h", 0, "m", memory, split=split)
    half = resolve_memory(req(pct=50), device, scaling)
    assert fit(device, EMPTY, half, 0, scaling) is None
    assert fit(device, EMPTY.add(half, 0), half, 0, scaling) is None


@pytest.mark.parametrize(("free", "capacity", "expected"), [
    (40960, 40960, 100),
    (20480, 40960, 50),
    (20479, 40960, 49),
    (0, 40960, 0),
    (-1, 40960, None),
    (100, 0, None),
])


def test_largest_percent(free: int, capacity: int, expected: int | None) -> None:
    assert largest_percent(free, capacity) == expected


@given(st.integers(1, 200_000), st.integers(0, 200_000))
def test_largest_percent_is_the_largest_that_fits(capacity: int, free: int) -> None:
    free = min(free, capacity)
    device = Device(uuid="g", index=0, model="m", memory_mib=capacity)
    p = largest_percent(free, capacity)
    assert p is not None and percent_of(p, device, 1.0) <= free
    assert p == 100 or percent_of(p + 1, device, 1.0) > free


@pytest.mark.parametrize(("mem", "pct", "capacity", "expected"), [
    (3000, None, 40960, 3000),   # absolute: the capacity does not matter
    (None, 50, 40960, 20480),
    (None, 33, 100, 33),
    (None, 1, 99, 0),            # floor: a percentage never rounds up past the capacity
    (None, None, 40960, 40960),  # neither given: the whole GPU
])


def test_slice_mib(mem: int | None, pct: int | None, capacity: int, expected: int) -> None:
    request = ContainerRequest("c", 1, mem, pct, 0)
    assert slice_mib(request, capacity) == expected


def test_slice_mib_of_a_column_is_slice_mib_of_each_value() -> None:
    import numpy as np

    capacities = np.asarray([0, 99, 15360, 40960], dtype=np.int64)
    for request in (ContainerRequest("c", 1, None, 37, 0), ContainerRequest("c", 1, 500, None, 0)):
        column = slice_mib(request, capacities) + np.zeros(len(capacities), dtype=np.int64)
        assert column.tolist() == [slice_mib(request, int(c)) for c in capacities]
        assert share_of(capacities, 37).tolist() == [share_of(int(c), 37) for c in capacities]
