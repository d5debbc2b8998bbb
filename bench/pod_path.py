"""The path of one GPU pod through each component: how many times control moves from one
of vgpu's modules to another, and how often it comes back to a module it already left.

    python bench/pod_path.py [--show]

Admission (the webhook's parse, decide and answer on one AdmissionReview), one scheduling
attempt and its binding (the real scheduler on the in-memory cluster, informers synced
before the trace starts), and the node agent's Allocate (the device-plugin servicer, called
in-process, with the agent's pod watch already holding the bound pod). Each is traced with
``sys.setprofile``: the module that runs changes on each call into, or return to, a
function of another product module; a *hop* is such a change, a *revisit* an entry into a
module the path had already left. ``--show`` prints each path. The last line is JSON.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from _support import ROOT

sys.path.insert(0, str(ROOT))

from vgpu import annotations as ann
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import NodeInventory, assignment_of, decode_inventory
from vgpu.config import Config
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options
from vgpu_nodeagent.proto import api_pb2
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_webhook import review
from vgpu_webhook.gpus import ClusterGpus
from vgpu_webhook.mutate import decide

PRODUCT = ("vgpu", "vgpu_webhook", "vgpu_scheduler", "vgpu_nodeagent")
#: Modules that only log, and the in-memory cluster that stands in for the API server: the
#: path is vgpu's own code.
QUIET = ("vgpu.logs", "vgpu.cluster.memory", "vgpu.cluster.resources", "vgpu.cluster.history")


def _product(name: str) -> bool:
    return name.split(".", 1)[0] in PRODUCT and not name.startswith(QUIET)


@contextmanager
def traced(path: list[str]) -> Iterator[None]:
    """Record in ``path`` the product module running after each call and return."""
    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
        elif event == "return":
            caller = frame.f_back
            name = caller.f_globals.get("__name__", "") if caller is not None else ""
        else:
            return
        if _product(name) and (not path or path[-1] != name):
            path.append(name)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def summary(path: list[str]) -> dict[str, Any]:
    visits = Counter(path)
    top = visits.most_common(5)
    return {"hops": max(len(path) - 1, 0), "modules": len(visits),
            "revisits": sum(v - 1 for v in visits.values()),
            "most_visited": dict(top)}


def _run(fn: Callable[[], Any]) -> list[str]:
    path: list[str] = []
    with traced(path):
        fn()
    return path


# -- the three components --------------------------------------------------------------

def _gpu_pod() -> dict[str, Any]:
    return builders.pod("p", [builders.container(gpus=1, gpumem=3000, cores=30)])


def admission() -> tuple[list[str], dict[str, Any]]:

    config = Config()
    gpus = ClusterGpus.from_inventories([NodeInventory(builders.devices("n1", 2))])
    pod = _gpu_pod()
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u1", "operation": "CREATE", "namespace": "default",
                                   "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                   "object": pod}}).encode()
    out: dict[str, Any] = {}

    def once() -> None:
        parsed = review.parse(body)
        out["answer"] = review.answer(parsed.uid, decide(parsed.request, config, gpus))

    decide(review.parse(body).request, config, gpus)  # imports and caches warm
    path = _run(once)
    response = json.loads(out["answer"])["response"]
    patch = json.loads(base64.b64decode(response.get("patch", "W10=")))
    return path, _apply(pod, patch)


def _apply(pod: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSONPatch ops the webhook writes (add and replace) applied to the pod."""
    doc = json.loads(json.dumps(pod))
    for op in patch:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = doc
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), op["value"])
        else:
            target[last] = op["value"]
    return doc


def scheduling(pod: dict[str, Any]) -> tuple[list[str], MemoryCluster, dict[str, Any]]:

    cluster = MemoryCluster()
    node = builders.node("n1", builders.devices("n1", 2), heartbeat=time.time())
    cluster.create("nodes", node)
    scheduler = Scheduler(Config(), cluster)
    warm = dict(_gpu_pod(), metadata={"name": "warm", "namespace": "default"})
    cluster.create("pods", warm)
    scheduler.run_until_idle()
    cluster.create("pods", pod)
    scheduler.pump()  # the pod watch delivers it: informers are not the attempt
    path = _run(scheduler.schedule_one)
    return path, cluster, node


def allocation(cluster: MemoryCluster, node: dict[str, Any]) -> list[str]:

    bound = cluster.get("pods", "p", "default")
    assignment = assignment_of(bound)
    assert assignment is not None, "the scheduler did not bind the pod"
    ((gpu,),) = assignment.containers.values()
    with tempfile.TemporaryDirectory() as folder:
        devices = os.path.join(folder, "gpus.json")
        inventory = decode_inventory(node["metadata"]["annotations"][ann.NODE_GPUS])
        with open(devices, "w", encoding="utf-8") as handle:
            json.dump({"devices": [
                {"uuid": g.uuid, "index": g.index, "model": g.model,
                 "memory_mib": g.memory_mib, "numa": g.numa} for g in inventory.devices]},
                handle)
        base = Config()
        config = dataclasses.replace(base, nodeagent=dataclasses.replace(
            base.nodeagent, device_plugin_dir=folder, pod_resources_socket="",
            allocate_wait_seconds=1.0))
        agent = NodeAgent(config, FakeDiscovery(devices), cluster,
                          Options(node_name="n1", metrics_port=0, metrics_host="127.0.0.1",
                                  poll_seconds=0.05, watch_timeout=0.2))
        agent.start()
        try:
            deadline = time.monotonic() + 10
            while not agent.inflight.current() and time.monotonic() < deadline:
                time.sleep(0.01)
            ids = [d.id for d in agent.devices.get()[1] if d.id.startswith(gpu.uuid)][:1]
            request = api_pb2.AllocateRequest(container_requests=[
                api_pb2.ContainerAllocateRequest(devices_ids=ids)])
            return _run(lambda: agent.service.Allocate(request, None))
        finally:
            agent.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", action="store_true", help="print each path")
    args = parser.parse_args(argv)
    webhook_path, pod = admission()
    scheduler_path, cluster, node = scheduling(pod)
    agent_path = allocation(cluster, node)
    paths = {"webhook": webhook_path, "scheduler": scheduler_path, "nodeagent": agent_path}
    if args.show:
        for name, path in paths.items():
            print(f"== {name}")
            print("\n".join(f"  {m}" for m in path))
    figures = {name: summary(path) for name, path in paths.items()}
    for name, figure in figures.items():
        top = ", ".join(f"{m} {v}" for m, v in figure["most_visited"].items())
        print(f"{name:10} hops {figure['hops']:4}  modules {figure['modules']:3}  "
              f"revisits {figure['revisits']:4}  most visited: {top}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
