"""GPU placement on nodes whose links are known: the shipped topologies, the GPU policies,
``vgpu.io/gpu-topology: required``, NUMA binding and the type/UUID filters together."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu import builders
from vgpu.annotations import TOPOLOGY_REQUIRED, GpuSelector, PodChoices
from vgpu.devices import Device, Usage, fit_request
from vgpu.requests import ContainerRequest, PodRequest
from vgpu.topology import shapes
from vgpu.topology.links import GpuLink, Link, LinkMatrix, label, matrix
from vgpu_scheduler.placement import linked, policies
from vgpu_scheduler.placement import place as placement
from vgpu_scheduler.placement.place import GpuRanker

FREE = Usage()
SHARE = Usage(4096, 20, 1)     # a fractional pod on the GPU
FULL = Usage(40960, 100, 1)    # a whole-GPU pod


def node(shape: str, n: int) -> tuple[tuple[Device, ...], LinkMatrix]:
    gpus, links = builders.shaped_devices("n", n, shape, memory_mib=40960, split=4)
    return gpus, matrix([g.uuid for g in gpus], links)


def request(*counts: int, pct: int = 100, cores: int = 100, required: bool = False,
            selector: GpuSelector | None = None) -> PodRequest:
    containers = tuple(ContainerRequest(f"c{i}", n, None, pct, cores)
                       for i, n in enumerate(counts))
    choices = PodChoices(selector=selector or GpuSelector(),
                         topology=TOPOLOGY_REQUIRED if required else "preferred")
    return PodRequest(containers, choices)


def placed(shape: str, n: int, usages: dict[int, Usage], pod: PodRequest,
           policy: GpuRanker = policies.lowest_task_count, *,
           links: bool = True) -> list[list[int]] | tuple[str, ...]:
    devices, m = node(shape, n)
    work = [usages.get(i, FREE) for i in range(n)]
    result = placement.place(devices, work, pod, 1.0, policy, links=m if links else None)
    if isinstance(result, tuple):
        return result
    return [sorted(pos for pos, _, _ in gpus) for _, gpus in result.containers]


LTC, BINPACK, SPREAD = policies.lowest_task_count, policies.binpack, policies.spread


@pytest.mark.parametrize(("case", "expected"), [
    # NVSwitch: all pairs alike; the policy's GPUs.
    (("nvswitch", 8, {}, request(2), LTC), [[0, 1]]),
    (("nvswitch", 8, {0: SHARE}, request(4, pct=10, cores=10), BINPACK), [[0, 1, 2, 3]]),
    # PCIe over two sockets: a pair under one switch; four on one socket.
    (("pcie", 8, {}, request(2), SPREAD), [[0, 1]]),
    (("pcie", 8, {}, request(4), LTC), [[0, 1, 2, 3]]),
    # GPU 0 holds a share. lowest-task-count prefers idle GPUs: a whole switch pair on
    # the socket already used, so that the other socket's four stay together ...
    (("pcie", 8, {0: SHARE}, request(2, pct=10, cores=10), LTC), [[2, 3]]),
    # ... binpack prefers the busy GPU, and its switch partner joins it.
    (("pcie", 8, {0: SHARE}, request(2, pct=10, cores=10), BINPACK), [[0, 1]]),
    # A slower pair under the policy's first choice loses to a faster one.
    (("pcie", 8, {0: FULL, 2: FULL}, request(2), LTC), [[4, 5]]),
    # Two NVLink-bridged pairs: a two-GPU pod gets a bridge, two such pods one each.
    (("nvlink-pairs", 4, {}, request(2), SPREAD), [[0, 1]]),
    (("nvlink-pairs", 4, {}, request(2, 2), LTC), [[0, 1], [2, 3]]),
    (("nvlink-pairs", 4, {1: FULL}, request(2), LTC), [[2, 3]]),
    # One-GPU pods leave pairs whole: the half-used pair's free GPU first.
    (("nvlink-pairs", 4, {0: FULL}, request(1), LTC), [[1]]),
    # Mixed: NV12 pairs for two, the NVLinked half for four, PCIe GPUs for one.
    (("mixed", 8, {}, request(2), LTC), [[0, 1]]),
    (("mixed", 8, {}, request(4), BINPACK), [[0, 1, 2, 3]]),
    (("mixed", 8, {}, request(1), LTC), [[4]]),
    (("mixed", 8, {}, request(1, 1, 2), LTC), [[4], [5], [0, 1]]),
])
def test_shipped_topologies(
        case: tuple[str, int, dict[int, Usage], PodRequest, GpuRanker],
        expected: list[list[int]]) -> None:
    assert placed(*case) == expected


def test_without_links_the_policy_alone_decides() -> None:
    # Unknown topology: a one-GPU pod takes GPU 0 as it always did.
    assert placed("mixed", 8, {}, request(1), links=False) == [[0]]
    assert placed("pcie", 8, {0: FULL, 2: FULL}, request(2), links=False) == [[1, 3]]


def test_required_vs_preferred() -> None:
    broken = {0: FULL, 2: FULL}  # one GPU of each bridged pair is taken
    assert placed("nvlink-pairs", 4, broken, request(2)) == [[1, 3]]
    assert placed("nvlink-pairs", 4, broken, request(2, required=True)) == (
        linked.TOPOLOGY_SLOWER,)
    assert placed("nvlink-pairs", 4, {0: FULL}, request(2, required=True)) == [[2, 3]]
    # Links unknown: required cannot be promised; preferred places as before.
    assert placed("nvlink-pairs", 4, {}, request(2, required=True), links=False) == (
        linked.TOPOLOGY_UNKNOWN,)
    assert placed("nvlink-pairs", 4, {}, request(2), links=False) == [[0, 1]]
    # One vGPU has no link to require; all-alike links are always the fastest.
    assert placed("nvlink-pairs", 4, broken, request(1, required=True)) == [[1]]
    assert placed("nvswitch", 8, {0: FULL, 3: FULL}, request(4, required=True)) == [
        [1, 2, 4, 5]]


def test_numa_binding_with_topology() -> None:
    bind = GpuSelector(numa_bind=True)
    # Four on one NUMA node, and the fastest four: the NVLinked socket.
    assert placed("mixed", 8, {}, request(4, selector=bind)) == [[0, 1, 2, 3]]
    # GPU 0 taken: socket 0 has three; socket 1 the four, PCIe only.
    assert placed("mixed", 8, {0: FULL}, request(4, selector=bind)) == [[4, 5, 6, 7]]
    # Required: the node's fastest four on one NUMA node are NVLinked; not there now.
    assert placed("mixed", 8, {0: FULL}, request(4, selector=bind, required=True)) == (
        linked.TOPOLOGY_SLOWER,)
    # Without NUMA binding two of a socket can pair with two of the other.
    assert placed("pcie", 8, {0: FULL, 2: FULL, 4: FULL, 6: FULL}, request(4)) == [
        [1, 3, 5, 7]]
    assert placed("pcie", 8, {0: FULL, 2: FULL, 4: FULL, 6: FULL},
                  request(4, selector=bind)) == (placement.NUMA_SPLIT,)


def test_type_and_uuid_filters_bound_what_required_means() -> None:
    # The pod may use only GPUs 1 and 2, linked over SYS: the fastest it can ever get.
    only = GpuSelector(use_uuids=("GPU-n-1", "GPU-n-2"))
    assert placed("nvlink-pairs", 4, {}, request(2, selector=only, required=True)) == [[1, 2]]
    # Excluding GPU 0 leaves one bridge: required gets it, then nothing for a second pod.
    not0 = GpuSelector(nouse_uuids=("GPU-n-0",))
    assert placed("nvlink-pairs", 4, {}, request(2, selector=not0, required=True)) == [[2, 3]]
    assert placed("nvlink-pairs", 4, {3: FULL}, request(2, selector=not0, required=True)) == (
        linked.TOPOLOGY_SLOWER,)


def test_fits_empty_knows_required_cannot_be_met_without_links() -> None:
    devices, m = node("nvlink-pairs", 4)
    assert placement.fits_empty(devices, request(2, required=True), 1.0, links=m)
    assert not placement.fits_empty(devices, request(2, required=True), 1.0)


# --- properties -----------------------------------------------------------------------------

USAGES = st.sampled_from((FREE, FREE, SHARE, FULL, Usage(30000, 50, 2)))


@st.composite
def cases(draw: st.DrawFn) -> tuple[tuple[Device, ...], LinkMatrix, list[Usage], PodRequest,
                                    GpuRanker]:
    n = draw(st.integers(2, 8))
    if draw(st.booleans()):
        devices, m = node(draw(st.sampled_from(sorted(shapes.SHAPES))), n)
    else:
        devices = builders.devices("n", n, memory_mib=40960, split=4,
                                   numa=[draw(st.integers(0, 1)) for _ in range(n)])
        m = matrix([d.uuid for d in devices], [
            GpuLink(devices[a].uuid, devices[b].uuid,
                    Link(draw(st.sampled_from(("system", "socket", "switch"))),
                         draw(st.sampled_from((0, 0, 4, 12))), 3))
            for a in range(n) for b in range(a + 1, n)])
    usages = [draw(USAGES) for _ in range(n)]
    count = draw(st.integers(2, n))
    pct, cores = draw(st.sampled_from(((100, 100), (25, 20), (10, 0))))
    selector = GpuSelector(numa_bind=draw(st.booleans()))
    pod = request(count, pct=pct, cores=cores, required=draw(st.booleans()),
                  selector=selector)
    policy = draw(st.sampled_from((LTC, BINPACK, SPREAD)))
    return devices, m, usages, pod, policy


def fitting_sets(devices: Sequence[Device], usages: Sequence[Usage], pod: PodRequest,
                 m: LinkMatrix) -> list[int]:
    """The slowest-pair rank of every set of GPUs the pod's container fits on now."""
    container = pod.containers[0]
    fits = [p for p in range(len(devices))
            if fit_request(devices[p], usages[p], container, pod.choices.selector, 1.0) is None]
    out = []
    for s in itertools.combinations(fits, container.count):
        if pod.choices.selector.numa_bind and len({devices[p].numa for p in s}) > 1:
            continue
        out.append(m.worst(list(s)))
    return out


