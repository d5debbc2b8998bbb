from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu import builders
from vgpu.annotations import PodChoices
from vgpu.devices import Usage
from vgpu.requests import ContainerRequest, PodRequest
from vgpu.topology import shapes
from vgpu.topology.links import matrix
from vgpu_nodeagent.allocation.preferred import Links, choose
from vgpu_nodeagent.devices.virtual import physical_uuid
from vgpu_scheduler.placement import policies
from vgpu_scheduler.placement.place import place

GPUS = ("GPU-a", "GPU-b", "GPU-c")


def ids(*names: str) -> list[str]:
    return list(names)


ALL = [f"{g}-{i}" for g in GPUS for i in range(3)]


def gpu_of(device_id: str) -> str | None:
    return physical_uuid(device_id, GPUS)


@pytest.mark.parametrize(("available", "must", "size", "wanted", "expected"), [
    (ALL, [], 1, ["GPU-b"], ["GPU-b-0"]),
    (ALL, [], 2, ["GPU-c", "GPU-a"], ["GPU-c-0", "GPU-a-0"]),
    # The wanted GPU's first slot is taken: any free slot on it will do.
    (ALL[1:], [], 1, ["GPU-a"], ["GPU-a-1"]),
    # must_include counts towards the size and covers its GPU.
    (ALL, ["GPU-a-2"], 2, ["GPU-a", "GPU-b"], ["GPU-a-2", "GPU-b-0"]),
    # No assignment known: spread over distinct GPUs.
    (ALL, [], 3, [], ["GPU-a-0", "GPU-b-0", "GPU-c-0"]),
    # The wanted GPU has no free slot: fall back to another GPU.
    ([i for i in ALL if not i.startswith("GPU-b")], [], 1, ["GPU-b"], ["GPU-a-0"]),
    # More than there are GPUs: slots repeat GPUs only when they must.
    (["GPU-a-0", "GPU-a-1", "GPU-b-0"], [], 3, [], ["GPU-a-0", "GPU-b-0", "GPU-a-1"]),
    # IDs that are not ours are still acceptable as filler.
    (["x-1", "GPU-a-0"], [], 2, ["GPU-a"], ["GPU-a-0", "x-1"]),
])
def test_choose(available: list[str], must: list[str], size: int, wanted: list[str],
                expected: list[str]) -> None:
    assert choose(available, must, size, wanted, gpu_of) == expected


@given(
    available=st.lists(st.sampled_from(ALL), unique=True),
    must_count=st.integers(0, 3),
    size=st.integers(0, 9),
    wanted=st.lists(st.sampled_from(GPUS), unique=True),
)
def test_answer_is_valid(available: list[str], must_count: int, size: int,
                         wanted: list[str]) -> None:
    must = available[:min(must_count, size)]
    chosen = choose(available, must, size, wanted, gpu_of)
    assert len(chosen) == min(size, len(available))
    assert len(set(chosen)) == len(chosen)
    assert set(must) <= set(chosen)
    assert set(chosen) <= set(available)
    # Beyond must_include, a second slot on a GPU only when every GPU with a free slot is
    # already in the answer.
    seen = {gpu_of(i) for i in must}
    for device_id in chosen[len(must):]:
        if gpu_of(device_id) in seen:
            assert {gpu_of(i) for i in available} <= {gpu_of(i) for i in chosen}
        seen.add(gpu_of(device_id))


# --- with the node's links, and no assignment to steer by ------------------------------------

def linked(shape: str, n: int, split: int = 2) -> tuple[Links, list[str]]:
    gpus, links = builders.shaped_devices("n", n, shape, split=split)
    uuids = tuple(g.uuid for g in gpus)
    every = [f"{u}-{s}" for u in uuids for s in range(split)]
    return Links(uuids, matrix(uuids, links), split), every


def gpus_of(ids: list[str], links: Links) -> list[int]:
    return sorted({links.uuids.index(i.rpartition("-")[0]) for i in ids})


@pytest.mark.parametrize(("shape", "n", "size", "must", "expected"), [
    ("mixed", 8, 2, [], [0, 1]),
    ("mixed", 8, 4, [], [0, 1, 2, 3]),
    ("mixed", 8, 1, [], [4]),  # a PCIe GPU, leaving the NVLinked ones whole
    ("mixed", 8, 2, ["GPU-n-2-1"], [2, 3]),  # must-include GPU 2: its NV12 partner
    ("nvlink-pairs", 4, 2, ["GPU-n-1-0"], [0, 1]),
    ("pcie", 8, 3, [], [0, 1, 2]),
])
def test_the_fastest_gpus_when_no_assignment_steers(shape: str, n: int, size: int,
                                                   must: list[str], expected: list[int]) -> None:
    links, every = linked(shape, n)
    chosen = choose(every, must, size, [], lambda i: physical_uuid(i, links.uuids), links=links)
    assert gpus_of(chosen, links) == expected
    assert len(chosen) == size and set(must) <= set(chosen)


def test_a_gpu_with_a_slot_taken_is_not_idle() -> None:
    links, every = linked("nvlink-pairs", 4)
    # GPU 0 runs something (one of its two slots is taken): a one-GPU request goes to its
    # partner, leaving the idle pair 2-3 whole.
    available = [i for i in every if i != "GPU-n-0-0"]
    chosen = choose(available, [], 1, [], lambda i: physical_uuid(i, links.uuids), links=links)
    assert gpus_of(chosen, links) == [0]  # fewest-index among the half-used pair's GPUs...
    # ... and with GPU 0 full, its partner GPU 1.
    available = [i for i in every if not i.startswith("GPU-n-0-")]
    chosen = choose(available, [], 1, [], lambda i: physical_uuid(i, links.uuids), links=links)
    assert gpus_of(chosen, links) == [1]


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
@pytest.mark.parametrize("n", [2, 4, 8])
def test_the_kubelet_and_the_scheduler_agree_on_idle_gpus(shape: str, n: int) -> None:
    """On an idle node the scheduler's set (any built-in GPU policy: idle GPUs look alike)
    is the set GetPreferredAllocation prefers without an assignment."""
    links, every = linked(shape, n)
    gpus, _ = builders.shaped_devices("n", n, shape, split=2)
    for size in range(1, n + 1):
        request = PodRequest((ContainerRequest("c", size, None, 100, 100),), PodChoices())
        for policy in (policies.lowest_task_count, policies.binpack, policies.spread):
            result = place(gpus, [Usage()] * n, request, 1.0, policy, links=links.matrix)
            assert not isinstance(result, tuple)
            scheduler = sorted(pos for pos, _, _ in result.containers[0][1])
            kubelet = choose(every, [], size, [], lambda i: physical_uuid(i, links.uuids),
                             links=links)
            assert gpus_of(kubelet, links) == scheduler, (shape, n, size, policy)
