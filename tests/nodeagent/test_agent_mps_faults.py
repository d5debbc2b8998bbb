"""Faults reported to every pod they hit, on the real agent: NVML played by its stand-in
(an XID on a GPU), the MPS control daemon by its own (servers and their clients), the
kernel log and ``/proc`` by files; the pods in a memory cluster, bound as the scheduler
binds them and running (container IDs in their status, as the kubelet writes them)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.nodeagent.conftest import NODE, small_config, wait_until
from tests.nodeagent.fake_pynvml import FakeNvml, Gpu
from tests.nodeagent.mps_support import commands, mps_settings
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, from_mapping
from vgpu_nodeagent.devices.nvml import NvmlDiscovery

GPU_A, GPU_B = "GPU-a", "GPU-b"
XID_LINE = ("NVRM: Xid (PCI:0000:3b:00): 31, pid={pid}, name=python3, Ch 00000008, intr "
            "10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x0_dead0000")


def config(root: Path, **mps: Any) -> Config:
    base = from_mapping({"isolation": {"mode": "mps", "watchdog": {"intervalSeconds": 0},
                                       "mps": mps_settings(
                                           root, rosterSeconds=0.3, faultWindowSeconds=5,
                                           kernelLog=str(root / "kmsg"), **mps)}})
    small = small_config()
    return Config(**{**base.__dict__, "nodeagent": small.nodeagent})


class Node:
    """Two GPUs; MPS server 900 of user 1000; running pods and their client processes."""

    def __init__(self, make_env: Any, root: Path, **mps: Any) -> None:
        self.root = root
        (root / "log").mkdir()
        (root / "kmsg").write_text("")
        (root / "log" / "control.log").write_text("")
        self.proc = root / "proc"
        self.proc.mkdir()
        self.gpus = [Gpu(GPU_A, bus_id="00000000:3B:00.0"),
                     Gpu(GPU_B, bus_id="00000000:86:00.0")]
        self.nvml = FakeNvml(self.gpus)
        self.servers: dict[str, Any] = {}
        self.proc_entry(900, user=1000)
        cluster = MemoryCluster()
        cluster.create("nodes", {"metadata": {"name": NODE}})
        self.env = make_env(config(root, **mps), cluster=cluster,
                            discovery=NvmlDiscovery(self.nvml), proc_root=str(self.proc))
        self.cluster = cluster

    def proc_entry(self, pid: int, *, uid: str = "", cid: str = "",
                   user: int | None = None) -> None:
        folder = self.proc / str(pid)
        folder.mkdir()
        if uid:
            (folder / "cgroup").write_text(f"0::/kubepods/burstable/pod{uid}/{cid}\n")
        if user is not None:
            (folder / "status").write_text(f"Name:\tnvidia-cuda-mps\nUid:\t{user}\t{user}\n")

    def run_pod(self, name: str, namespace: str, gpu: str, pid: int) -> str:
        bound = bind_assigned(self.cluster, pod(name, [container("main", 1, mem=1024,
                                                                 cores=30)], namespace=namespace),
                              NODE, {"main": slices((gpu, 1024, 30))})
        uid = bound["metadata"]["uid"]
        cid = f"{pid:064x}"
        self.cluster.patch_status("pods", name, {"phase": "Running", "containerStatuses": [
            {"name": "main", "containerID": f"containerd://{cid}"}]}, namespace)
        self.proc_entry(pid, uid=uid, cid=cid)
        self.servers.setdefault("900", {"uid": 1000, "clients": []})["clients"].append(pid)
        self.write_servers()
        return str(uid)

    def write_servers(self) -> None:
        (self.root / "log" / "servers.json").write_text(json.dumps(self.servers))

    def roster_sees(self, pids: set[int]) -> None:
        faults = self.env.agent.mps_faults

        def seen() -> bool:
            rosters = faults._rosters  # what the agent read last
            return bool(rosters) and {c.pid for _, c in rosters[-1].clients()} == pids
        wait_until(seen, what=f"roster {pids}")

    def kernel(self, text: str) -> None:
        with (self.root / "kmsg").open("a") as handle:
            handle.write(f"4,{len(text)},123,-;{text}\n")

    def warnings(self, name: str, namespace: str) -> list[str]:
        return [e.message for e in self.cluster.events(name=name)
                if e.reason == "SharedGPUFault" and e.namespace == namespace]

    def metrics(self) -> str:
        port = self.env.agent.metrics_server.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())


@pytest.fixture
def node(make_env: Any, tmp_path: Path) -> Node:
    return Node(make_env, tmp_path)


def test_an_xid_is_reported_to_every_pod_whose_client_it_ended_naming_the_faulting_one(
        node: Node) -> None:
    node.env.kubelet.wait_registration()
    node.run_pod("faulty", "team-a", GPU_A, 1001)
    node.run_pod("neighbour", "team-b", GPU_A, 1002)
    node.run_pod("elsewhere", "team-c", GPU_B, 1003)    # same server, another GPU
    node.roster_sees({1001, 1002, 1003})
    # The fault: the driver names the process in the kernel log; NVML names the GPU.
    node.kernel(XID_LINE.format(pid=1001))
    # The clients it ended are gone by the time the agent asks again; only the roster read
    # before the fault knows them.
    node.servers["900"]["clients"] = [1003]
    node.write_servers()
    node.nvml.push_xid(node.gpus[0], 31)
    wait_until(lambda: node.warnings("neighbour", "team-b") != [], what="neighbour warned")
    (told,) = node.warnings("neighbour", "team-b")
    assert "GPU GPU-a raised XID 31 under MPS server 900" in told
    assert "It came from pod team-a/faulty, container main (process 1001" in told
    (own,) = node.warnings("faulty", "team-a")
    assert "It came from this pod's container main" in own
    assert node.warnings("elsewhere", "team-c") == []    # MPS kept it to GPU-a
    text = node.metrics()
    assert 'vgpu_mps_faults_total{cause="xid"} 1.0' in text
    assert "vgpu_mps_fault_pods_total 2.0" in text
    # The GPU stays healthy: 31 is an application's XID.
    assert all(d.healthy for d in node.env.agent.inventory().devices)
    # The XIDs that follow one fault (43: the channel stopped) are the same fault.
    node.nvml.push_xid(node.gpus[0], 43)
    wait_until(lambda: node.nvml.events == type(node.nvml.events)(), what="event read")
    node.env.agent.mps_faults.step()
    assert len(node.warnings("neighbour", "team-b")) == 1
    assert 'vgpu_mps_faults_total{cause="xid"} 1.0' in node.metrics()


def test_a_server_the_fault_took_is_started_again_for_its_user(node: Node) -> None:
    node.env.kubelet.wait_registration()
    node.run_pod("p1", "team-a", GPU_A, 1001)
    node.run_pod("p2", "team-b", GPU_A, 1002)
    node.roster_sees({1001, 1002})
    node.servers.clear()   # the server went with its clients
    node.write_servers()
    node.nvml.push_xid(node.gpus[0], 31)
    wait_until(lambda: any(c["stdin"].strip() == "start_server -uid 1000"
                           for c in commands(node.root)), what="server started")
    wait_until(lambda: "vgpu_mps_servers_started_total 1.0" in node.metrics(),
               what="counted")
    # Without a kernel log line, the culprit is not named, and each pod is told so.
    (told,) = node.warnings("p2", "team-b")
    assert "Which client faulted is not known (no Xid line of the kernel's matches it)" in told


def test_a_server_that_exits_with_an_error_is_reported_to_its_clients(node: Node) -> None:
    node.env.kubelet.wait_registration()
    node.run_pod("p1", "team-a", GPU_A, 1001)
    node.run_pod("p2", "team-b", GPU_B, 1002)
    node.roster_sees({1001, 1002})
    with (node.root / "log" / "control.log").open("a") as handle:
        handle.write("[2026-11-28 10:00:00.000 Control 77] Server 900 exited with status 0\n")
    node.env.agent.mps_faults.step()
    assert node.warnings("p1", "team-a") == []   # a clean exit ends nothing
    with (node.root / "log" / "control.log").open("a") as handle:
        handle.write("[2026-11-28 10:00:01.000 Control 77] Server encountered a fatal "
                     "exception. Shutting down\n"
                     "[2026-11-28 10:00:01.002 Control 77] Server 900 exited with status 1\n")
    wait_until(lambda: node.warnings("p2", "team-b") != [], what="p2 warned")
    (told,) = node.warnings("p1", "team-a")
    assert re.search(r"MPS server 900 exited with an error.*\(1 other pod too\)", told)
    assert 'vgpu_mps_faults_total{cause="server-exit"} 1.0' in node.metrics()


def test_an_xid_on_a_gpu_without_mps_clients_reports_nothing(node: Node) -> None:
    node.env.kubelet.wait_registration()
    node.run_pod("p1", "team-a", GPU_B, 1001)
    node.roster_sees({1001})
    node.nvml.push_xid(node.gpus[0], 31)
    wait_until(lambda: not node.nvml.events, what="event read")
    node.env.agent.mps_faults.step()
    assert node.warnings("p1", "team-a") == []
    assert 'vgpu_mps_faults_total{cause="xid"} 0.0' in node.metrics()
