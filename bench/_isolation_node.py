"""One node for ``bench/isolation.py``: the real node agent on NVML with an in-memory cluster
and the kubelet stand-in (tests/support), and the CUDA children that run with the Allocate
answers it gives.

A grant goes the normal way: a pod asking for ``gpumem``/``gpucores`` is bound with an
assignment on GPU 0 as the scheduler would bind it, the kubelet stand-in asks
GetPreferredAllocation and Allocate, and the answer's environment is what the child gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid as uuids
from typing import Any

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_isolation_child.py")


class Node:
    """The agent in ``mode`` on GPU ``gpu_uuid``; grants through the kubelet's path."""

    def __init__(self, mode: str, gpu_uuid: str, *, hami_lib: str | None = None,
                 mps_control: str = "nvidia-cuda-mps-control",
                 hami_bundle: str | None = None) -> None:
        from tests.support.kubelet import KubeletStandIn  # noqa: PLC0415
        from vgpu.cluster.memory import MemoryCluster  # noqa: PLC0415
        from vgpu.config import from_mapping  # noqa: PLC0415

        self.mode, self.gpu = mode, gpu_uuid
        self.root = tempfile.mkdtemp(prefix=f"vgpu-isolation-{mode}-")
        self.folder = tempfile.mkdtemp(prefix="vi", dir="/tmp")  # short: unix sockets
        self.cache_dir = os.path.join(self.root, "cache")
        self.config = from_mapping({
            "isolation": {"mode": mode, "watchdog": {"intervalSeconds": 0},
                          "mps": {"pipeDir": os.path.join(self.root, "pipe"),
                                  "logDir": os.path.join(self.root, "log"),
                                  "controlCommand": mps_control}},
            # hamiCoreBundle: the agent installs that bundle's build at hamiCorePath and
            # checks it; without one, it checks the library at hamiCorePath as is.
            "nodeagent": {"devicePluginDir": self.folder, "podResourcesSocket": "",
                          "hamiCorePath": hami_lib or "", "sharedCacheDir": self.cache_dir,
                          "hamiCoreBundle": hami_bundle or ""}})
        self.cluster = MemoryCluster()
        # Allocatable as a kubelet reports it, for the scheduler of the `users` check.
        room = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        self.cluster.create("nodes", {"metadata": {"name": "bench"},
                                      "status": {"allocatable": room, "capacity": room}})
        self.kubelet = KubeletStandIn(self.folder)
        self.kubelet.start()
        self.registrations = 0
        self.agent = self._start_agent()

    def _start_agent(self) -> Any:
        from vgpu_nodeagent.agent import NodeAgent  # noqa: PLC0415
        from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415
        from vgpu_nodeagent.options import Options  # noqa: PLC0415

        agent = NodeAgent(self.config, NvmlDiscovery(), self.cluster,
                          Options(node_name="bench"))
        agent.start()
        self.registrations += 1
        self.kubelet.wait_registration(self.registrations, timeout=30)
        self.kubelet.devices().wait_for(lambda d: len(d) > 0)
        return agent

    def grant(self, name: str, gpumem: int, gpucores: int) -> dict[str, str]:
        """Bind a pod asking for one vGPU of ``gpumem``/``gpucores``; its Allocate envs."""
        from tests.support.pods import bind_assigned, container, pod, slices  # noqa: PLC0415

        bind_assigned(self.cluster, pod(name, [container("main", 1, mem=gpumem,
                                                         cores=gpucores)]),
                      "bench", {"main": slices((self.gpu, gpumem, gpucores))})
        (response,) = self.kubelet.admit_pod([1])
        envs = dict(response.envs)
        cache = envs.get("CUDA_DEVICE_MEMORY_SHARED_CACHE")
        if cache:  # the container's mount makes this folder; on a bare host, we do
            os.makedirs(os.path.dirname(cache), exist_ok=True)
        return envs

    def release(self, *names: str) -> None:
        """Delete these pods (their children are done), and wait until the agent's ledger
        no longer counts them: it refuses a grant past what the GPU has (issue 36)."""
        before = self.agent.allocator.ledger.served().get(self.gpu)
        for name in names:
            self.cluster.delete("pods", name, "default")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = self.agent.allocator.ledger.served().get(self.gpu)
            if now is None or (before is not None and now.tasks <= before.tasks - len(names)):
                return
            time.sleep(0.02)

    def library(self) -> dict[str, Any]:
        """HAMi-core's library as the agent installed and checked it."""
        lib = self.agent.backend.library
        return {"ok": lib.ok, "path": lib.path, "source": lib.source, "ref": lib.ref,
                "cuda": lib.cuda, "sha256": lib.sha256, "detail": lib.detail}

    def schedule(self, name: str, uid: int, gpumem: int, gpucores: int) -> dict[str, Any]:
        """A pod running as ``uid`` placed by vgpu's own scheduler on this node (its agent's
        inventory, as published), then allocated through the kubelet's path; where it
        went, or why it did not."""
        from vgpu import builders  # noqa: PLC0415
        from vgpu.codecs import assignment_of  # noqa: PLC0415
        from vgpu_scheduler.host.scheduler import Scheduler  # noqa: PLC0415

        if getattr(self, "scheduler", None) is None:
            deadline = time.monotonic() + 15
            while "vgpu.io/node-heartbeat" not in self.cluster.get("nodes", "bench")[
                    "metadata"].get("annotations", {}) and time.monotonic() < deadline:
                time.sleep(0.05)  # the agent's first inventory write
            self.scheduler = Scheduler(self.config, self.cluster)
        self.cluster.create("pods", builders.pod(name, [builders.container(
            gpus=1, gpumem=gpumem, cores=gpucores)], securityContext={"runAsUser": uid}))
        self.scheduler.run_until_idle()
        obj = self.cluster.get("pods", name, "default")
        assignment = assignment_of(obj)
        if assignment is None:
            events = [e.message for e in self.cluster.events(name=name)
                      if e.reason == "FailedScheduling"]
            return {"pod": name, "uid": uid, "gpu": None, "why": events[-1] if events else None}
        (response,) = self.kubelet.admit_pod([1])
        return {"pod": name, "uid": uid, "gpu": sorted(assignment.gpu_ids)[0],
                "recorded_uid": assignment.run_as_user,
                "pipe": dict(response.envs).get("CUDA_MPS_PIPE_DIRECTORY")}

    def live(self) -> dict[str, Any]:
        live = self.agent.backend.current()
        out: dict[str, Any] = {"mode": live.mode, "enforced_by_agent": live.enforced,
                               "problem": live.problem}
        daemon = self.agent.backend.daemon
        if daemon is not None:
            status = daemon.status()
            out["daemon"] = {"state": status.state, "starts": status.starts,
                             "restarts": status.restarts, "error": status.error}
        return out

    def restart_agent(self) -> float:
        """Stop the agent and start a new one on the same folders, as a pod replacement
        does; seconds until the new one registered."""
        began = time.monotonic()
        self.agent.stop()
        self.agent = self._start_agent()
        return time.monotonic() - began

    def daemon_answers(self) -> bool | None:
        daemon = self.agent.backend.daemon
        return None if daemon is None else bool(daemon.alive())

    def close(self) -> None:
        daemon = self.agent.backend.daemon
        if daemon is not None:
            daemon.command("quit")  # this check started it
        self.agent.stop()
        self.kubelet.stop()


