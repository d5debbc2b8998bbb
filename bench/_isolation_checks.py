"""The checks of ``bench/isolation.py``, one function each: GPU UUID, arguments and the
baseline TFLOP/s in, one JSON-able dict out."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import _isolation_node as nodes

PAIR = ((50, 4096), (50, 8192))


def _ratio(result: dict[str, Any], baseline: float) -> None:
    if isinstance(result.get("tflops"), float) and baseline:
        result["ratio_vs_unlimited"] = round(result["tflops"] / baseline, 3)


def unlimited(gpu: str, args: Any) -> dict[str, Any]:
    env = nodes.child_env({"NVIDIA_VISIBLE_DEVICES": gpu}, None)
    return nodes.run(env, "measure", args.gpumem, args.seconds)


def mps(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    node = nodes.Node("mps", gpu, mps_control=args.mps_control)
    try:
        envs = node.grant("one", args.gpumem, args.gpucores)
        result = nodes.run(nodes.child_env(envs, None), "measure", args.gpumem, args.seconds)
        _ratio(result, baseline)
        return {**result, **node.live(), "env": envs}
    finally:
        node.close()


def pair(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """Two pods' answers at once, timed over the same window."""
    node = nodes.Node("mps", gpu, mps_control=args.mps_control)
    try:
        grants = [node.grant(f"pair-{i}", mem, cores) for i, (cores, mem) in enumerate(PAIR)]
        start_at = time.time() + args.settle  # both CUDA contexts up before the window
        procs = [nodes.spawn(nodes.child_env(envs, None), "measure", mem, args.seconds,
                             start_at)
                 for envs, (_, mem) in zip(grants, PAIR, strict=True)]
        results = [nodes.finish(p) for p in procs]
        out: dict[str, Any] = {**node.live()}
        for i, (result, envs) in enumerate(zip(results, grants, strict=True)):
            _ratio(result, baseline)
            out[f"client{i}"] = {**result, "env": envs}
        flops = [r.get("tflops") for r in results]
        if all(isinstance(f, float) for f in flops):
            a, b = (float(f) for f in flops)  # type: ignore[arg-type]
            out["sum_ratio_vs_unlimited"] = round((a + b) / baseline, 3) if baseline else None
            out["split"] = round(min(a, b) / max(a, b), 3) if max(a, b) else None
        return out
    finally:
        node.close()


