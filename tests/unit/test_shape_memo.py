"""The container parse remembered by what it reads (issue 40): the same answers, and the
inputs it cannot key parsed afresh."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.requests import _parse_pod, parse_container, parse_gpu_pod, parse_pod
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


def _gpu(name: str, gpus: str = "1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": {"nvidia.com/gpu": gpus}}, **extra}


def _pod(apps: list[Any], init: list[Any] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": apps}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": spec}


@pytest.mark.parametrize("pod", [
    _pod([_gpu("main")]),
    _pod([_gpu("main", "2"), {"name": "side"}]),
    _pod([_gpu("main")], init=[_gpu("setup")]),
    _pod([_gpu("main")], init=[_gpu("proxy", restartPolicy="Always")]),
    _pod([_gpu("main")], annotations={"nvidia.com/use-gputype": "A100"}),
    _pod([_gpu("main")], annotations={"vgpu.io/gpu-policy": "spread"}),
    _pod([{"name": "main", "resources": {"limits": {"nvidia.com/gpu": True}}}]),
    _pod(["not a container"]),
])
def test_a_pod_reads_the_same_from_the_memo(pod: dict[str, Any]) -> None:
    config = Config()
    try:
        fresh: Any = _parse_pod(pod, pod["metadata"]["annotations"], config)
    except RequestError as exc:
        fresh = str(exc)
    for _ in range(2):
        try:
            got: Any = parse_pod(pod, config)
        except RequestError as exc:
            got = str(exc)
        assert got == fresh


def test_the_pod_memo_follows_what_the_parse_reads() -> None:
    config = Config()
    one, two = parse_pod(_pod([_gpu("main")]), config), parse_pod(_pod([_gpu("main", "2")]),
                                                                  config)
    assert (one.containers[0].count, two.containers[0].count) == (1, 2)
    # Another name, a sidecar instead of a plain init container, a placement annotation.
    assert parse_pod(_pod([_gpu("other")]), config).containers[0].name == "other"
    plain = parse_pod(_pod([_gpu("main")], init=[_gpu("s")]), config)
    sidecar = parse_pod(_pod([_gpu("main")], init=[_gpu("s", restartPolicy="Always")]), config)
    assert plain != sidecar
    chosen = parse_pod(_pod([_gpu("main")], annotations={"nvidia.com/use-gputype": "A100"}),
                       config)
    assert chosen.choices.selector.use_types == ("A100",)
    assert parse_pod(_pod([_gpu("main")]), config).choices.selector.use_types == ()


def test_duplicate_names_raise_every_time() -> None:
    config = Config()
    for _ in range(2):
        with pytest.raises(RequestError, match="unique"):
            parse_pod(_pod([_gpu("main"), _gpu("main")]), config)
