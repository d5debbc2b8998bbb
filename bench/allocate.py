"""Allocate latency and memory of the node agent, over the real unix-socket gRPC.

    python bench/allocate.py [--rounds 400] [--gpus 8] [--split 10] [--pods 100]

The agent runs as its own process on the fake backend with an in-memory cluster holding
``--pods`` pods on the node (``--pods - 1`` running, plus the one being allocated). This
process is the kubelet (tests/support/kubelet.py) and the scheduler's pacing: each round
the agent's side binds one new pod in ``bind-phase: allocating`` (cycling through four
shapes: one GPU, two GPUs, two containers, init + app container), waits until the agent's
pod watch has it, and the kubelet admits it as it would (GetPreferredAllocation, then one
Allocate per container). The round's pod is deleted once the agent marked it ``success``,
so the node keeps ``--pods`` pods.

Figures are client-side (what the kubelet waits for), in milliseconds; the agent's memory
is the RSS of its process. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support import pods as P
from tests.support.kubelet import KubeletStandIn
from vgpu import logs
from vgpu.annotations import BIND_PHASE, PHASE_SUCCESS
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options
from vgpu_nodeagent.proto import api_pb2

SHAPES: list[tuple[str, list[int], list[int]]] = [
    ("one-gpu", [1], []),
    ("two-gpus", [2], []),
    ("two-containers", [1, 1], []),
    ("init-and-app", [1], [1]),
]


def uuid(i: int) -> str:
    return f"GPU-{i:08x}-0000-4000-8000-{i:012x}"


# -- the agent's process ---------------------------------------------------------------------

def agent_main(args: argparse.Namespace) -> int:
    logs.setup()
    folder = args.dir
    gpus = [uuid(i) for i in range(args.gpus)]
    devices = os.path.join(folder, "gpus.json")
    with open(devices, "w", encoding="utf-8") as handle:
        json.dump({"devices": [{"uuid": g, "index": i, "model": "NVIDIA A100-SXM4-80GB",
                                "memory_mib": 81920, "numa": i // 4}
                               for i, g in enumerate(gpus)]}, handle)
    config = Config(device_split_count=args.split)
    config = dataclasses.replace(config, nodeagent=dataclasses.replace(
        config.nodeagent, device_plugin_dir=folder))
    cluster = MemoryCluster()
    node = "bench-node"
    cluster.create("nodes", {"metadata": {"name": node}})
    for i in range(args.pods - 1):  # the node's running pods
        P.bind_assigned(cluster, P.pod(f"running-{i}", [P.container("c", 1, mem=1000)]), node,
                        {"c": P.slices((gpus[i % len(gpus)], 1000, 10))})
        cluster.patch_annotations("pods", f"running-{i}", {BIND_PHASE: PHASE_SUCCESS},
                                  namespace="default")
    agent = NodeAgent(config, FakeDiscovery(devices), cluster,
                      Options(node_name=node, metrics_port=None))
    agent.start()
    assert agent.inflight is not None and agent.phases is not None
    out = sys.stdout

    def say(**fields: Any) -> None:
        out.write(json.dumps(fields) + "\n")
        out.flush()

    say(event="ready")
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "bind":
            i, shape = command["round"], command["shape"]
            _, counts, init_counts = next(s for s in SHAPES if s[0] == shape)
            names = [f"c{k}" for k in range(len(counts))]
            init_names = [f"i{k}" for k in range(len(init_counts))]
            assigned = {}
            offset = i
            for name, count in zip(names + init_names, counts + init_counts, strict=True):
                assigned[name] = P.slices(*[(gpus[(offset + k) % len(gpus)], 2000, 20)
                                            for k in range(count)])
                offset += count
            P.bind_assigned(
                cluster,
                P.pod(f"round-{i}", [P.container(n, c) for n, c in zip(names, counts,
                                                                       strict=True)],
                      init_containers=[P.container(n, c) for n, c in zip(
                          init_names, init_counts, strict=True)]),
                node, assigned, when=dt.datetime.now(dt.UTC))
            while not agent.inflight.current():  # the agent's watch has it
                time.sleep(0.0005)
            say(event="bound", round=i)
        elif command["cmd"] == "finish":
            name = f"round-{command['round']}"
            agent.phases.wait_idle(10)
            phase = cluster.get("pods", name, "default")["metadata"]["annotations"].get(
                BIND_PHASE)
            cluster.delete("pods", name, "default")
            while agent.inflight.current():
                time.sleep(0.0005)
            say(event="finished", phase=phase, pods_on_node=len(agent.informer.items())
                if agent.informer else 0)
        elif command["cmd"] == "import-kube":
            # The real cluster adapter's import cost, measured after the rounds. In a pod it
            # talks to the API server without importing the kubernetes package.
            import vgpu.kube.adapter  # noqa: F401, PLC0415
            say(event="imported")
        elif command["cmd"] == "stop":
            break
    agent.stop()
    return 0


# -- the kubelet's process -------------------------------------------------------------------

def rss_mib(pid: int) -> tuple[float, float]:
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--split", type=int, default=10)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        return agent_main(args)

    folder = tempfile.mkdtemp(prefix="vb", dir="/tmp")
    kubelet = KubeletStandIn(folder)
    kubelet.start()
    env = dict(os.environ, VGPU_LOG_FORMAT="json", VGPU_LOG_LEVEL="info",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(folder, "agent.log"), "w", encoding="utf-8") as log:
        agent = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--agent", "--dir", folder,
             "--gpus", str(args.gpus), "--split", str(args.split), "--pods", str(args.pods)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        assert agent.stdin is not None and agent.stdout is not None

        def ask(**command: Any) -> dict[str, Any]:
            assert agent.stdin is not None and agent.stdout is not None
            agent.stdin.write(json.dumps(command) + "\n")
            agent.stdin.flush()
            reply: dict[str, Any] = json.loads(agent.stdout.readline())
            return reply

        try:
            ready = json.loads(agent.stdout.readline())
            assert ready["event"] == "ready", ready
            kubelet.wait_registration(timeout=30)
            kubelet.devices().wait_for(lambda d: len(d) == args.gpus * args.split, 30)
            rss_start, _ = rss_mib(agent.pid)
            # The transport alone: a no-op RPC over the same socket.
            noop_ms = []
            stub = kubelet.plugin()
            for _ in range(300):
                t = time.perf_counter()
                stub.PreStartContainer(api_pb2.PreStartContainerRequest(), timeout=5)
                noop_ms.append((time.perf_counter() - t) * 1000)

            allocate_ms: list[float] = []
            preferred_ms: list[float] = []
            admit_ms: list[float] = []
            failures = 0
            for i in range(args.rounds):
                shape, counts, init_counts = SHAPES[i % len(SHAPES)]
                ask(cmd="bind", round=i, shape=shape)
                reusable: list[str] = []
                used: list[str] = []
                started = time.perf_counter()
                for count, init in [(c, True) for c in init_counts] + [(c, False)
                                                                        for c in counts]:
                    if len(reusable) >= count:  # the kubelet reuses init containers' devices
                        ids = reusable[:count]
                    else:
                        available = [x for x in kubelet.devices().healthy_ids()
                                     if x not in kubelet.allocated]
                        t = time.perf_counter()
                        ids = kubelet.preferred(available, [], count)
                        preferred_ms.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    kubelet.allocate(ids)
                    allocate_ms.append((time.perf_counter() - t) * 1000)
                    kubelet.allocated.update(ids)
                    used += ids
                    reusable = list(dict.fromkeys(reusable + ids)) if init else [
                        x for x in reusable if x not in ids]
                admit_ms.append((time.perf_counter() - started) * 1000)
                done = ask(cmd="finish", round=i)
                failures += done["phase"] != "success"
                kubelet.release(used)
            rss_end, peak = rss_mib(agent.pid)
            ask(cmd="import-kube")
            rss_kube, _ = rss_mib(agent.pid)
            agent.stdin.write(json.dumps({"cmd": "stop"}) + "\n")
            agent.stdin.flush()
            agent.wait(timeout=30)
        finally:
            if agent.poll() is None:
                agent.kill()
            kubelet.stop()
    shutil.rmtree(folder, ignore_errors=True)

    result = {
        "bench": "allocate",
        "gpus": args.gpus, "split": args.split, "pods_on_node": args.pods,
        "rounds": args.rounds, "allocate_calls": len(allocate_ms),
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "allocate_p50_ms": round(statistics.median(allocate_ms), 3),
        "allocate_p99_ms": round(percentile(allocate_ms, 0.99), 3),
        "allocate_max_ms": round(max(allocate_ms), 3),
        "noop_rpc_p50_ms": round(statistics.median(noop_ms), 3),
        "noop_rpc_p99_ms": round(percentile(noop_ms, 0.99), 3),
        "preferred_p50_ms": round(statistics.median(preferred_ms), 3),
        "preferred_p99_ms": round(percentile(preferred_ms, 0.99), 3),
        "pod_admission_p50_ms": round(statistics.median(admit_ms), 3),
        "failed_pods": failures,
        "agent_rss_mib_start": round(rss_start, 1),
        "agent_rss_mib_end": round(rss_end, 1),
        "agent_peak_rss_mib": round(peak, 1),
        "agent_rss_mib_with_cluster_adapter": round(rss_kube, 1),
        "target_p99_ms": 5.0, "target_rss_mib": 60.0,
        "p99_ratio_to_target": round(percentile(allocate_ms, 0.99) / 5.0, 3),
        "rss_ratio_to_target": round(rss_end / 60.0, 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
