"""HAMi's quota (pkg/device/quota_test.go, and the admission check of
pkg/scheduler/webhook_test.go: TestFitResourceQuota) through vgpu's HAMi quota arithmetic
(:mod:`vgpu.hami_quota`) and the scheduler's HamiQuota filter. An outcome is ``"fits"`` or
``"exceeds"``, or for whole pods where it is decided."""

from __future__ import annotations

from typing import Any

from tests.hami.rows import Row
from tests.scheduler.e2e_support import gpu_node, setup
from vgpu import builders, hami_quota
from vgpu.config import Config

QUOTA = "pkg/device/quota_test.go"
HOOK = "pkg/scheduler/webhook_test.go"
MEM, CORES = "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores"


def rq(hard: dict[str, str], namespace: str = "testns") -> dict[str, Any]:
    return {"metadata": {"name": "q", "namespace": namespace}, "spec": {"hard": hard}}


def fit(hard: dict[str, str], used: tuple[int, int], asked: tuple[int, int], *,
        factor: int = 1, namespace: str = "testns") -> str:
    config = Config(memory_factor=factor)
    limits = hami_quota.limits_of([rq(hard)], namespace, config)
    why = hami_quota.over(limits, used, asked, config, namespace)
    return "fits" if why is None else "exceeds"


def caps(hard: dict[str, str]) -> tuple[int | None, int | None]:
    limits = hami_quota.limits_of([rq(hard)], "testns", Config())
    return limits.memory_mib, limits.cores


def scheduled(app: list[tuple[int, int]], init: list[tuple[int, int]] = ()) -> str:
    """A pod of ``(gpus, gpumem)`` app and init containers, in a namespace whose pods hold
    1000 of 2000 MiB and 200 of 400 cores (TestFitResourceQuota's state), through the
    whole scheduler: placed, or left pending by the HamiQuota filter (HAMi's webhook
    answers ``"refused"`` where vgpu's scheduler answers ``"pending: quota"``)."""
    sched, cluster, _ = setup([gpu_node("n1", 4, memory_mib=40960)])
    cluster.create("pods", builders.pod(
        "holder", [builders.container(f"h{i}", gpumem=500, cores=100) for i in range(2)],
        namespace="testns"))
    sched.run_until_idle()
    cluster.create("resourcequotas", rq({MEM: "2000", CORES: "400"}))
    cluster.create("pods", builders.pod(
        "p", [builders.container(f"a{i}", gpus=n, gpumem=m) for i, (n, m) in enumerate(app)],
        namespace="testns",
        init_containers=[builders.container(f"i{i}", gpus=n, gpumem=m)
                         for i, (n, m) in enumerate(init)]))
    sched.run_until_idle()
    if cluster.get("pods", "p", "testns")["spec"].get("nodeName"):
        return "placed"
    message = cluster.events(name="p")[-1].message
    return "pending: quota" if "quota exceeded" in message else f"pending: {message}"


_PENDING = ("HAMi's webhook refuses a pod its namespace's quota cannot take now; vgpu admits "
            "it and its scheduler holds it Pending with the quota named (kubectl vgpu why), "
            "placing it once the namespace has room: the same quota decision, without a "
            "ReplicaSet's FailedCreate back-off")


def _rows() -> list[Row]:
    full = {MEM: "2000", CORES: "400"}
    rows = [
        Row(f"{QUOTA}: TestFitQuota/within limits",
            lambda: fit(full, (1000, 200), (500, 100)), "fits"),
        Row(f"{QUOTA}: TestFitQuota/memory exceeds",
            lambda: fit(full, (1000, 200), (1500, 100)), "exceeds"),
        Row(f"{QUOTA}: TestFitQuota/cores exceed",
            lambda: fit(full, (1000, 200), (500, 300)), "exceeds"),
        Row(f"{QUOTA}: TestFitQuota/memory with factor fits",
            lambda: fit(full, (1000, 200), (1000, 100), factor=2), "fits"),
        Row(f"{QUOTA}: TestFitQuota/memory with factor exceeds",
            lambda: fit(full, (1000, 200), (5000, 100), factor=2), "exceeds"),
        Row(f"{QUOTA}: TestFitQuota/namespace not present",
            lambda: fit(full, (0, 0), (1500, 100), namespace="otherns"), "fits"),
        Row(f"{QUOTA}: TestFitQuota/device not present",
            lambda: fit({"limits.example.com/gpumem": "1"}, (0, 0), (1000, 100)), "fits"),
        Row(f"{QUOTA}: TestFitQuotaExplicitZeroBlocks",
            lambda: fit({MEM: "0"}, (0, 0), (500, 0)), "exceeds"),
        Row(f"{QUOTA}: TestAddQuotaAndDelQuota/limits read",
            lambda: caps({MEM: "100", CORES: "10"}), (100, 10)),
        Row(f"{QUOTA}: TestDelQuotaNonLimitsKey/requests. and other keys cap nothing",
            lambda: caps({"requests.nvidia.com/gpumem": "50", "0123456nvidia.com/gpumem": "50"}),
            (None, None)),
        Row(f"{QUOTA}: TestUpdateQuota/a dropped key is released",
            lambda: caps({MEM: "2000"}), (2000, None)),
        Row(f"{QUOTA}: TestUpdateQuotaKeepsLimitEnforced/at the limit",
            lambda: fit({MEM: "1000"}, (1000, 0), (1, 0)), "exceeds"),
    ]
    for case, app, init, want in [
        ("quota passed", [(1, 100)], [], "fits"),
        ("quota exceeded", [(1, 1024)], [], "exceeds"),
        ("request multiple gpus", [(2, 1024)], [], "exceeds"),
        ("request multiple gpus within quota", [(2, 400)], [], "fits"),
        ("init containers counted by the largest", [(1, 500)], [(1, 800), (1, 800)], "fits"),
        ("init container exceeds directly", [(1, 100)], [(1, 1500)], "exceeds"),
    ]:
        rows.append(Row(f"{HOOK}: TestFitResourceQuota/{case}",
                        lambda a=app, i=init: scheduled(a, i),
                        "placed" if want == "fits" else "refused",
                        None if want == "fits" else _PENDING,
                        None if want == "fits" else "pending: quota"))
    return rows


ROWS = _rows()
