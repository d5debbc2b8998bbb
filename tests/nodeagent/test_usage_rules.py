"""The watchdog's breach rules, table-driven."""

from __future__ import annotations

import pytest

from vgpu_nodeagent.devices.discovery import GpuProcess
from vgpu_nodeagent.isolation.usage_rules import Foreign, Owner, Use, tally

MAIN = Owner("default/p", "main", {"GPU-a": 4096, "GPU-b": 1024})
SIDE = Owner("default/p", "side", {"GPU-a": 1024})
PLAIN = Owner("default/cuda-job", "app")  # a pod the vgpu scheduler did not place


@pytest.mark.parametrize(("processes", "owners", "slack", "breaches", "foreign"), [
    # within the grant
    ({"GPU-a": (GpuProcess(1, 3000),)}, {1: MAIN}, 0, [], []),
    # exactly at the grant is not a breach
    ({"GPU-a": (GpuProcess(1, 4096),)}, {1: MAIN}, 0, [], []),
    # one MiB over is
    ({"GPU-a": (GpuProcess(1, 4097),)}, {1: MAIN}, 0,
     [Use("default/p", "main", "GPU-a", 4097, 4096)], []),
    # slack forgives the CUDA context's own memory
    ({"GPU-a": (GpuProcess(1, 4400),)}, {1: MAIN}, 512, [], []),
    # two processes of one container add up
    ({"GPU-a": (GpuProcess(1, 3000), GpuProcess(2, 2000))}, {1: MAIN, 2: MAIN}, 0,
     [Use("default/p", "main", "GPU-a", 5000, 4096)], []),
    # each GPU is judged on its own grant
    ({"GPU-a": (GpuProcess(1, 100),), "GPU-b": (GpuProcess(1, 2048),)}, {1: MAIN}, 0,
     [Use("default/p", "main", "GPU-b", 2048, 1024)], []),
    # containers of one pod are judged apart
    ({"GPU-a": (GpuProcess(1, 4000), GpuProcess(2, 2000))}, {1: MAIN, 2: SIDE}, 0,
     [Use("default/p", "side", "GPU-a", 2000, 1024)], []),
    # outside Kubernetes
    ({"GPU-a": (GpuProcess(9, 512),)}, {9: None}, 0, [], [Foreign("GPU-a", 9, 512, None)]),
    # a pod without a vgpu grant, and an unknown used figure
    ({"GPU-b": (GpuProcess(5, None),)}, {5: PLAIN}, 0, [],
     [Foreign("GPU-b", 5, 0, "default/cuda-job/app")]),
    # a vgpu container on a GPU it was not assigned
    ({"GPU-c": (GpuProcess(1, 10),)}, {1: MAIN}, 0, [],
     [Foreign("GPU-c", 1, 10, "default/p/main")]),
])
def test_breaches_and_foreign(processes: dict[str, tuple[GpuProcess, ...]],
                              owners: dict[int, Owner | None], slack: int,
                              breaches: list[Use], foreign: list[Foreign]) -> None:
    result = tally(processes, owners, slack)
    assert list(result.breaches) == breaches
    assert list(result.foreign) == foreign


def test_uses_list_every_container_on_every_gpu() -> None:
    result = tally({"GPU-a": (GpuProcess(1, 10), GpuProcess(2, 20))}, {1: MAIN, 2: SIDE})
    assert result.uses == (Use("default/p", "main", "GPU-a", 10, 4096),
                           Use("default/p", "side", "GPU-a", 20, 1024))
