"""The container parse remembered by what it reads (issue 40): the same answers, and the
inputs it cannot key parsed afresh."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.requests import parse_container, parse_gpu_pod
from vgpu.shape_memo import Memo, resources_key


@pytest.mark.parametrize(("container", "key"), [
    ({"name": "a"}, ()),
    ({"name": "a", "resources": {}}, (None, None)),
    ({"resources": {"limits": {"nvidia.com/gpu": 1}}}, ((("nvidia.com/gpu", 1),), None)),
    ({"resources": {"limits": {"x": "1"}, "requests": {"cpu": 0.5}}},
     ((("x", "1"),), (("cpu", 0.5),))),
    ({"resources": []}, "none"),
    ({"resources": {"limits": []}}, "none"),
    ({"resources": {"limits": {"x": True}}}, "none"),
    ({"resources": {"limits": {"x": ["1"]}}}, "none"),
    ({"resources": {"limits": {"x": None}}}, "none"),
])
def test_resources_key(container: dict[str, Any], key: Any) -> None:
    assert resources_key(container) == (None if key == "none" else key)


def test_the_memo_is_bounded_and_keeps_nothing_that_raised() -> None:
    memo: Memo[int] = Memo(limit=2)
    calls: list[str] = []

    def make(value: int) -> Any:
        return lambda: calls.append(str(value)) or value

    assert memo.through("a", make(1)) == 1
    assert memo.through("a", make(2)) == 1
    memo.through("b", make(3))
    assert memo.through("c", make(4)) == 4  # full: started again
    assert memo.through("a", make(5)) == 5
    with pytest.raises(ValueError):
        memo.through("d", lambda: int("x"))
    assert memo.through("d", make(6)) == 6
    assert calls == ["1", "3", "4", "5", "6"]


GPU = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def test_each_config_gets_its_own_defaults() -> None:
    assert parse_container(GPU, Config()) == parse_container(GPU, Config())
    a = parse_container(GPU, Config(default_mem=1000))
    b = parse_container(GPU, Config(default_mem=2000))
    assert a is not None and b is not None
    assert (a.memory_mib, b.memory_mib) == (1000, 2000)
    assert parse_container(GPU, Config(), init=True) != parse_container(GPU, Config())


def test_the_notes_come_back_with_a_remembered_answer() -> None:
    config = Config()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "resources": {
        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}}}]}}
    first, second = parse_gpu_pod(pod, config), parse_gpu_pod(pod, config)
    assert first is not None and second is not None
    assert first.request.notes and first.request.notes == second.request.notes


def test_a_bad_value_is_refused_every_time() -> None:
    bad = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "-1"}}}
    for _ in range(2):
        with pytest.raises(RequestError, match="must not be negative"):
            parse_container(bad, Config())
