"""HAMi's reading of a container's resources (pkg/device/nvidia/device_test.go:
Test_MutateAdmission, Test_MutateAdmission_MemoryPercentageValidation,
TestMutateAdmissionDefaultsExclusiveCore, TestGenerateResourceRequests and its
MemoryFactor / DefaultMemory cases), through vgpu's parser. An outcome is
``(count, MiB, percent, cores)`` as HAMi's ContainerDeviceRequest gives them (percent None
where HAMi's sentinel 101 says "a MiB size"), ``"no GPU"`` or ``"refused"``."""

from __future__ import annotations

from typing import Any

from tests.hami.rows import Row
from vgpu.config import Config
from vgpu.errors import VgpuError
from vgpu.requests import parse_container

DEV = "pkg/device/nvidia/device_test.go"
G, MEM, PCT, CORES = ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
                      "nvidia.com/gpucores")


def read(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None,
         config: Config | None = None) -> Any:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    try:
        got = parse_container({"name": "c", "resources": resources}, config or Config())
    except VgpuError:
        return "refused"
    if got is None:
        return "no GPU"
    return (got.count, got.memory_mib or 0, got.memory_percent, got.cores)


def admitted(limits: dict[str, Any]) -> bool:
    """Test_MutateAdmission's verdict: the container asks for a GPU."""
    return read(limits) not in ("no GPU", "refused")


def cores_written(limits: dict[str, Any] | None = None,
                  requests: dict[str, Any] | None = None) -> int:
    """The gpucores the webhook ends with: HAMi writes 100 on a whole-GPU request."""
    got = read(limits, requests)
    assert isinstance(got, tuple)
    return int(got[3])


_CLAMPED = ("HAMi's scheduler clamps what its own webhook refuses "
            "(Test_MutateAdmission_MemoryPercentageValidation); vgpu refuses it at admission "
            "as HAMi's webhook does, so no such pod reaches a scheduler")
_TOO_BIG = ("HAMi's scheduler reads a gpumem that is no plain int32 as no GPU request at "
            "all, after its webhook admitted the pod; vgpu reads the quantity (16Gi = "
            "17179869184 MiB), which no GPU holds: the pod is refused with the reason (the "
            "webhook, when the cluster's GPUs are known), not run without a GPU")


def _rows() -> list[Row]:
    rows: list[Row] = []
    for case, limits, want in [
        ("ResourceName set", {G: "1"}, True),
        ("only ResourceCores", {CORES: "1"}, True),
        ("only ResourceMem", {MEM: "1"}, True),
        ("only ResourceMemPercentage", {PCT: "1"}, True),
        ("no GPU resources", {}, False),
    ]:
        rows.append(Row(f"{DEV}: Test_MutateAdmission/{case}",
                        lambda lim=limits: admitted(lim), want))
    for pct, want in [(0, "accepted"), (100, "accepted"), (101, "refused"),
                      (150, "refused")]:
        rows.append(Row(f"{DEV}: Test_MutateAdmission_MemoryPercentageValidation/{pct}",
                        lambda p=pct: "refused" if read({G: "1", PCT: str(p)}) == "refused"
                        else "accepted", want))
    for case, limits, requests, want in [
        ("exclusive via percentage", {G: "1", PCT: "100"}, None, 100),
        ("exclusive via percentage in requests only", {G: "1"}, {PCT: "100"}, 100),
        ("non-exclusive percentage", {G: "1", PCT: "50"}, None, 0),
        ("no memory fields defaults to exclusive", {G: "1"}, None, 100),
        ("explicit cores remains unchanged", {G: "1", CORES: "70"}, None, 70),
        ("explicit cores in requests remains unchanged", {G: "1"}, {CORES: "55"}, 55),
        ("memory size present treated as shareable", {G: "1", MEM: "8192"}, None, 0),
    ]:
        rows.append(Row(f"{DEV}: TestMutateAdmissionDefaultsExclusiveCore/{case}",
                        lambda lim=limits, req=requests: cores_written(lim, req), want))
    gen = f"{DEV}: TestGenerateResourceRequests"
    # HAMi's scheduler sees the pod after its webhook wrote gpucores 100 where the
    # container gives no memory or a percentage of exactly 100 (not 0); vgpu's parse
    # includes that webhook step, so those rows carry the 100 cores HAMi's webhook wrote.
    for case, limits, requests, want, differs, vgpu in [
        ("gpu count only", {G: "1"}, None, (1, 0, 100, 100), None, None),
        ("gpu count + explicit memory", {G: "2", MEM: "4096"}, None, (2, 4096, None, 0),
         None, None),
        ("gpu count + memory percentage", {G: "1", PCT: "50"}, None, (1, 0, 50, 0), None,
         None),
        ("memory percentage above 100 clamped", {G: "1", PCT: "150"}, None,
         (1, 0, 100, 100), _CLAMPED, "refused"),
        ("memory percentage beyond int32 clamped", {G: "1", PCT: "99999999999"}, None,
         (1, 0, 100, 100), _CLAMPED, "refused"),
        ("memory percentage 101 clamped", {G: "1", PCT: "101"}, None, (1, 0, 100, 100),
         _CLAMPED, "refused"),
        ("gpu count + explicit cores", {G: "1", CORES: "50"}, None, (1, 0, 100, 50), None,
         None),
        ("no gpu resource", {}, None, "no GPU", None, None),
        ("gpu in Requests", None, {G: "1"}, (1, 0, 100, 100), None, None),
        ("memory percentage 0 treated as unset", {G: "1", PCT: "0"}, None,
         (1, 0, 100, 0), None, None),
        ("memory percentage 0 in Requests", {G: "1"}, {PCT: "0"}, (1, 0, 100, 0), None,
         None),
        ("negative memory percentage treated as unset", {G: "1", PCT: "-1"}, None,
         (1, 0, 100, 100), _CLAMPED, "refused"),
        ("memory percentage 0 + explicit memory", {G: "1", MEM: "2000", PCT: "0"}, None,
         (1, 2000, None, 0), None, None),
        ("byte-scale 16Gi rejected", {G: "1", MEM: "16Gi"}, None, "no GPU", _TOO_BIG,
         (1, 17179869184, None, 0)),
        ("decimal-form 16.0Gi rejected", {G: "1", MEM: "16.0Gi"}, None, "no GPU", _TOO_BIG,
         (1, 17179869184, None, 0)),
    ]:
        rows.append(Row(f"{gen}/{case}", lambda lim=limits, req=requests: read(lim, req),
                        want, differs, vgpu))
    rows.append(Row(f"{gen}_MemoryFactor/1024 x 2",
                    lambda: read({G: "1", MEM: "1024"}, config=Config(memory_factor=2)),
                    (1, 2048, None, 0)))
    rows.append(Row(f"{gen}_DefaultMemory/count only",
                    lambda: read({G: "1"}, config=Config(default_mem=512))[1], 512))
    rows.append(Row(f"{gen}_DefaultMemory/percentage 0",
                    lambda: read({G: "1", PCT: "0"}, config=Config(default_mem=512))[1], 512))
    rows.append(Row(f"{gen}_DefaultMemory/gpumem 0",
                    lambda: read({G: "1", MEM: "0"}, config=Config(default_mem=512))[1], 512))
    rows.append(Row(f"{DEV}: TestZeroMemoryPercentageIsAccountedAsWholeCard",
                    lambda: read({G: "1", PCT: "0"})[2], 100))
    return rows


ROWS = _rows()
