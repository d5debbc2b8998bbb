"""`vgpu inspect` on a real API server, over a known set of nodes and pods.

Other e2e tests share this API server, so the checks look at this test's nodes only
(their names are unique) and at pods by their unique namespace.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.ops_support import vgpu
from tests.ops.cluster_fixture import gpu, node, pod
from vgpu.codecs import encode_heartbeat


@pytest.fixture
def created_nodes(core_v1: kubernetes.client.CoreV1Api) -> Iterator[list[str]]:
    """Names of Nodes a test creates, deleted after it: GPU nodes with a live heartbeat
    left behind would take the full-stack tests' pods."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(kubernetes.client.ApiException):
            core_v1.delete_node(name)


def test_inspect_reports_the_known_allocation(control_plane: ControlPlane,
                                              core_v1: kubernetes.client.CoreV1Api,
                                              namespace: str, created_nodes: list[str]) -> None:
    tag = uuid.uuid4().hex[:6]
    a, b = f"inspect-a-{tag}", f"inspect-b-{tag}"
    a0, a1, b0 = f"GPU-{tag}-a0", f"GPU-{tag}-a1", f"GPU-{tag}-b0"
    now = encode_heartbeat(dt.datetime.now(dt.UTC))
    nodes = [node(a, [gpu(a0, 0, "NVIDIA A100-SXM4-40GB", 40960),
                      gpu(a1, 1, "NVIDIA A100-SXM4-40GB", 40960)], heartbeat=now),
             node(b, [gpu(b0, 0, "Tesla T4", 15360, healthy=False)], heartbeat=now),
             node(f"inspect-bad-{tag}", None, raw="{not json")]
    for n in nodes:
        core_v1.create_node(n)
        created_nodes.append(n["metadata"]["name"])

    pods = [
        pod("train", a, {"worker": [(a0, 20000, 50), (a1, 10000, 30)]}),
        pod("infer", a, {"main": [(a0, 4096, 10)]}, bind_phase="allocating"),
        pod("t4", b, {"main": [(b0, 8000, 0)]}),
        pod("done", a, {"main": [(a1, 30000, 70)]}, phase="Succeeded"),
        pod("garbled", b, None, raw='{"version": 1}'),
    ]
    for p in pods:
        p["metadata"]["namespace"] = namespace
        p["spec"]["automountServiceAccountToken"] = False
        for c in p["spec"]["containers"]:
            c["image"] = "busybox"
        phase = p.pop("status")["phase"]
        core_v1.create_namespaced_pod(namespace, p)
        if phase == "Succeeded":
            # No kubelet here: the finished pod's phase is written through pods/status.
            core_v1.patch_namespaced_pod_status(p["metadata"]["name"], namespace,
                                                {"status": {"phase": phase}})

    proc = vgpu("inspect", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    mine = {n["name"]: n for n in out["nodes"] if n["name"] in (a, b)}
    assert sorted(mine) == [a, b]
    gpus: dict[str, Any] = {g["uuid"]: g for n in mine.values() for g in n["gpus"]}
    assert (gpus[a0]["memoryAllocatedMiB"], gpus[a0]["coresAllocated"], gpus[a0]["tasks"]) == (
        24096, 60, 2)
    assert (gpus[a1]["memoryAllocatedMiB"], gpus[a1]["tasks"]) == (10000, 1)  # "done" ended
    assert (gpus[b0]["memoryAllocatedMiB"], gpus[b0]["healthy"]) == (8000, False)
    assert not mine[a]["stale"]
    assert [(p["namespace"], p["name"], p["bindPhase"]) for p in gpus[a0]["pods"]] == [
        (namespace, "infer", "allocating"), (namespace, "train", "success")]
    objects = {w["object"] for w in out["warnings"]}
    assert f"node inspect-bad-{tag}" in objects and f"pod {namespace}/garbled" in objects

    # As a kubectl plugin: kubectl finds kubectl-vgpu on PATH and hands it the rest; the
    # plugin reads the same KUBECONFIG.
    plugin_dir = Path(sys.executable).parent
    assert (plugin_dir / "kubectl-vgpu").is_file(), "install the project (pip install .)"
    env = {**os.environ, "PATH": f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(control_plane.kubeconfig)}
    plugin = subprocess.run([str(control_plane.kubectl_path), "vgpu", "inspect", "-o", "json"],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert plugin.returncode == 0, plugin.stderr
    assert {n["name"] for n in json.loads(plugin.stdout)["nodes"]} >= {a, b}

    table = vgpu("inspect", "--kubeconfig", str(control_plane.kubeconfig), "-d")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(a))
    assert lines[row].split()[1:5] == ["0", "NVIDIA", "A100-SXM4-40GB", "24096/40960"]
    assert lines[row + 1].strip().startswith(f"{namespace}/infer  container=main")
    assert lines[0].split()[:3] == ["NODE", "GPU", "MODEL"]
    assert any(line.startswith("TOTAL") for line in lines)
