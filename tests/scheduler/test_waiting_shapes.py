"""The shapes that waited, weighed by their GPU-seconds pending (placement/waiting.py)."""

from __future__ import annotations

from typing import Any

from vgpu.config import Config
from vgpu_scheduler.placement import shares
from vgpu_scheduler.placement.waiting import WaitingShapes


def pod(name: str, cores: int, count: int = 1, node: str | None = None) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(count), "nvidia.com/gpucores": str(cores)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": limits}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}


def shape_of(obj: dict[str, Any]) -> Any:
    from vgpu_scheduler.framework.podinfo import parse

    return shares.pod_shape(parse(obj, Config()), memory=True, models=True)


def test_pending_time_is_charged_to_the_shape_until_the_pod_is_bound_or_deleted() -> None:
    w = WaitingShapes(Config(), lambda info: shares.pod_shape(info, memory=True, models=True))
    half, eight = pod("h", 50), pod("e", 100, count=8)
    assert not w.on_pod(None, half, 0.0)
    assert not w.on_pod(None, eight, 0.0)
    assert w.pending == 2
    # Bound at once: no wait, nothing learned.
    assert not w.on_pod(half, pod("h", 50, node="n0"), 0.0)
    assert w.weights(10.0) == {shape_of(eight): 80.0}  # 8 GPUs x 10 s, still pending
    assert w.on_pod(eight, None, 20.0)  # deleted after 20 s pending
    assert w.pending == 0 and w.weights(99.0) == {shape_of(eight): 160.0}
    # The waiting shapes together weigh as much as the pods seen.
    assert w.extra(10, 99.0) == [shape_of(eight)] * 10
    assert w.extra(0, 99.0) == []


def test_pods_without_gpus_never_count() -> None:
    w = WaitingShapes(Config(), lambda info: shares.pod_shape(info, memory=True, models=True))
    cpu = {"metadata": {"name": "c", "uid": "c"}, "spec": {"containers": [{"name": "c"}]}}
    w.on_pod(None, cpu, 0.0)
    assert w.pending == 0 and w.extra(5, 50.0) == []
