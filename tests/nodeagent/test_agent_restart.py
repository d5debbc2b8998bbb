"""A node agent restarted while a multi-container pod is being allocated.

The kubelet allocates a pod's GPU containers one Allocate call each and never asks again
for one it was answered for; Allocate names no container, so the agent tells them apart
by what it already served. These tests restart the agent between two containers (same
device-plugin folder, same cluster, the kubelet still waiting) and check that the new
process carries on with the next container and closes the pod's phase.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tests.nodeagent.conftest import GPU0, GPU1, GPU2, NODE, Env, envs, phase, wait_phase
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.allocation.progress import ProgressFile
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options


def restart(env: Env, registrations: int) -> NodeAgent:
    """Stop the agent and start a new one on the same folder, cluster and kubelet."""
    env.agent.stop()
    agent = NodeAgent(env.config, FakeDiscovery(env.devices_file), env.cluster,
                      Options(node_name=NODE, metrics_port=None, poll_seconds=0.05,
                              watch_timeout=0.2))
    agent.start()
    env.agent = agent
    env.kubelet.wait_registration(registrations)
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    return agent


def test_restart_between_containers_resumes_with_the_next_one(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    # Same device count for both containers: only the agent's memory of what it served
    # tells the second request from a repeat of the first.
    bind_assigned(env.cluster, pod("p", [container("a", 1, mem=1000),
                                         container("b", 1, mem=2000)]),
                  NODE, {"a": slices((GPU0, 1000, 0)), "b": slices((GPU1, 2000, 0))})
    _, first = env.kubelet.admit_container(1)
    assert envs(first)["NVIDIA_VISIBLE_DEVICES"] == GPU0
    agent = restart(env, 2)
    try:
        _, second = env.kubelet.admit_container(1)
        assert envs(second)["NVIDIA_VISIBLE_DEVICES"] == GPU1
        assert envs(second)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
        wait_phase(env, "p", "success")
    finally:
        agent.stop()


def test_restart_after_the_last_container_still_closes_the_phase(make_env: Any) -> None:
    """Killed after answering the last container but before its phase patch: the kubelet
    will not call again, so the new agent must write ``success`` by itself."""
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    env.agent.phases = None          # the patch never leaves the old process
    env.agent.allocator._phases = None
    bind_assigned(env.cluster, pod("q", [container("a", 1), container("b", 2)]),
                  NODE, {"a": slices((GPU0, 100, 0)),
                         "b": slices((GPU1, 100, 0), (GPU2, 100, 0))})
    env.kubelet.admit_pod([1, 2])
    assert phase(env, "q")[0] == "allocating"
    agent = restart(env, 2)
    try:
        wait_phase(env, "q", "success")
    finally:
        agent.stop()


def test_progress_file_keeps_only_pods_still_allocating(tmp_path: Any) -> None:
    path = str(tmp_path / "allocations.json")
    progress = ProgressFile(path)
    progress.save({"uid-1": {"a"}, "uid-2": {"x", "y"}})
    assert ProgressFile(path).load() == {"uid-1": {"a"}, "uid-2": {"x", "y"}}
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle) == {"version": 1,
                                     "pods": {"uid-1": ["a"], "uid-2": ["x", "y"]}}
    progress.save({})
    assert ProgressFile(path).load() == {}


def test_unreadable_progress_file_is_ignored_with_a_warning(tmp_path: Any) -> None:
    path = str(tmp_path / "allocations.json")
    for content in ("{not json", json.dumps({"version": 9, "pods": {}}),
                    json.dumps({"version": 1, "pods": {"u": "a"}})):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
        assert ProgressFile(path).load() == {}
    os.unlink(path)
    assert ProgressFile(path).load() == {}
