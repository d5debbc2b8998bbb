"""Table-driven admission decisions: each case's patch is applied and the pod checked.
Derived quota requests are off here (``PLAIN``); their table is tests/webhook/test_quota.py.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.webhook.pods import HOMOGENEOUS, MIXED, NO_GPUS, admit, ctr, pod
from vgpu.annotations import GPUMEM_PERCENTAGE
from vgpu.config import Config, QuotaConfig, ResourceNames
from vgpu.pod_history import ADMISSION, decode_admission
from vgpu.requests import parse_pod
from vgpu_webhook.gpus import ClusterGpus

GPU, MEM, PCT, CORES, PRIO = ResourceNames().all()
SCHED = "vgpu-scheduler"

Edit = Callable[[dict[str, Any]], None]
PLAIN = Config(quota=QuotaConfig(derived_requests=False))


@dataclass(frozen=True)
class Case:
    name: str
    pod: dict[str, Any]
    #: For an allowed pod: the edits the patch must make (None: no patch at all).
    expect: Edit | None = None
    denied: str | None = None  # a fragment the denial message must contain
    code: int = 400
    gpus: ClusterGpus = NO_GPUS
    config: Config = PLAIN
    review: dict[str, Any] = field(default_factory=dict)


def edits(*steps: Edit) -> Edit:
    def run(p: dict[str, Any]) -> None:
        for step in steps:
            step(p)
    return run


def sched(p: dict[str, Any]) -> None:
    p["spec"]["schedulerName"] = SCHED


def res(index: int, part: str, values: dict[str, Any], key: str = "containers") -> Edit:
    def run(p: dict[str, Any]) -> None:
        p["spec"][key][index].setdefault("resources", {}).setdefault(part, {}).update(values)
    return run


def drop(index: int, part: str, name: str, key: str = "containers") -> Edit:
    def run(p: dict[str, Any]) -> None:
        del p["spec"][key][index]["resources"][part][name]
    return run


def note(values: dict[str, int]) -> Edit:
    def run(p: dict[str, Any]) -> None:
        p["metadata"].setdefault("annotations", {})[GPUMEM_PERCENTAGE] = json.dumps(
            values, separators=(",", ":"), sort_keys=True)
    return run


CUSTOM = Config(resource_names=ResourceNames(gpu="example.com/v~gpu", gpumem="example.com/mem",
                                             gpumem_percentage="example.com/mem-pct",
                                             gpucores="example.com/cores",
                                             priority="example.com/prio"), quota=PLAIN.quota)
SCALED = Config(device_memory_scaling=2.0, quota=PLAIN.quota)

CASES = [
    # --- pods the webhook leaves alone ---------------------------------------------------
    Case("plain pod", pod(ctr("web", {"cpu": "1", "memory": "1Gi"}))),
    Case("other extended resource", pod(ctr("fpga", {"example.com/fpga": "1"}))),
    Case("pod without containers' resources", pod(ctr("a"), ctr("b"))),
    Case("update of a GPU pod", pod(ctr("c", {MEM: "3000"})), review={"operation": "UPDATE"}),
    Case("GPU deployment is not a pod",
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
          "spec": {"template": {"spec": {"containers": [ctr("c", {MEM: "1"})]}}}},
         review={"kind": "Deployment", "group": "apps"}),
    Case("GPU pod already complete and routed",
         pod(ctr("c", {GPU: "1", MEM: "3000"}), scheduler=SCHED)),
    # --- mutations ---------------------------------------------------------------------
    Case("deployment pod: generateName, no name",
         pod(ctr("c", {GPU: "1", MEM: "3000"}), name=None, generate_name="trainer-5d4f8-"),
         expect=sched),
    Case("a fault domain stated is kept as it is", pod(ctr("c", {GPU: "1", MEM: "3000"}),
         annotations={"vgpu.io/fault-domain": " Namespace "}), expect=sched),
    Case("default-scheduler is replaced",
         pod(ctr("c", {GPU: "2"}), scheduler="default-scheduler"), expect=sched),
    Case("limits-only memory gets a count",
         pod(ctr("c", {MEM: "3000"})), expect=edits(sched, res(0, "limits", {GPU: "1"}))),
    Case("cores only gets a count",
         pod(ctr("c", {CORES: "30"})), expect=edits(sched, res(0, "limits", {GPU: "1"}))),
    Case("priority only gets a count, keeps the priority, adds no env",
         pod(ctr("c", {PRIO: "1"}, env=[{"name": "A", "value": "b"}])),
         expect=edits(sched, res(0, "limits", {GPU: "1"}))),
    Case("requests-only count and memory are mirrored into new limits",
         pod(ctr("c", requests={GPU: "1", MEM: "2Gi", "cpu": "1"})),
         expect=edits(sched, res(0, "limits", {GPU: "1", MEM: "2Gi"}))),
    Case("requests-only memory: limits created, count in both",
         pod(ctr("c", requests={MEM: "4000"})),
         expect=edits(sched, res(0, "limits", {GPU: "1", MEM: "4000"}),
                      res(0, "requests", {GPU: "1"}))),
    Case("limits null is replaced, not patched into",
         pod({"name": "c", "resources": {"limits": None, "requests": {GPU: "1"}}}),
         expect=edits(sched, lambda p: p["spec"]["containers"][0]["resources"].update(
             {"limits": {GPU: "1"}}))),
    Case("limits and requests both get the count",
         pod(ctr("c", {MEM: "3000", "cpu": "2"}, {MEM: "3000", "cpu": "1"})),
         expect=edits(sched, res(0, "limits", {GPU: "1"}), res(0, "requests", {GPU: "1"}))),
    Case("limits without GPU names, GPU in requests: limits extended, cpu kept",
         pod(ctr("c", {"cpu": "2"}, {GPU: "1", CORES: "50"})),
         expect=edits(sched, res(0, "limits", {GPU: "1", CORES: "50"}))),
    Case("init container only",
         pod(ctr("main", {"cpu": "1"}), init=(ctr("warmup", {MEM: "1000"}),)),
         expect=edits(sched, res(0, "limits", {GPU: "1"}, key="initContainers"))),
    Case("init and regular GPU containers",
         pod(ctr("main", {GPU: "1", CORES: "50"}), init=(ctr("warmup", {CORES: "10"}),)),
         expect=edits(sched, res(0, "limits", {GPU: "1"}, key="initContainers"))),
    Case("several containers: only the GPU one at index 2 changes",
         pod(ctr("sidecar", {"cpu": "1"}), ctr("log"), ctr("train", {MEM: "8000"})),
         expect=edits(sched, res(2, "limits", {GPU: "1"}))),
    Case("several GPU containers of different shapes",
         pod(ctr("a", {GPU: "2", MEM: "1000"}), ctr("b", {CORES: "25"}),
             ctr("c", requests={PRIO: "0"})),
         expect=edits(sched, res(1, "limits", {GPU: "1"}),
                      res(2, "limits", {GPU: "1", PRIO: "0"}),
                      res(2, "requests", {GPU: "1"}))),
    Case("count with no inventory is not judged",
         pod(ctr("c", {GPU: "64"})), expect=sched),
    Case("memory larger than physical fits with memory scaling 2",
         pod(ctr("c", {GPU: "1", MEM: "50000"})), gpus=HOMOGENEOUS, config=SCALED,
         expect=sched),
    Case("custom resource names are escaped (~ and /)",
         pod(ctr("c", {"example.com/mem": "100"})), config=CUSTOM,
         expect=edits(sched, res(0, "limits", {"example.com/v~gpu": "1"}))),
    # --- percentages ------------------------------------------------------------------
    Case("percentage, homogeneous cluster: resolved, recorded in a new annotations map",
         pod(ctr("c", {GPU: "1", PCT: "50"})), gpus=HOMOGENEOUS,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "20480"}),
                      note({"c": 50}))),
    Case("percentage resolved, existing annotations kept",
         pod(ctr("c", {PCT: "25"}), annotations={"team": "vision"}), gpus=HOMOGENEOUS,
         expect=edits(sched, drop(0, "limits", PCT),
                      res(0, "limits", {MEM: "10240", GPU: "1"}), note({"c": 25}))),
    Case("percentage in requests only: mirrored and resolved in both",
         pod(ctr("c", requests={PCT: "10"})), gpus=HOMOGENEOUS,
         expect=edits(sched, drop(0, "requests", PCT),
                      res(0, "requests", {MEM: "4096", GPU: "1"}),
                      res(0, "limits", {MEM: "4096", GPU: "1"}), note({"c": 10}))),
    Case("percentage with memory scaling 2 is of the scaled size",
         pod(ctr("c", {GPU: "1", PCT: "50"})), gpus=HOMOGENEOUS, config=SCALED,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "40960"}),
                      note({"c": 50}))),
    Case("percentage, mixed cluster: left to the scheduler",
         pod(ctr("c", {GPU: "1", PCT: "50"})), gpus=MIXED, expect=sched),
    Case("percentage, no inventory: left to the scheduler",
         pod(ctr("c", {GPU: "1", PCT: "50"})), expect=sched),
    Case("percentage, mixed cluster, use-gputype picks A100",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/use-gputype": "a100"}),
         gpus=MIXED,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "20480"}),
                      note({"c": 50}))),
    Case("percentage, mixed cluster, nouse-gputype T4",
         pod(ctr("c", {GPU: "1", PCT: "40"}), annotations={"nvidia.com/nouse-gputype": "T4"}),
         gpus=MIXED,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "16384"}),
                      note({"c": 40}))),
    Case("percentage, mixed cluster, use-gpuuuid names a T4",
         pod(ctr("c", {GPU: "1", PCT: "50"}),
             annotations={"nvidia.com/use-gpuuuid": "GPU-t0-1"}),
         gpus=MIXED,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "7680"}),
                      note({"c": 50}))),
    Case("percentage, mixed cluster, nouse-gpuuuid on some A100s only: still mixed",
         pod(ctr("c", {GPU: "1", PCT: "50"}),
             annotations={"nvidia.com/nouse-gpuuuid": "GPU-a0-0,GPU-a0-1"}),
         gpus=MIXED, expect=sched),
    Case("percentage, mixed cluster, nouse-gpuuuid on every T4",
         pod(ctr("c", {GPU: "1", PCT: "50"}),
             annotations={"nvidia.com/nouse-gpuuuid": "GPU-t0-0, GPU-t0-1"}),
         gpus=MIXED,
         expect=edits(sched, drop(0, "limits", PCT), res(0, "limits", {MEM: "20480"}),
                      note({"c": 50}))),
    Case("percentage, annotations exclude every GPU: left to the scheduler",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/use-gputype": "H100"}),
         gpus=MIXED, expect=sched),
    Case("only explicit percentages are resolved; the whole-GPU default stays relative",
         pod(ctr("a", {GPU: "1"}), ctr("b", {GPU: "1", PCT: "100"})), gpus=HOMOGENEOUS,
         expect=edits(sched, drop(1, "limits", PCT), res(1, "limits", {MEM: "40960"}),
                      note({"b": 100}))),
    # --- denials -----------------------------------------------------------------------
    Case("percentage 0", pod(ctr("c", {PCT: "0"})), denied="between 1 and 100"),
    Case("percentage 150", pod(ctr("c", {GPU: "1", PCT: "150"})), denied="between 1 and 100"),
    Case("cores 101", pod(ctr("c", {GPU: "1", CORES: "101"})), denied="between 0 and 100"),
    Case("cores negative", pod(ctr("c", {CORES: "-5"})), denied="between 0 and 100"),
    Case("count 0", pod(ctr("c", {GPU: "0", MEM: "10"})), denied="ask for at least 1 GPU"),
    Case("more GPUs than any node has", pod(ctr("c", {GPU: "5"})), gpus=HOMOGENEOUS,
         denied="no node has more than 4"),
    Case("more GPUs than any node has, in an init container",
         pod(ctr("c", {GPU: "1"}), init=(ctr("i", {GPU: "5"}),)), gpus=MIXED,
         denied="asks for 5 GPUs (nvidia.com/gpu) but no node has more than 4"),
    Case("memory and percentage together", pod(ctr("c", {MEM: "1000", PCT: "10"})),
         denied="keep only one"),
    Case("memory and percentage split across limits and requests",
         pod(ctr("c", {MEM: "1000"}, {PCT: "10"})), denied="keep only one"),
    Case("more memory than any GPU offers", pod(ctr("c", {GPU: "1", MEM: "50000"})),
         gpus=MIXED, denied="largest GPU in the cluster offers 40960 MiB"),
    Case("privileged GPU container",
         pod(ctr("c", {GPU: "1"}, privileged=True)), denied="privileged", code=403),
    Case("nodeName already set",
         pod(ctr("c", {GPU: "1"}), node="gpu-node-7"),
         denied="use a nodeSelector (kubernetes.io/hostname: gpu-node-7)", code=403),
    Case("unparsable quantity", pod(ctr("c", {GPU: "1", MEM: "lots"})),
         denied="'lots' is not a quantity"),
    Case("fractional count", pod(ctr("c", {GPU: "1500m"})), denied="not a whole number"),
    Case("unknown GPU policy",
         pod(ctr("c", {GPU: "1"}), annotations={"vgpu.io/gpu-scheduler-policy": "fastest"}),
         denied="unknown policy 'fastest'"),
    Case("unknown node policy, HAMi spelling",
         pod(ctr("c", {GPU: "1"}), annotations={"hami.io/node-scheduler-policy": "random"}),
         denied="hami.io/node-scheduler-policy: unknown policy"),
    Case("priority outside 0/1", pod(ctr("c", {PRIO: "5"})), denied="use 0 (high) or 1 (low)"),
    Case("numa-bind not a boolean",
         pod(ctr("c", {GPU: "1"}), annotations={"nvidia.com/numa-bind": "maybe"}),
         denied="not a boolean"),
    Case("fault domain that is not one", pod(ctr("c", {GPU: "1"}), annotations={
         "vgpu.io/fault-domain": "tenant"}), denied="vgpu.io/fault-domain: 'tenant' is not "
         "a fault domain; use one of any, namespace"),
    Case("GPU container without a name", pod({"resources": {"limits": {GPU: "1"}}}),
         denied="needs a name"),
    Case("GPU container named like another container",
         pod(ctr("c", {"cpu": "1"}), ctr("c", {MEM: "100"})), denied="must be unique"),
]


def test_enough_cases() -> None:
    assert len(CASES) >= 25
    assert len({c.name for c in CASES}) == len(CASES)


def without_admission_record(pod: dict[str, Any]) -> tuple[str, ...]:
    """Take ``vgpu.io/admission`` out of a patched pod (and a map it alone made)."""
    meta = pod["metadata"]
    changes = decode_admission(meta["annotations"].pop(ADMISSION))
    if not meta["annotations"]:
        del meta["annotations"]
    return changes


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decision(case: Case) -> None:
    original = copy.deepcopy(case.pod)
    response, patched = admit(case.pod, case.gpus, case.config, **case.review)
    assert case.pod == original, "the decision must not modify its input"
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    if case.denied is not None:
        assert response["allowed"] is False
        assert "patch" not in response
        assert case.denied in response["status"]["message"]
        assert response["status"]["code"] == case.code
        return
    assert response["allowed"] is True
    assert "status" not in response
    if case.expect is None:
        assert "patch" not in response and "patchType" not in response
        return
    assert "patch" in response
    want = copy.deepcopy(case.pod)
    case.expect(want)
    # The patch also records what it changed (for `vgpu why`): checked here, and then
    # compared without it.
    recorded = without_admission_record(patched)
    assert recorded and all(": " in line for line in recorded)
    assert patched == want
    # What the webhook let through, the scheduler must read the same way ...
    parse_pod(patched, case.config)
    # ... and a second pass (reinvocationPolicy: IfNeeded) changes nothing more.
    again, _ = admit(patched, case.gpus, case.config, **case.review)
    assert again["allowed"] is True and "patch" not in again


def test_resolution_keeps_every_other_request_field() -> None:
    p = pod(ctr("c", {GPU: "2", PCT: "50", CORES: "30", PRIO: "0"}))
    _, patched = admit(p, HOMOGENEOUS)
    before = parse_pod(p, Config()).containers[0]
    after = parse_pod(patched, Config()).containers[0]
    assert (after.count, after.cores, after.priority) == (before.count, before.cores,
                                                          before.priority)
    assert (after.memory_mib, after.memory_percent) == (20480, None)