def child_env(envs: dict[str, str], preload: str | None,
              extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDA_MPS", "CUDA_DEV", "GPU_CORE", "LD_PRELOAD"))}
    env.update(envs)
    env["CUDA_VISIBLE_DEVICES"] = envs["NVIDIA_VISIBLE_DEVICES"]
    env["PYTHONUNBUFFERED"] = "1"
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra or {})
    return env


def spawn(env: dict[str, str], *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, CHILD, *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {"error": f"no answer within {timeout:g}s", "stderr": err.strip()[-400:]}
    lines = out.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": f"exit {proc.returncode}: {err.strip()[-400:]}"}
    if proc.returncode != 0 or "error" in result:
        result.setdefault("exit", proc.returncode)
        result["stderr"] = err.strip()[-300:]
    return result


def run(env: dict[str, str], *args: object, timeout: float = 120) -> dict[str, Any]:
    return finish(spawn(env, *args), timeout)


def first_line(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any] | None:
    """The first JSON line a ``hold`` child prints (its memory is then held)."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        try:
            value: dict[str, Any] = json.loads(line)
            return value
        except ValueError:
            continue
    return None


def fake_pod(name: str, gpu: str, granted_mib: int) -> tuple[dict[str, Any], str]:
    """A pod as the watch shows it once running (uid, containerID) with a grant on ``gpu``,
    and its container's cgroup line (cgroup v2, cgroupfs driver)."""
    from vgpu.codecs import Assignment, GrantedDevice, encode_assignment  # noqa: PLC0415

    uid = str(uuids.uuid4())
    container_id = uuids.uuid4().hex + uuids.uuid4().hex
    text = encode_assignment(Assignment(node="bench", containers={
        "main": (GrantedDevice(uuid=gpu, memory_mib=granted_mib, cores=0),)}))
    pod = {"metadata": {"name": name, "namespace": "default", "uid": uid,
                        "annotations": {"vgpu.io/assignment": text}},
           "spec": {"nodeName": "bench", "schedulerName": "vgpu-scheduler",
                    "containers": [{"name": "main"}]},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "main", "containerID": f"containerd://{container_id}"}]}}
    return pod, f"0::/kubepods/burstable/pod{uid}/{container_id}\n"
