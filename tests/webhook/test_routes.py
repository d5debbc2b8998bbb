"""The one admission rule (issue 24): a pod that asks for vGPUs is placed by vgpu, or
refused with what to do instead. Each case runs through :func:`test_mutate.test_decision`'s
checks (a patch applied and the result read back; a denial's message and code)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhook.mutate_support import GPU, MEM, PCT, PLAIN, Case, Edit, edits, res, sched
from tests.webhook.pods import ctr, pod
from tests.webhook.test_mutate import CASES as MUTATE_CASES
from tests.webhook.test_mutate import test_decision as check
from vgpu.config import Config
from vgpu_webhook.route_around import grant_variable

SECOND = Config(extra_scheduler_names=("second-vgpu",), quota=PLAIN.quota)


def named(name: str) -> Edit:
    def run(p: dict[str, Any]) -> None:
        p["spec"]["schedulerName"] = name
    return run


CASES = [
    Case("privileged sidecar of a GPU pod: it sees every GPU too",
         pod(ctr("c", {GPU: "1"}), ctr("side", {"cpu": "1"}, privileged=True)),
         denied="container 'side' is privileged in a pod that asks for vGPUs", code=403),
    Case("privileged init container of a GPU pod",
         pod(ctr("c", {GPU: "1"}), init=(ctr("setup", privileged=True),)),
         denied="container 'setup' is privileged", code=403),
    Case("GPU pod for another scheduler",
         pod(ctr("c", {GPU: "1"}), scheduler="volcano"),
         denied="spec.schedulerName is 'volcano'", code=403),
    Case("a schedulerName that is not a string is another scheduler's, not a crash",
         pod(ctr("c", {GPU: "1"}), scheduler=[]),  # type: ignore[arg-type]
         denied="spec.schedulerName is []", code=403),
    Case("GPU pod for another scheduler says what to do instead",
         pod(ctr("c", {MEM: "3000"}), scheduler="x"),
         denied="remove spec.schedulerName (the webhook sets 'vgpu-scheduler')", code=403),
    Case("GPU pod for another scheduler with a bad request: the request is refused first",
         pod(ctr("c", {GPU: "1", PCT: "500"}), scheduler="volcano"),
         denied="between 0 and 100"),
    Case("privileged GPU container for another scheduler",
         pod(ctr("c", {GPU: "1"}, privileged=True), scheduler="x"),
         denied="spec.schedulerName is 'x'", code=403),
    Case("another scheduler and a node: the node is named first",
         pod(ctr("c", {GPU: "1"}), scheduler="x", node="node-1"),
         denied="spec.nodeName is set to 'node-1'", code=403),
    Case("GPU container that names its own GPUs",
         pod(ctr("c", {GPU: "1"}, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
         denied="container 'c' sets NVIDIA_VISIBLE_DEVICES", code=403),
    Case("sidecar that sets HAMi-core's memory limit",
         pod(ctr("c", {GPU: "1"}),
             ctr("side", env=[{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80000m"},
                              {"name": "CUDA_DEVICE_SM_LIMIT", "value": "100"}])),
         denied="container 'side' sets CUDA_DEVICE_MEMORY_LIMIT_0, CUDA_DEVICE_SM_LIMIT",
         code=403),
    Case("a second vGPU-aware scheduler the config trusts keeps its pods",
         pod(ctr("c", {MEM: "3000"}), scheduler="second-vgpu"), config=SECOND,
         expect=edits(named("second-vgpu"), res(0, "limits", {GPU: "1"}))),
    Case("the trusted second scheduler's pods are checked like vgpu's",
         pod(ctr("c", {GPU: "1"}, privileged=True), scheduler="second-vgpu"), config=SECOND,
         denied="privileged", code=403),
    Case("CUDA_VISIBLE_DEVICES only picks among the GPUs granted: allowed",
         pod(ctr("c", {GPU: "1", MEM: "10"},
                env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}])),
         expect=sched),
    Case("NVIDIA_VISIBLE_DEVICES=none hides every GPU: allowed (overwriteEnv writes it)",
         pod(ctr("c", {GPU: "1", MEM: "10"}),
             ctr("log", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}])),
         expect=sched),
    Case("NVIDIA_VISIBLE_DEVICES naming GPUs is still refused",
         pod(ctr("c", {GPU: "1", MEM: "10"}),
             ctr("log", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
         denied="sets NVIDIA_VISIBLE_DEVICES", code=403),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_route(case: Case) -> None:
    check(case)


def test_names_are_not_shared_with_the_mutation_table() -> None:
    assert not {c.name for c in CASES} & {c.name for c in MUTATE_CASES}


@pytest.mark.parametrize(("name", "owned"), [
    ("NVIDIA_VISIBLE_DEVICES", True), ("CUDA_DEVICE_MEMORY_LIMIT", True),
    ("CUDA_DEVICE_MEMORY_LIMIT_3", True), ("CUDA_DEVICE_SM_LIMIT", True),
    ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", True), ("CUDA_TASK_PRIORITY", True),
    ("CUDA_VISIBLE_DEVICES", False), ("NVIDIA_DRIVER_CAPABILITIES", False), ("PATH", False),
])
def test_grant_variables(name: str, owned: bool) -> None:
    assert grant_variable(name) is owned
