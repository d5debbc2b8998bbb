"""HAMi's webhook verdicts (pkg/scheduler/webhook_test.go) through vgpu's webhook:
``"allowed"``, ``"mutated"`` (allowed with a patch) or ``"refused"``."""

from __future__ import annotations

from typing import Any

from tests.hami.rows import Row
from tests.webhook.pods import admit, ctr, pod

HOOK = "pkg/scheduler/webhook_test.go"
GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}


def verdict(obj: dict[str, Any]) -> str:
    response, _ = admit(obj)
    if not response["allowed"]:
        return "refused"
    return "mutated" if "patch" in response else "allowed"


_OTHER_SCHEDULER = (
    "HAMi lets a GPU pod that names another scheduler through untouched, and that scheduler "
    "places it on GPUs HAMi's books do not show; vgpu refuses it with the fix "
    "(docs/contracts.md), or trusts the scheduler when the operator lists it in "
    "extraSchedulerNames")
_NO_CONTAINERS = (
    "HAMi's webhook denies a pod without containers; vgpu's leaves it to the API server's "
    "own validation, which refuses it after the mutating webhooks")


def _rows() -> list[Row]:
    no_containers = pod()
    no_containers["spec"]["containers"] = []
    return [
        Row(f"{HOOK}: TestHandle/GPU pod", lambda: verdict(pod(ctr("c", GPU))), "mutated"),
        Row(f"{HOOK}: TestHandle/privileged GPU container",
            lambda: verdict(pod(ctr("c", GPU, privileged=True))), "refused"),
        Row(f"{HOOK}: TestPodHasNodeName",
            lambda: verdict(pod(ctr("c", GPU), node="test-node")), "refused"),
        Row(f"{HOOK}: TestPodHasDifferentScheduler",
            lambda: verdict(pod(ctr("c", GPU), scheduler="different-scheduler")), "allowed",
            _OTHER_SCHEDULER, "refused"),
        Row(f"{HOOK}: TestEmptyContainersDenied", lambda: verdict(no_containers), "refused",
            _NO_CONTAINERS, "allowed"),
        Row(f"{HOOK}: TestNonGPUPodAllowedAdmission",
            lambda: verdict(pod(ctr("c", {"cpu": "1"}))), "allowed"),
        Row(f"{HOOK}: TestSchedulerNameEmptyNoOverwrite",
            lambda: verdict(pod(ctr("c", GPU))), "mutated"),
    ]


ROWS = _rows()
