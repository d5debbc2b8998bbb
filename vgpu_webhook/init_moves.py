"""The GPU resources a GPU init container may not carry on its spec
(docs/contracts.md#init-resources-record).

Kubelets before 1.31 count an init container's requests for extended resources the node
does not advertise and fail the pod (``OutOfnvidia.com/gpumem``); of the five vGPU
resources a node advertises only the count. So the webhook keeps the count on the init
container and moves the others into ``vgpu.io/init-resources``
(:mod:`vgpu.init_resources`), from which every reader of the request adds them back.
"""

from __future__ import annotations

from vgpu.config import Config


def move_off(limits: dict[str, object], requests: dict[str, object],
             config: Config) -> dict[str, str]:
    """Take the unadvertised vGPU resources out of an init container's ``limits`` and
    ``requests`` (as the patch will write them) and return them, limits first."""
    names = config.resource_names
    moved: dict[str, str] = {}
    for name in (names.gpumem, names.gpumem_percentage, names.gpucores, names.priority):
        for section in (limits, requests):
            if name in section:
                value = section.pop(name)
                moved.setdefault(name, str(value))
    return moved
