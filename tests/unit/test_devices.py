"""The device model: whether a slice fits a GPU, and why not.

The fit arithmetic every placement decision rests on: ``fit``, ``fit_request``,
``selectable``, ``takes_tasks`` and ``check_possible``, with the property that accepted
slices never exceed a GPU. How much memory a request means on a GPU is in
``test_device_memory``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.devices_support import A100, SCALINGS, SICK, T4, req
from vgpu.annotations import GpuSelector
from vgpu.devices import (
    EMPTY,
    Device,
    FitReason,
    Usage,
    check_possible,
    fit,
    fit_request,
    memory_capacity,
    selectable,
    takes_tasks,
)
from vgpu.errors import RequestError
from vgpu.requests import ContainerRequest

FIT: list[tuple[str, Device, Usage, int, int, float, FitReason | None]] = [
    ("idle-small-slice", A100, EMPTY, 1000, 10, 1.0, None),
    ("whole-memory-exactly", A100, EMPTY, 40960, 0, 1.0, None),
    ("memory-one-over", A100, EMPTY, 40961, 0, 1.0, FitReason.MEMORY),
    ("memory-with-usage", A100, Usage(40000, 10, 1), 961, 0, 1.0, FitReason.MEMORY),
    ("memory-with-usage-exact", A100, Usage(40000, 10, 1), 960, 0, 1.0, None),
    ("scaling-oversubscribes", A100, Usage(40960, 0, 1), 40960, 0, 2.0, None),
    ("scaling-still-bounded", A100, Usage(40960, 0, 1), 40961, 0, 2.0, FitReason.MEMORY),
    ("scaling-below-one", A100, EMPTY, 20481, 0, 0.5, FitReason.MEMORY),
    ("unhealthy", SICK, EMPTY, 1, 0, 1.0, FitReason.UNHEALTHY),
    ("unhealthy-wins-over-everything", SICK, Usage(15360, 100, 4), 99999, 100, 1.0,
     FitReason.UNHEALTHY),
    ("no-slots", T4, Usage(100, 10, 4), 1, 0, 1.0, FitReason.NO_SLOTS),
    ("last-slot", T4, Usage(100, 10, 3), 1, 0, 1.0, None),
    ("slots-before-memory", T4, Usage(15360, 10, 4), 99999, 0, 1.0, FitReason.NO_SLOTS),
    ("exclusive-on-idle", A100, EMPTY, 40960, 100, 1.0, None),
    ("exclusive-on-busy", A100, Usage(100, 0, 1), 100, 100, 1.0, FitReason.EXCLUSIVE),
    ("exclusive-on-busy-zero-core-task", A100, Usage(0, 0, 1), 0, 100, 1.0,
     FitReason.EXCLUSIVE),
    ("fully-claimed-by-exclusive", A100, Usage(100, 100, 1), 100, 0, 1.0,
     FitReason.FULLY_CLAIMED),
    ("fully-claimed-by-shares", A100, Usage(200, 100, 2), 100, 0, 1.0,
     FitReason.FULLY_CLAIMED),
    ("cores-over", A100, Usage(100, 70, 1), 100, 40, 1.0, FitReason.CORES),
    ("cores-exactly-full", A100, Usage(100, 70, 1), 100, 30, 1.0, None),
    ("zero-cores-shares-time", A100, Usage(100, 50, 1), 100, 0, 1.0, None),
    ("small-device-cores", Device("GPU-x", 0, "m", 1000, cores=50), Usage(0, 20, 1), 1, 40,
     1.0, FitReason.CORES),
    # The node's hami.io/device-cordon: no new slice, after health.
    ("cordoned", Device("GPU-c", 0, "m", 1000, cordoned=True), EMPTY, 1, 0, 1.0,
     FitReason.CORDONED),
    ("unhealthy-before-cordoned", Device("GPU-c", 0, "m", 1000, healthy=False, cordoned=True),
     EMPTY, 1, 0, 1.0, FitReason.UNHEALTHY),
]


@pytest.mark.parametrize("case", FIT, ids=[f[0] for f in FIT])
def test_fit(case: tuple[str, Device, Usage, int, int, float, FitReason | None]) -> None:
    _, device, usage, memory, cores, scaling, expected = case
    assert fit(device, usage, memory, cores, scaling) is expected


def test_every_fit_reason_is_covered() -> None:
    reasons = {f[-1] for f in FIT} | {r[-1] for r in FIT_REQUEST}
    assert reasons - {None} == set(FitReason)


FIT_REQUEST: list[tuple[str, ContainerRequest, GpuSelector, Usage, FitReason | None]] = [
    ("percentage-resolved-on-device", req(pct=50), GpuSelector(), Usage(20480, 0, 1), None),
    ("percentage-too-much", req(pct=51), GpuSelector(), Usage(20480, 0, 1), FitReason.MEMORY),
    ("type-excluded", req(mib=1), GpuSelector(use_types=("H100",)), EMPTY,
     FitReason.TYPE_EXCLUDED),
    ("nouse-type", req(mib=1), GpuSelector(nouse_types=("a100",)), EMPTY,
     FitReason.TYPE_EXCLUDED),
    ("uuid-excluded", req(mib=1), GpuSelector(use_uuids=("GPU-other",)), EMPTY,
     FitReason.UUID_EXCLUDED),
    ("selection-before-usage", req(mib=99999), GpuSelector(nouse_uuids=("GPU-a100",)),
     Usage(40960, 100, 10), FitReason.UUID_EXCLUDED),
    ("allowed-type", req(mib=1, cores=100), GpuSelector(use_types=("A100",)), EMPTY, None),
    # HAMi's mutex policy: only a GPU with no task on it.
    ("mutex-idle", req(mib=1), GpuSelector(idle_only=True), EMPTY, None),
    ("mutex-busy", req(mib=1), GpuSelector(idle_only=True), Usage(10, 0, 1), FitReason.BUSY),
    # nvidia.com/vgpu-mode: the value must contain the GPU's mode (an unknown one here).
    ("mode-excluded", req(mib=1), GpuSelector(mode="hami-core"), EMPTY,
     FitReason.MODE_EXCLUDED),
    # HAMi's type names: "NVIDIA-" + a driver name without it, matched case-insensitively.
    ("nvidia-prefix-matches-every-gpu", req(mib=1), GpuSelector(use_types=("nvidia",)), EMPTY,
     None),
]


@pytest.mark.parametrize(("request_", "selector", "usage", "expected"),
                         [f[1:] for f in FIT_REQUEST], ids=[f[0] for f in FIT_REQUEST])


def test_fit_request(request_: ContainerRequest, selector: GpuSelector, usage: Usage,
                     expected: FitReason | None) -> None:
    assert fit_request(A100, usage, request_, selector, 1.0) is expected


MODES: list[tuple[str, str, str, FitReason | None]] = [
    # (pod's nvidia.com/vgpu-mode, the GPU's mode): HAMi's test is "contains".
    ("same", "mps", "mps", None),
    ("one-of-two", "hami-core,mps", "mps", None),
    ("other", "hami-core", "mps", FitReason.MODE_EXCLUDED),
    ("mig-only", "mig", "hami-core", FitReason.MODE_EXCLUDED),
    ("none-is-vgpus-own", "none", "none", None),
    ("empty-value-matches-nothing", "", "mps", FitReason.MODE_EXCLUDED),
]


@pytest.mark.parametrize(("wanted", "mode", "expected"), [m[1:] for m in MODES],
                         ids=[m[0] for m in MODES])
def test_vgpu_mode(wanted: str, mode: str, expected: FitReason | None) -> None:
    device = Device("GPU-m", 0, "NVIDIA A100", 40960, isolation=mode)
    assert selectable(device, GpuSelector(mode=wanted)) is expected


TYPE_NAMES: list[tuple[str, str, GpuSelector, FitReason | None]] = [
    # HAMi names a GPU "NVIDIA-" + the driver's name when it lacks the prefix.
    ("nvidia-finds-tesla", "Tesla T4", GpuSelector(use_types=("NVIDIA",)), None),
    ("nouse-prefixed-tesla", "Tesla V100-SXM2-16GB",
     GpuSelector(nouse_types=("NVIDIA-Tesla",)), FitReason.TYPE_EXCLUDED),
    ("bare-name-still-matches", "Tesla T4", GpuSelector(use_types=("t4",)), None),
    ("prefixed-name-unchanged", "NVIDIA A100-SXM4-40GB",
     GpuSelector(use_types=("NVIDIA-A100",)), FitReason.TYPE_EXCLUDED),
]


@pytest.mark.parametrize(("model", "selector", "expected"), [t[1:] for t in TYPE_NAMES],
                         ids=[t[0] for t in TYPE_NAMES])
def test_hami_type_names(model: str, selector: GpuSelector, expected: FitReason | None) -> None:
    assert selectable(Device("GPU-t", 0, model, 16384), selector) is expected


SELECTABLE: list[tuple[str, GpuSelector, FitReason | None]] = [
    ("unrestricted", GpuSelector(), None),
    ("use-type-case-insensitive", GpuSelector(use_types=("a100",)), None),
    ("use-type-one-of", GpuSelector(use_types=("V100", "sxm4")), None),
    ("use-type-miss", GpuSelector(use_types=("V100",)), FitReason.TYPE_EXCLUDED),
    ("nouse-type-hit", GpuSelector(nouse_types=("40gb",)), FitReason.TYPE_EXCLUDED),
    ("nouse-type-miss", GpuSelector(nouse_types=("80GB",)), None),
    ("use-uuid-hit", GpuSelector(use_uuids=("GPU-a100",)), None),
    ("use-uuid-prefix-is-no-match", GpuSelector(use_uuids=("GPU-a",)), FitReason.UUID_EXCLUDED),
    ("nouse-uuid-hit", GpuSelector(nouse_uuids=("GPU-a100",)), FitReason.UUID_EXCLUDED),
    ("type-checked-before-uuid", GpuSelector(use_types=("T4",), nouse_uuids=("GPU-a100",)),
     FitReason.TYPE_EXCLUDED),
]


@pytest.mark.parametrize(("selector", "expected"), [s[1:] for s in SELECTABLE],
                         ids=[s[0] for s in SELECTABLE])


def test_selectable(selector: GpuSelector, expected: FitReason | None) -> None:
    assert selectable(A100, selector) is expected


def test_usage_add_and_remove() -> None:
    used = EMPTY.add(1000, 30).add(500, 20)
    assert used == Usage(1500, 50, 2)
    assert used.remove(1000, 30) == Usage(500, 20, 1)
    # Removing more than is there (a stale release) clamps at zero, never negative.
    assert Usage(10, 5, 1).remove(100, 50).remove(1, 1) == EMPTY


# --- check_possible ------------------------------------------------------------------------

def _check(request_: ContainerRequest, devices: list[Device], max_gpus: int,
           scaling: float = 1.0) -> None:
    check_possible(request_, devices, max_gpus_per_node=max_gpus, scaling=scaling,
                   gpu_name="nvidia.com/gpu", mem_name="nvidia.com/gpumem")


def test_check_possible_accepts_what_fits() -> None:
    _check(req(2, mib=40960), [A100, T4], 2)
    _check(req(1, pct=100), [T4], 1)
    _check(req(8, mib=10**6), [], 0)  # no inventory known: anything might fit


def test_check_possible_rejects_too_many_gpus() -> None:
    with pytest.raises(RequestError) as caught:
        _check(req(3, mib=1, name="trainer"), [A100, T4], 2)
    message = str(caught.value)
    for fragment in ("'trainer'", "3 GPUs", "nvidia.com/gpu", "more than 2"):
        assert fragment in message


def test_check_possible_rejects_too_much_memory() -> None:
    with pytest.raises(RequestError) as caught:
        _check(req(1, mib=40961, name="trainer"), [A100, T4], 2)
    message = str(caught.value)
    for fragment in ("'trainer'", "40961 MiB", "nvidia.com/gpumem", "40960 MiB"):
        assert fragment in message


def test_check_possible_counts_memory_scaling() -> None:
    _check(req(1, mib=81920), [A100], 1, scaling=2.0)
    with pytest.raises(RequestError):
        _check(req(1, mib=81921), [A100], 1, scaling=2.0)


@st.composite
def device_and_slices(draw: st.DrawFn) -> tuple[Device, float, list[tuple[int, int]]]:
    device = Device(
        uuid="GPU-p", index=0, model="m",
        memory_mib=draw(st.integers(1, 100_000)),
        cores=draw(st.sampled_from([100, 100, 50])),
        split=draw(st.integers(1, 16)),
    )
    scaling = draw(SCALINGS)
    cap = max(1, memory_capacity(device, scaling))
    memory = st.integers(0, cap) | st.integers(0, cap // 4) | st.just(cap)
    slices = draw(st.lists(st.tuples(memory, st.sampled_from([0, 100]) | st.integers(0, 100)),
                           max_size=30))
    return device, scaling, slices


@settings(max_examples=100, deadline=None)
@given(device_and_slices())
def test_accepted_slices_never_exceed_capacity(
        case: tuple[Device, float, list[tuple[int, int]]]) -> None:
    device, scaling, slices = case
    usage = EMPTY
    exclusive = False
    for memory, cores in slices:
        if fit(device, usage, memory, cores, scaling) is not None:
            continue
        assert not exclusive, "nothing joins a GPU taken exclusively"
        usage = usage.add(memory, cores)
        assert usage.memory_mib <= device.memory_mib * scaling + 1e-6
        assert usage.memory_mib <= memory_capacity(device, scaling)
        assert usage.cores <= device.cores
        assert usage.tasks <= device.split
        if cores >= device.cores:
            assert usage.tasks == 1, "an exclusive slice needs an idle GPU"
            exclusive = True


@pytest.mark.parametrize(("device", "usage", "expected"), [
    (A100, EMPTY, True),
    (A100, Usage(1000, 60, 3), True),
    (SICK, EMPTY, False),
    (T4, Usage(100, 40, 4), False),  # every split slot taken
    (A100, Usage(1000, 100, 1), False),  # compute fully claimed
    (A100, Usage(0, 0, 9), True),  # zero-core tasks leave compute free
])


def test_takes_tasks(device: Device, usage: Usage, expected: bool) -> None:
    assert takes_tasks(device, usage) is expected


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(0, 100), st.integers(0, 100), st.integers(0, 50000))
def test_takes_tasks_is_fits_usage_only_part(tasks: int, used: int, cores: int,
                                             memory: int) -> None:
    usage = Usage(0, used, tasks)
    if not takes_tasks(T4, usage):
        assert fit(T4, usage, memory, cores, 1.0) is not None
