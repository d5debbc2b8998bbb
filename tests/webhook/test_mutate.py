"""Table-driven admission decisions: each case's patch is applied and the pod checked.
Derived quota requests are off here (``PLAIN``); their table is tests/webhook/test_quota.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.mutate_support import (
    CORES,
    CUSTOM,
    GPU,
    MEM,
    PCT,
    PLAIN,
    PRIO,
    SCALED,
    SCHED,
    Case,
    drop,
    edits,
    moved,
    note,
    res,
    sched,
    whole,
)
from tests.webhook.pods import HOMOGENEOUS, MIXED, admit, ctr, pod
from vgpu.config import Config
from vgpu.pod_history import ADMISSION, decode_admission
from vgpu.requests import parse_pod

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
         pod(ctr("c", {GPU: "2"}), scheduler="default-scheduler"), expect=edits(sched, whole())),
    Case("limits-only memory gets a count",
         pod(ctr("c", {MEM: "3000"})), expect=edits(sched, res(0, "limits", {GPU: "1"}))),
    Case("cores only gets a count",
         pod(ctr("c", {CORES: "30"})), expect=edits(sched, res(0, "limits", {GPU: "1"}))),
    Case("priority only asks for no GPU, as in HAMi: routed, nothing added",
         pod(ctr("c", {PRIO: "1"}, env=[{"name": "A", "value": "b"}])),
         expect=sched, warns="alone asks for no GPU"),
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
             {"limits": {GPU: "1", CORES: "100"}}), res(0, "requests", {CORES: "100"}))),
    Case("limits and requests both get the count",
         pod(ctr("c", {MEM: "3000", "cpu": "2"}, {MEM: "3000", "cpu": "1"})),
         expect=edits(sched, res(0, "limits", {GPU: "1"}), res(0, "requests", {GPU: "1"}))),
    Case("limits without GPU names, GPU in requests: limits extended, cpu kept",
         pod(ctr("c", {"cpu": "2"}, {GPU: "1", CORES: "50"})),
         expect=edits(sched, res(0, "limits", {GPU: "1", CORES: "50"}))),
    # Kubelets before 1.31 fail a pod whose init container asks for a resource the node
    # does not advertise: only the count stays on it, the rest moves to an annotation.
    Case("init container only",
         pod(ctr("main", {"cpu": "1"}), init=(ctr("warmup", {MEM: "1000"}),)),
         expect=edits(sched, res(0, "limits", {GPU: "1"}, key="initContainers"),
                      drop(0, "limits", MEM, key="initContainers"),
                      moved({"warmup": {MEM: "1000"}}))),
    Case("init and regular GPU containers",
         pod(ctr("main", {GPU: "1", CORES: "50"}), init=(ctr("warmup", {CORES: "10"}),)),
         expect=edits(sched, res(0, "limits", {GPU: "1"}, key="initContainers"),
                      drop(0, "limits", CORES, key="initContainers"),
                      moved({"warmup": {CORES: "10"}}))),
    Case("init container asking for a whole GPU: its 100 cores go to the annotation too",
         pod(ctr("main", {GPU: "1", MEM: "100"}),
             init=(ctr("warmup", {GPU: "1"}, {GPU: "1", PRIO: "0"}),)),
         expect=edits(sched, drop(0, "requests", PRIO, key="initContainers"),
                      moved({"warmup": {CORES: "100", PRIO: "0"}}))),
    Case("several containers: only the GPU one at index 2 changes",
         pod(ctr("sidecar", {"cpu": "1"}), ctr("log"), ctr("train", {MEM: "8000"})),
         expect=edits(sched, res(2, "limits", {GPU: "1"}))),
    Case("several GPU containers of different shapes",
         pod(ctr("a", {GPU: "2", MEM: "1000"}), ctr("b", {CORES: "25"}),
             ctr("c", requests={PRIO: "0"})),
         expect=edits(sched, res(1, "limits", {GPU: "1"})), warns="alone asks for no GPU"),
    Case("count with no inventory is not judged",
         pod(ctr("c", {GPU: "64"})), expect=edits(sched, whole())),
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
         expect=edits(sched, whole(0), whole(1), drop(1, "limits", PCT),
                      res(1, "limits", {MEM: "40960"}), note({"b": 100}))),
    # --- HAMi's values vgpu once refused: admitted with HAMi's meaning and a warning ------
    Case("percentage 0 is the memory default, as in HAMi",
         pod(ctr("c", {PCT: "0"})), expect=edits(sched, res(0, "limits", {GPU: "1"})),
         warns="0 means not given"),
    Case("cores 101 counts as 100, as in HAMi",
         pod(ctr("c", {GPU: "1", MEM: "10", CORES: "101"})), expect=sched,
         warns="101 is 100"),
    Case("count 0 is no GPU, as in HAMi",
         pod(ctr("c", {GPU: "0", MEM: "10"})), expect=sched, warns="asks for no GPU"),
    Case("memory and percentage together: gpumem wins, as in HAMi",
         pod(ctr("c", {MEM: "1000", PCT: "10"})),
         expect=edits(sched, res(0, "limits", {GPU: "1"})), warns="wins"),
    Case("memory and percentage split across limits and requests",
         pod(ctr("c", {MEM: "1000"}, {PCT: "10"})),
         expect=edits(sched, res(0, "limits", {GPU: "1", PCT: "10"}),
                      res(0, "requests", {GPU: "1"})), warns="wins"),
    Case("unknown node policy, HAMi spelling: binpack, as HAMi reads it",
         pod(ctr("c", {GPU: "1"}), annotations={"hami.io/node-scheduler-policy": "random"}),
         expect=edits(sched, whole()), warns="binpack"),
    Case("priority outside 0/1 is handed over as low",
         pod(ctr("c", {GPU: "1", MEM: "10", PRIO: "5"})), expect=sched, warns="as 1 (low)"),
    Case("numa-bind not a boolean: no binding, as in HAMi",
         pod(ctr("c", {GPU: "1"}), annotations={"nvidia.com/numa-bind": "maybe"}),
         expect=edits(sched, whole()), warns="not a boolean"),
    Case("HAMi's policy chain and weights are accepted",
         pod(ctr("c", {GPU: "1", MEM: "10"}),
             annotations={"hami.io/gpu-scheduler-policy": "mutex, spread, numa",
                          "hami.io/device-scoring-weights": "slot=1,core=1,memory=3"}),
         expect=sched),
    Case("vgpu-mode mig: admitted, told it waits",
         pod(ctr("c", {GPU: "1", MEM: "10"}), annotations={"nvidia.com/vgpu-mode": "mig"}),
         expect=sched, warns="MIG"),
    # --- the operator's HAMi settings --------------------------------------------------
    Case("runtimeClassName given to a GPU pod that names none",
         pod(ctr("c", {GPU: "1", MEM: "10"})), config=Config(
             runtime_class_name="nvidia", quota=PLAIN.quota),
         expect=edits(sched, lambda p: p["spec"].update(runtimeClassName="nvidia"))),
    Case("overwriteEnv hides the GPUs from the containers that ask for none",
         pod(ctr("c", {GPU: "1", MEM: "10"}), ctr("log"),
             ctr("own", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])),
         config=Config(overwrite_env=True, quota=PLAIN.quota),
         expect=edits(sched, lambda p: p["spec"]["containers"][1].update(
             env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]))),
    Case("defaultGpuNum 2 is the count a container with memory gets",
         pod(ctr("c", {MEM: "10"})), config=Config(default_gpu_num=2, quota=PLAIN.quota),
         expect=edits(sched, res(0, "limits", {GPU: "2"}))),
    Case("defaultGpuNum 0: memory without a count is no GPU",
         pod(ctr("c", {MEM: "10"})), config=Config(default_gpu_num=0, quota=PLAIN.quota),
         expect=sched, warns="defaultGpuNum is 0"),
    # --- denials -----------------------------------------------------------------------
    # HAMi's webhook refuses a percentage outside 0-100, in these words.
    Case("percentage 150", pod(ctr("c", {GPU: "1", PCT: "150"})), denied="between 0 and 100"),
    Case("cores negative", pod(ctr("c", {CORES: "-5"})), denied="must not be negative"),
    Case("device-scoring-weights HAMi refuses",
         pod(ctr("c", {GPU: "1"}), annotations={"hami.io/device-scoring-weights": "slot=1"}),
         denied="hami.io/device-scoring-weights"),
    Case("more GPUs than any node has", pod(ctr("c", {GPU: "5"})), gpus=HOMOGENEOUS,
         denied="no node has more than 4"),
    Case("more GPUs than any node has, in an init container",
         pod(ctr("c", {GPU: "1"}), init=(ctr("i", {GPU: "5"}),)), gpus=MIXED,
         denied="asks for 5 GPUs (nvidia.com/gpu) but no node has more than 4"),
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
    warnings = " ".join(response.get("warnings", ()))
    if case.warns is None:
        assert not warnings
    else:
        assert case.warns in warnings
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
