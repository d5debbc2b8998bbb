"""``vgpu why`` on the links between a pod's GPUs: how they were chosen, why they fail."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, GPU_TOPOLOGY
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_kubectl.why import Cluster, Report, build
from vgpu_kubectl.why_render import render_json, render_text

NOW = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
PAIRS, PAIR_LINKS = builders.shaped_devices("pairs", 4, "nvlink-pairs")
LINKED = builders.node("pairs", PAIRS, links=PAIR_LINKS, heartbeat=NOW.timestamp())
UNLINKED = builders.node("old", builders.devices("old", 4), heartbeat=NOW.timestamp())


def on(node: str, name: str, gpus: list[int], *, count: int | None = None,
       annotations: dict[str, str] | None = None) -> dict[str, Any]:
    p = builders.pod(name, [builders.container(gpus=count or len(gpus), cores=100)],
                     annotations=annotations)
    if gpus:
        a = codecs.Assignment(node, {"main": tuple(
            codecs.GrantedDevice(f"GPU-{node}-{i}", 40960, 100) for i in gpus)})
        p["metadata"]["annotations"].update({ASSIGNMENT: codecs.encode_assignment(a),
                                             BIND_PHASE: "success"})
        p["spec"]["nodeName"] = node
        p["status"] = {"phase": "Running"}
    return p


def why(pod: dict[str, Any], nodes: list[Obj], pods: Sequence[Obj] = ()) -> Report:
    return build("default", pod["metadata"]["name"], Cluster(pod, (), nodes, [pod, *pods]),
                 config=Config(), now=NOW)


def test_a_placed_pod_on_the_fastest_pair() -> None:
    report = why(on("pairs", "tp", [0, 1]), [LINKED])
    assert report.links == ("main: GPUs 0,1 linked by NV12, the fastest pairs has for 2 GPUs",)
    assert "  Links:        main: GPUs 0,1 linked by NV12" in render_text(report)
    assert json.loads(render_json(report))["links"] == list(report.links)


def test_a_placed_pod_on_a_slower_pair_says_so() -> None:
    report = why(on("pairs", "tp", [1, 3]), [LINKED])
    assert report.links == ("main: GPUs 1,3 linked by SYS; pairs's fastest for 2 GPUs is "
                            "NV12, which was taken or did not fit when it was placed",)


def test_unknown_links_and_one_gpu() -> None:
    assert why(on("old", "tp", [0, 1]), [UNLINKED]).links == (
        "the links of old's GPUs are unknown (its node agent publishes none): the GPUs "
        "were chosen without them",)
    assert why(on("pairs", "one", [2]), [LINKED]).links == ()


def test_a_pending_pod_that_requires_the_fastest_links() -> None:
    pending = on("pairs", "tp", [], count=2, annotations={GPU_TOPOLOGY: "required"})
    busy = [on("pairs", "a", [0]), on("pairs", "b", [2])]
    report = why(pending, [LINKED], busy)
    (fit,) = report.closest
    assert not fit.fits
    assert fit.short == (
        "container main: requires the fastest links (vgpu.io/gpu-topology: required): the "
        "node's fastest 2 are linked by NV12, the fastest free now by SYS",)
    # Preferred: it fits (on the slower pair), nothing is short.
    preferred = on("pairs", "tp", [], count=2)
    assert why(preferred, [LINKED], busy).closest[0].fits
    # Required on a node whose links are unknown.
    report = why(pending, [UNLINKED])
    assert report.closest[0].short == (
        "container main: requires the fastest links (vgpu.io/gpu-topology: required), and "
        "this node's links are unknown",)
