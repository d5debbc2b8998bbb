"""The full stack with one node in ``mps`` mode: webhook, scheduler and node agents as
processes on a real API server; the MPS control daemon is the recording stand-in.

* ``mps``: labelled ``vgpu.io/isolation: mps``; its agent runs the daemon stand-in;
* ``plain``: the cluster default (``hami-core`` without the library: nothing enforces).

A pod that requires isolation lands on ``mps``, its container gets the MPS answer, and
its pod, the node inventories and the daemon's command log say so.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import gpu_container, gpu_pod, node_named
from tests.e2e.harness import FullStack, Gpu, NodeSpec
from vgpu.codecs import decode_inventory

A100 = Gpu("NVIDIA A100-SXM4-40GB", 40960)
FAKE_CONTROL = Path(__file__).resolve().parents[1] / "support" / "fake_mps_control.py"


@pytest.fixture(scope="module")
def mps_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mps")


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, mps_root: Path) -> Iterator[FullStack]:
    nodes = [NodeSpec("mps", (A100,), labels={"vgpu.io/isolation": "mps"}),
             NodeSpec("plain", (A100,))]
    config = {"isolation": {"mps": {"controlCommand": f"{sys.executable} {FAKE_CONTROL}",
                                    "pipeDir": str(mps_root / "pipe"),
                                    "logDir": str(mps_root / "log")}}}
    with FullStack(control_plane, nodes, config=config) as running:
        yield running


def modes(stack: FullStack, node: str) -> set[str]:
    obj = stack.cluster.get("nodes", node_named(stack, node).name)
    raw = obj["metadata"]["annotations"]["vgpu.io/node-gpus"]
    return {d.isolation for d in decode_inventory(raw).devices}


def test_a_pod_requiring_isolation_gets_mps(stack: FullStack, mps_root: Path) -> None:
    ns = stack.namespace(f"mps-{uuid.uuid4().hex[:6]}")
    assert modes(stack, "mps") == {"mps"}
    assert modes(stack, "plain") == {"none"}
    stack.create_pod(ns, gpu_pod("infer", gpu_container(gpu=1, gpumem=4096, gpucores=30),
                                 annotations={"vgpu.io/require-isolation": "true"}))
    pod = stack.wait_allocated(ns, "infer")
    assert pod["spec"]["nodeName"] == node_named(stack, "mps").name
    annotations = pod["metadata"]["annotations"]
    assert annotations["vgpu.io/isolation"] == "mps"
    assert json.loads(annotations["vgpu.io/allocation"])["isolation"]["enforced"] is True
    grant = stack.admission(pod).containers["main"]
    assert grant.envs["CUDA_MPS_PIPE_DIRECTORY"] == str(mps_root / "pipe")
    assert grant.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert grant.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert not any(k.startswith("CUDA_DEVICE_") for k in grant.envs)
    log = (mps_root / "log" / "commands.jsonl").read_text().splitlines()
    assert [json.loads(line)["argv"] for line in log].count(["-d"]) == 1
    stack.clear(ns)
