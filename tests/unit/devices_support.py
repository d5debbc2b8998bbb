"""GPUs and requests shared by the device-model tests.

``test_devices`` (fit decisions) and ``test_device_memory`` (memory arithmetic) both work
on these three devices and ask with ``req``; ``SCALINGS`` feeds both modules' properties.
"""

from __future__ import annotations

from hypothesis import strategies as st

from vgpu.devices import Device
from vgpu.requests import ContainerRequest

A100 = Device(uuid="GPU-a100", index=0, model="NVIDIA A100-SXM4-40GB", memory_mib=40960)
T4 = Device(uuid="GPU-t4", index=1, model="Tesla T4", memory_mib=15360, split=4)
SICK = Device(uuid="GPU-sick", index=2, model="Tesla T4", memory_mib=15360, healthy=False)


def req(count: int = 1, *, mib: int | None = None, pct: int | None = None,
        cores: int = 0, name: str = "main") -> ContainerRequest:
    return ContainerRequest(name=name, count=count, memory_mib=mib, memory_percent=pct,
                            cores=cores)


SCALINGS = st.sampled_from([0.5, 1.0, 1.1, 1.15, 1.5, 2.0, 2.05, 3.0]) | st.floats(
    min_value=0.01, max_value=100, allow_nan=False, allow_infinity=False)
