"""A real node by itself (tests/controlplane/real_node.py): what it runs, and that stopping
it leaves nothing of it on the host.

The full stack on a real node is test_real_node.py; this module checks the fixture's own
promises: the kubelet and runtime are the ones built from Debian, a plain pod runs and its
log is readable, and neither its mounts nor the kernel settings the kubelet insists on
ever reach the host; after stop, every process of the node is gone, with its cgroups,
folder and Node.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import kubernetes.client
import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.images import BUSYBOX
from tests.controlplane.node_daemons import KUBELET_SYSCTLS
from tests.controlplane.real_node import RealNode
from tests.e2e.harness_processes import wait_until


def sysctls() -> dict[str, str]:
    return {name: Path(f"/proc/sys/{name.replace('.', '/')}").read_text().strip()
            for name in KUBELET_SYSCTLS}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_real_node_runs_a_pod_and_stopping_it_leaves_nothing_behind(
        control_plane: ControlPlane, namespace: str,
        core_v1: kubernetes.client.CoreV1Api) -> None:
    host_settings = sysctls()
    node = RealNode(control_plane, f"rn-{uuid.uuid4().hex[:8]}")
    with node:
        info = core_v1.read_node(node.name).status.node_info
        assert info.kubelet_version == "v1.20.2"
        assert info.container_runtime_version.startswith("containerd://1.6.")
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input_text=f"""
apiVersion: v1
kind: Pod
metadata: {{name: hello}}
spec:
  nodeName: {node.name}
  hostNetwork: true
  containers:
  - name: main
    image: {BUSYBOX}
    imagePullPolicy: Never
    command: [sh, -c, "echo hello from $(cat /proc/1/cmdline | tr '\\\\0' ' '); sleep 3600"]
""")
        wait_until("the pod running", lambda: core_v1.read_namespaced_pod(
            "hello", namespace).status.phase == "Running", 60, interval=0.3,
            context=node.logs)
        logs = wait_until("its log", lambda: control_plane.kubectl(
            "logs", "-n", namespace, "hello").stdout, 30, interval=0.3)
        assert logs.startswith("hello from sh -c")

        members = node.namespace.members()
        commands = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in members
                    if alive(pid)}
        assert {"containerd", "kubelet", "containerd-shim", "sleep"} <= commands, commands
        # The node's mounts and kernel settings live in its namespace only.
        assert str(node.layout.root / "containerd") not in Path("/proc/self/mountinfo").read_text()
        assert sysctls() == host_settings
        core_v1.delete_namespaced_pod("hello", namespace, grace_period_seconds=0)

    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in members) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in members if alive(pid)] == []
    assert node.leftover_cgroups == []
    assert not node.layout.root.exists()
    assert sysctls() == host_settings
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core_v1.read_node(node.name)
    assert gone.value.status == 404
