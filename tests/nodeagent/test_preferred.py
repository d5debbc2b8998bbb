from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu_nodeagent.allocation.preferred import choose
from vgpu_nodeagent.devices.virtual import physical_uuid

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