def fault(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """One client faults while another runs; then is the daemon, and a new client, fine?"""
    node = nodes.Node("mps", gpu, mps_control=args.mps_control)
    try:
        runner = node.grant("runner", 4096, 50)
        faulty = node.grant("faulty", 4096, 50)
        # The fault lands a context start-up after the runner's window opens, inside it.
        seconds = 2 * args.seconds
        running = nodes.spawn(nodes.child_env(runner, None), "measure", 4096, seconds,
                        time.time() + args.settle)
        faulting = nodes.spawn(nodes.child_env(faulty, None), "fault", args.settle)
        fault_result = nodes.finish(faulting)
        runner_result = nodes.finish(running)
        _ratio(runner_result, baseline)
        answers = node.daemon_answers()
        node.release("runner", "faulty")  # done: their room is the new client's
        fresh_env = node.grant("after", 4096, 50)
        fresh = nodes.run(nodes.child_env(fresh_env, None), "measure", 2048, 2)
        return {"faulting_client": fault_result, "other_client": runner_result,
                "daemon_answers_after": answers, "new_client_after": fresh, **node.live()}
    finally:
        node.close()


def restart(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """The agent replaced while its client runs."""
    node = nodes.Node("mps", gpu, mps_control=args.mps_control)
    try:
        before = node.live()
        envs = node.grant("long", args.gpumem, args.gpucores)
        # The replacement (seconds on this machine) falls inside the client's timed window.
        seconds = 3 * args.seconds
        proc = nodes.spawn(nodes.child_env(envs, None), "measure", args.gpumem, seconds,
                           time.time() + args.settle)
        time.sleep(args.settle + args.seconds / 2)
        took = node.restart_agent()
        after = node.live()
        result = nodes.finish(proc)
        _ratio(result, baseline)
        daemon = after.get("daemon", {})
        return {"before": before, "after": after, "restart_seconds": round(took, 2),
                "adopted": daemon.get("state") == "running" and daemon.get("starts") == 0,
                "client": result}
    finally:
        node.close()


def watchdog(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """Real NVML, real processes; pods and their cgroup files written as the kubelet's."""
    from prometheus_client import CollectorRegistry, generate_latest  # noqa: PLC0415

    from vgpu.config import from_mapping  # noqa: PLC0415
    from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415
    from vgpu_nodeagent.isolation.watchdog import Watchdog  # noqa: PLC0415

    interval = 1.0
    config = from_mapping({"isolation": {"watchdog": {"intervalSeconds": interval}}})
    over, over_cg = nodes.fake_pod("over", gpu, 1024)
    within, within_cg = nodes.fake_pod("within", gpu, 8192)
    proc_root = tempfile.mkdtemp(prefix="vgpu-proc-")
    discovery = NvmlDiscovery()
    dog = Watchdog(config.isolation.watchdog, discovery, lambda: [over, within], None,
                   schedulers=config.vgpu_schedulers, proc_root=proc_root)
    env = nodes.child_env({"NVIDIA_VISIBLE_DEVICES": gpu}, None)
    hold_seconds = 12
    procs = [nodes.spawn(env, "hold", mib, hold_seconds) for mib in (3072, 1024)]
    for proc, cgroup in zip(procs, (over_cg, within_cg), strict=True):
        os.makedirs(os.path.join(proc_root, str(proc.pid)))
        with open(os.path.join(proc_root, str(proc.pid), "cgroup"), "w", encoding="utf-8") as f:
            f.write(cgroup)
    held = [nodes.first_line(p) for p in procs]
    ready = time.time()
    stop = threading.Event()
    thread = threading.Thread(target=dog.run, args=(stop,), daemon=True)
    thread.start()
    seen_after: float | None = None
    deadline = time.monotonic() + 3 * interval + 2
    while time.monotonic() < deadline and seen_after is None:
        if dog.breaches:
            seen_after = time.time() - ready
        time.sleep(0.05)
    time.sleep(interval * 1.5)  # one more round: the within-grant one must stay quiet
    stop.set()
    thread.join(5)
    registry = CollectorRegistry()

    class _Families:
        def collect(self) -> Any:
            return dog.families()

    registry.register(_Families())
    text = generate_latest(registry).decode()
    for p in procs:
        p.kill()
        p.communicate()
    discovery.close()
    last = dog.last
    return {"interval_seconds": interval, "held": held,
            "breach_seen_after_seconds": None if seen_after is None else round(seen_after, 2),
            "breaches": [{"pod": u.pod, "used_mib": u.used_mib, "granted_mib": u.granted_mib}
                         for u in last.breaches],
            "uses": [{"pod": u.pod, "used_mib": u.used_mib, "granted_mib": u.granted_mib}
                     for u in last.uses],
            "breach_count": dog.breaches, "foreign": len(last.foreign),
            "metrics": [line for line in text.splitlines()
                        if line.startswith(("vgpu_container_memory_used_bytes",
                                            "vgpu_watchdog_breaches_total"))]}


def hami_core(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """HAMi-core as a container gets it: the answer's environment, the library preloaded,
    CUDA_REDIRECT naming it (inside a container it sits at /usr/local/vgpu/libvgpu.so,
    where HAMi-core's dlsym looks by default)."""
    os.makedirs("/tmp/vgpulock", exist_ok=True)
    node = nodes.Node("hami-core", gpu, hami_lib=args.hami_lib)
    out: dict[str, Any] = {}
    try:
        out.update(node.live())
        # HAMi-core charges a launch its grid size: many small kernels, beside big GEMMs.
        plain = nodes.run(nodes.child_env({"NVIDIA_VISIBLE_DEVICES": gpu}, None),
                          "launches", args.seconds)
        out["unlimited_launches_per_second"] = plain.get("launches_per_second")
        for policy in ("default", "force"):
            envs = node.grant(f"hami-{policy}", args.gpumem, args.gpucores)
            extra = {"CUDA_REDIRECT": args.hami_lib}
            if policy == "force":
                extra["GPU_CORE_UTILIZATION_POLICY"] = "force"
            result = nodes.run(nodes.child_env(envs, args.hami_lib, extra), "measure",
                               args.gpumem, args.seconds)
            _ratio(result, baseline)
            small = nodes.run(nodes.child_env(envs, args.hami_lib, extra), "launches",
                              args.seconds)
            rate, base_rate = small.get("launches_per_second"), plain.get(
                "launches_per_second")
            if isinstance(rate, int) and isinstance(base_rate, int) and base_rate:
                result["small_kernels_ratio_vs_unlimited"] = round(rate / base_rate, 3)
            result["small_kernels"] = small
            out[policy] = {**result, "env": envs | extra}
        return out
    finally:
        node.close()


RUN: dict[str, Callable[[str, Any, float], dict[str, Any]]] = {
    "mps": mps, "pair": pair, "fault": fault, "restart": restart, "watchdog": watchdog,
    "hami-core": hami_core}


def _between(value: Any, low: float, high: float) -> bool:
    return isinstance(value, float) and low <= value <= high


def targets(out: dict[str, Any]) -> dict[str, bool]:
    """The issues' targets, for the checks that ran."""
    found: dict[str, bool] = {}
    if "mps" in out:
        found["mps_past_limit_refused"] = out["mps"].get("past_limit_refused") is True
        found["mps_throughput_25_to_45_percent"] = _between(
            out["mps"].get("ratio_vs_unlimited"), 0.25, 0.45)
    if "pair" in out:
        clients = [out["pair"].get(f"client{i}", {}) for i in range(2)]
        found["pair_caps_hold"] = all(c.get("past_limit_refused") is True for c in clients)
        found["pair_split_even_within_15_percent"] = _between(
            out["pair"].get("split"), 0.85, 1.0)
    if "restart" in out:
        client = out["restart"].get("client", {})
        found["restart_adopted_and_client_finished"] = (
            out["restart"].get("adopted") is True and isinstance(client.get("tflops"), float))
    if "watchdog" in out:
        dog = out["watchdog"]
        seen = dog.get("breach_seen_after_seconds")
        found["watchdog_breach_within_one_interval"] = (
            isinstance(seen, float) and seen <= dog.get("interval_seconds", 0) + 0.5
            and [b.get("pod") for b in dog.get("breaches", [])] == ["default/over"])
    if "hami-core" in out:
        for policy in ("default", "force"):
            found[f"hami_{policy}_past_limit_refused"] = (
                out["hami-core"].get(policy, {}).get("past_limit_refused") is True)
    return found
