"""``vgpu why``'s report, built from API objects alone (vgpu_kubectl/why.py and
vgpu_kubectl/closest.py).

Table-driven over the states a pod can be in, plus the example in docs/operator-guide.md
(``kubectl vgpu why POD``), which is this file's output: the test fails when the page's
block and the rendering part ways.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, BIND_REASON, BIND_TIME
from vgpu.cluster.events import event_object
from vgpu.config import Config
from vgpu.pod_history import (
    ADMISSION,
    ALLOCATION,
    Allocation,
    Isolation,
    encode_admission,
    encode_allocation,
)
from vgpu_kubectl.why import Cluster, build
from vgpu_kubectl.why_render import render_json, render_text

NOW = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def assigned(name: str, node: str, uuid: str, mib: int, cores: int, *, phase: str,
             **extra: str) -> dict[str, Any]:
    p = builders.pod(name, [builders.container(gpumem=mib, cores=cores)], namespace="ml")
    a = codecs.Assignment(node, {"main": (codecs.GrantedDevice(uuid, mib, cores),)})
    p["metadata"]["annotations"].update({
        ASSIGNMENT: codecs.encode_assignment(a), BIND_PHASE: phase,
        BIND_TIME: codecs.encode_heartbeat(at(-60)), **extra})
    p["spec"]["nodeName"] = node
    p["status"] = {"phase": "Running"}
    return p


NODES = [builders.node("gpu-a", builders.devices("gpu-a", 2), heartbeat=NOW.timestamp()),
         builders.node("gpu-b", builders.devices("gpu-b", 1, model="Tesla T4",
                                                 memory_mib=15360),
                       heartbeat=NOW.timestamp() - 600)]
BUSY = [assigned("train", "gpu-a", "GPU-gpu-a-0", 30000, 50, phase="success"),
        assigned("infer", "gpu-a", "GPU-gpu-a-1", 32000, 20, phase="success")]
CHANGES = ['spec.schedulerName: "vgpu-scheduler"',
           'containers[main].resources.limits[nvidia.com/gpu]: "1"']


def waiting(**spec: Any) -> dict[str, Any]:
    p = builders.pod("notebook", [builders.container(gpumem=12000, cores=30)],
                     namespace="ml", annotations={ADMISSION: encode_admission(CHANGES)},
                     **spec)
    p["metadata"]["uid"] = "u-1"
    return p


def failed_event(pod: dict[str, Any], message: str, seconds: float) -> dict[str, Any]:
    return event_object(pod, "Warning", "FailedScheduling", message, "vgpu-scheduler",
                        now=at(seconds))


SUMMARY = "0/2 nodes are available: 1 insufficient GPU memory, 1 node agent not reporting."


def example() -> str:
    pod = waiting()
    return render_text(build("ml", "notebook", Cluster(
        pod, [failed_event(pod, SUMMARY, -5)], NODES, [*BUSY, pod]), config=Config(),
        now=NOW))


def test_the_documented_example_is_this_rendering() -> None:
    block = re.search(r"<!-- why-example -->\n```\n(.*?)```", GUIDE.read_text(), re.S)
    assert block, "docs/operator-guide.md lost its `kubectl vgpu why` example"
    assert block.group(1).rstrip("\n") == example()


def _allocation() -> str:
    return encode_allocation(Allocation(at(-59), "gpu-a", ("main",),
                                        Isolation("hami-core", True, "libvgpu.so preloaded"),
                                        0.812))


CASES: list[tuple[str, Any, str, str]] = [
    ("missing", None, "not-found", "no denial"),
    ("gated", waiting(schedulingGates=[{"name": "quota"}]), "gated", "quota"),
    ("queued", waiting(), "queued", "no attempt has failed yet"),
    ("not ours", builders.pod("x", namespace="ml", scheduler_name="default-scheduler"),
     "not-ours", "default-scheduler"),
    ("allocating", assigned("p", "gpu-a", "GPU-gpu-a-0", 1000, 0, phase="allocating"),
     "allocating", "waiting for the kubelet"),
    ("allocation failed", assigned("p", "gpu-a", "GPU-gpu-a-0", 1000, 0, phase="failed",
                                   **{BIND_REASON: "no container asks for 2"}),
     "allocation-failed", "no container asks for 2"),
    ("running", assigned("p", "gpu-a", "GPU-gpu-a-0", 1000, 0, phase="success",
                         **{ALLOCATION: _allocation()}), "running", "running on gpu-a"),
]


@pytest.mark.parametrize(("case", "pod", "state", "said"), CASES, ids=[c[0] for c in CASES])
def test_states(case: str, pod: Any, state: str, said: str) -> None:
    report = build("ml", "p", Cluster(pod, [], NODES, [*BUSY]), config=Config(), now=NOW)
    assert report.state == state and said in report.summary, case
    assert json.loads(render_json(report))["state"] == state


def test_denied_pod_says_why_from_the_webhooks_event() -> None:
    ghost = {"kind": "Pod", "metadata": {"namespace": "ml", "name": "greedy"}}
    denial = event_object(ghost, "Warning", "FailedAdmission",
                          "container 'main': nvidia.com/gpucores is 150", "vgpu-webhook",
                          now=at(-1))
    report = build("ml", "greedy", Cluster(None, [denial]), config=Config(), now=NOW)
    assert report.state == "denied" and "gpucores is 150" in report.summary


def test_running_pod_shows_allocate_time_and_isolation() -> None:
    pod = assigned("p", "gpu-a", "GPU-gpu-a-0", 1000, 0, phase="success",
                   **{ALLOCATION: _allocation()})
    text = render_text(build("ml", "p", Cluster(pod, [], NODES), config=Config(), now=NOW))
    assert "0.812 s after binding" in text and "Isolation:    hami-core" in text
    assert "GPU 0 GPU-gpu-a-0 (NVIDIA A100-SXM4-40GB) 1000 MiB" in text


def test_closest_nodes_rank_by_fit_and_say_what_is_short() -> None:
    pod = waiting()
    report = build("ml", "notebook", Cluster(pod, [], NODES, [*BUSY]), config=Config(),
                   now=NOW)
    assert [f.node for f in report.closest] == ["gpu-a", "gpu-b"]
    assert report.closest[0].short == (
        "container main: 0/1 GPU(s) fit; closest GPU 0 (NVIDIA A100-SXM4-40GB): memory: "
        "need 12000 MiB, free 10960 MiB",)
    assert "not reporting" in report.closest[1].short[0]
    # With the big task gone, gpu-a fits.
    freed = build("ml", "notebook", Cluster(pod, [], NODES, [BUSY[1]]), config=Config(),
                  now=NOW)
    assert freed.closest[0].fits


def test_a_broken_record_is_a_warning_not_a_traceback() -> None:
    pod = waiting()
    pod["metadata"]["annotations"][ADMISSION] = "{not json"
    report = build("ml", "notebook", Cluster(pod, [], NODES, []), config=Config(), now=NOW)
    assert report.state == "queued" and any("admission" in w for w in report.warnings)