@settings(max_examples=300, deadline=None)
@given(cases())
def test_never_a_set_slower_than_one_that_fits(
        case: tuple[tuple[Device, ...], LinkMatrix, list[Usage], PodRequest, GpuRanker]) -> None:
    devices, m, usages, pod, policy = case
    result = placement.place(devices, usages, pod, 1.0, policy, links=m)
    options = fitting_sets(devices, usages, pod, m)
    if isinstance(result, tuple):
        if not options:
            return
        # It fits somewhere, so only "required" may refuse, and only when every fitting
        # set is slower than the node's fastest.
        assert result == (linked.TOPOLOGY_SLOWER,)
        fastest = linked.fastest_possible(devices, pod.containers[0], pod.choices.selector,
                                          1.0, m)
        assert fastest is not None and max(options) < fastest
        return
    ((_, gpus),) = result.containers
    worst = m.worst([pos for pos, _, _ in gpus])
    assert worst == max(options)
    if pod.choices.topology_required:
        assert worst == linked.fastest_possible(devices, pod.containers[0],
                                                pod.choices.selector, 1.0, m)


def test_labels_of_the_cases_above_are_what_the_comments_say() -> None:
    _, m = node("nvlink-pairs", 4)
    assert label(m.links[1][3]) == "SYS" and label(m.links[0][1]) == "NV12"
