"""``vgpu why`` and ``vgpu inspect`` show MPS users (vgpu_kubectl.mps_user_view) and what each
node's isolation holds: the uid a pod runs as, the MPS GPUs that serve another, whom each
MPS GPU serves, and per node the enforced summary, ``auto``'s choice and a refused library."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, NODE_GPUS
from vgpu.config import Config, from_mapping
from vgpu.node_isolation import NodeIsolation
from vgpu_kubectl import inspect, inspect_render
from vgpu_kubectl.why import Cluster, build
from vgpu_kubectl.why_render import render_text

NOW = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
HEARTBEAT = NOW.timestamp()


def gpus(node: str, count: int, mode: str) -> tuple[Any, ...]:
    return tuple(dataclasses.replace(d, isolation=mode)
                 for d in builders.devices(node, count, memory_mib=16384))


def node(name: str, count: int, mode: str, isolation: NodeIsolation | None = None,
         **labels: str) -> dict[str, Any]:
    devices = gpus(name, count, mode)
    obj = builders.node(name, devices, heartbeat=HEARTBEAT, labels=labels)
    obj["metadata"]["annotations"][NODE_GPUS] = codecs.encode_inventory(
        codecs.NodeInventory(devices, isolation=isolation))
    return obj


def placed(name: str, node_name: str, uuid: str, uid: int | None,
           recorded: bool = True) -> dict[str, Any]:
    spec = {} if uid is None else {"securityContext": {"runAsUser": uid}}
    p = builders.pod(name, [builders.container(gpumem=4000, cores=20)], **spec)
    a = codecs.Assignment(node_name, {"main": (codecs.GrantedDevice(uuid, 4000, 20),)},
                          run_as_user=uid if recorded else None)
    p["metadata"]["annotations"].update({ASSIGNMENT: codecs.encode_assignment(a),
                                         BIND_PHASE: "success"})
    p["spec"]["nodeName"] = node_name
    p["status"] = {"phase": "Running"}
    return p


# "mps": GPU 0 serves uid 1000, GPU 1 a pod of unknown uid; "own": hami-core, any users.
NODES = [node("mps", 2, "mps"), node("own", 1, "hami-core")]
PLACED = [placed("train", "mps", "GPU-mps-0", 1000), placed("solo", "mps", "GPU-mps-1", None),
          placed("other", "own", "GPU-own-0", 3000)]


def pending(uid: int | None, count: int = 1, **spec: Any) -> dict[str, Any]:
    if uid is not None:
        spec["securityContext"] = {"runAsUser": uid}
    return builders.pod("job", [builders.container(gpus=count, gpumem=1000, cores=10)], **spec)


def why(pod: dict[str, Any], nodes: list[dict[str, Any]] = NODES,
        config: Config | None = None, placed: list[dict[str, Any]] = PLACED) -> Any:
    return build("default", pod["metadata"]["name"],
                 Cluster(pod, nodes=nodes, pods=[*placed, pod]),
                 config=config or Config(), now=NOW)


def test_a_pending_pod_of_another_uid_is_told_which_gpus_serve_another_user() -> None:
    report = why(pending(2000, count=2))
    assert report.mps_user == (
        "uid 2000 (the pod's securityContext.runAsUser): on a GPU in mps or mps-hami-core it "
        "shares the GPU only with pods of uid 2000; 2 GPU(s) on 1 node(s) serve another user")
    fit = next(f for f in report.closest if f.node == "mps")
    assert not fit.fits and "GPU 0 (NVIDIA A100-SXM4-40GB), GPU 1 (NVIDIA A100-SXM4-40GB) " \
        "serve(s) MPS clients of another user (runAsUser)" in fit.short[0]
    assert "MPS user:" in render_text(report)


def test_its_own_uid_is_no_bar_and_unknown_is_a_user_of_its_own() -> None:
    same = why(pending(1000))
    assert "1 GPU(s) on 1 node(s) serve another user" in (same.mps_user or "")  # GPU 1
    assert next(f for f in same.closest if f.node == "mps").fits
    unknown = why(pending(None))
    assert (unknown.mps_user or "").startswith(
        "unknown: no runAsUser on the pod or its GPU container (main); the image's USER "
        "decides, which vgpu cannot see: on a GPU in mps or mps-hami-core it shares the GPU "
        "with no other pod")
    assert why(pending(1000), config=from_mapping(
        {"isolation": {"mps": {"placeByUser": False}}})).mps_user is None


def test_no_mps_gpu_no_line() -> None:
    assert why(pending(2000), nodes=[node("own", 1, "hami-core")]).mps_user is None


def test_a_placed_pod_on_mps_shows_its_recorded_uid() -> None:
    report = why(PLACED[0])
    assert report.mps_user == ("uid 1000 (recorded at its placement): on a GPU in mps or "
                               "mps-hami-core it shares the GPU only with pods of uid 1000")
    assert why(PLACED[2]).mps_user is None  # hami-core


def test_inspect_shows_whom_each_mps_gpu_serves_and_what_each_node_holds() -> None:
    nodes = [node("mps", 2, "mps", NodeIsolation("mps-hami-core", auto=True,
                                                 problem="HAMi-core library refused: x")),
             node("own", 1, "hami-core", NodeIsolation("hami-core", auto=True), **{
                 "vgpu.io/isolation": "auto"})]
    report = inspect.build(nodes, PLACED, now=NOW, heartbeat_expiry_seconds=180,
                           scheduler_name="vgpu-scheduler")
    rows = {g.device.uuid: g for n in report.nodes for g in n.gpus}
    assert [rows[u].mps_user for u in ("GPU-mps-0", "GPU-mps-1", "GPU-own-0")] == [
        "uid 1000", "default/solo", None]
    table = inspect_render.render_table(report)
    assert "mps (uid 1000)" in table and "mps (default/solo)" in table
    assert ("  mps: mps (auto chose mps-hami-core): memory held, compute held, a GPU is one "
            "fault domain, one uid per GPU (MPS); HAMi-core library refused: x") in table
    assert ("  own: hami-core (auto chose hami-core): memory held, compute not held, faults "
            "kept to each pod") in table
    body = json.loads(inspect_render.render_json(report))
    assert body["nodes"][0]["gpus"][0]["mpsUser"] == "uid 1000"
    assert body["nodes"][0]["isolation"] == {
        "enforced": "memory held, compute held, a GPU is one fault domain, one uid per GPU "
                    "(MPS)", "configured": "mps-hami-core", "auto": True,
        "problem": "HAMi-core library refused: x"}
    assert body["nodes"][1]["gpus"][0]["mpsUser"] is None


def test_an_auto_node_configured_for_mps_reporting_hami_core_still_counts_as_mps() -> None:
    # Its daemon is down: the GPU reports hami-core, its next pods are MPS clients again.
    down = node("down", 1, "hami-core", NodeIsolation("mps", auto=True,
                                                      problem="MPS control daemon not running"),
                **{"vgpu.io/isolation": "auto"})
    pod = placed("train", "down", "GPU-down-0", 1000)
    report = inspect.build([down], [pod], now=NOW, heartbeat_expiry_seconds=180,
                           scheduler_name="vgpu-scheduler")
    assert report.nodes[0].gpus[0].mps_user == "uid 1000"
    assert why(pending(2000), nodes=[down], placed=[pod]).mps_user is not None
    # Without the node's word, auto may be MPS: the safe reading.
    unsaid = node("down", 1, "hami-core", **{"vgpu.io/isolation": "auto"})
    assert why(pending(2000), nodes=[unsaid], placed=[pod]).mps_user is not None
