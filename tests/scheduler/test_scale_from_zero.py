"""GPU pods that arrive before their nodes (a GPU node pool scaled to zero, agents not yet
published): admitted by the webhook, Pending with a clear reason in ``kubectl vgpu why``,
placed when a node joins; in a namespace whose ResourceQuota caps GPU memory and in one
without. The whole path on the in-memory cluster: webhook decision, scheduler, why."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest

from tests.scheduler.e2e_support import gpu_node, setup
from tests.webhook.jsonpatch import apply
from tests.webhook.pods import ctr, pod, review
from vgpu.cluster.events import event_object
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, QuotaConfig
from vgpu_kubectl.why import Cluster, build
from vgpu_webhook.gpus import ClusterGpus
from vgpu_webhook.mutate import decide
from vgpu_webhook.review import answer, parse

#: The operator's declared node-pool GPU types, what a capped namespace is charged by.
CONFIG = Config(quota=QuotaConfig(gpu_types=("NVIDIA A100-SXM4-40GB=40960",)))
GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}


def admitted(obj: dict[str, Any], gpus: ClusterGpus) -> tuple[dict[str, Any], list[str]]:
    body = json.dumps(review(obj)).encode()
    parsed = parse(body)
    response = json.loads(answer(parsed.uid, decide(parsed.request, CONFIG, gpus)))["response"]
    assert response["allowed"], response
    patched = apply(obj, json.loads(base64.b64decode(response["patch"])))
    return patched, list(response.get("warnings", []))


def why(cluster: MemoryCluster, name: str) -> tuple[str, str]:
    obj = cluster.get("pods", name, "team-a")
    events = [event_object(obj, e.type, e.reason, e.message, e.component)
              for e in cluster.events(name=name)]
    report = build("team-a", name, Cluster(obj, events, cluster.list("nodes").items,
                                           cluster.list("pods").items),
                   config=CONFIG, now=dt.datetime(2027, 1, 15, tzinfo=dt.UTC))
    return report.state, report.summary


@pytest.mark.parametrize("capped", [True, False], ids=["quota", "no-quota"])
def test_a_gpu_pod_before_its_node_waits_then_is_placed(capped: bool) -> None:
    timeline: list[str] = []
    gpus = ClusterGpus(capped=frozenset({"team-a"}) if capped else frozenset())
    patched, _ = admitted(pod(ctr("c", GPU), name="trainer"), gpus)
    charged = patched["spec"]["containers"][0]["resources"]["requests"].get(
        "vgpu.io/memory-mib")
    # Charged against the largest GPU it may land on: the declared type's half.
    assert charged == "20480"
    timeline.append(f"t0 admitted, no GPU node, vgpu.io/memory-mib charged {charged}")
    sched, cluster, clock = setup([])
    cluster.create("pods", patched)
    sched.run_until_idle()
    assert node_of_a(cluster) is None
    state, summary = why(cluster, "trainer")
    assert state == "unschedulable"
    assert "0/0 nodes" in summary or "no node" in summary.lower(), summary
    event = cluster.events(name="trainer")[-1]
    assert event.reason == "FailedScheduling"
    timeline.append(f"t0 pending: event {event.reason}: {event.message}")
    timeline.append(f"t0 kubectl vgpu why: {state}: {summary}")
    clock.advance(60)
    cluster.create("nodes", gpu_node("gpu-1", 2, memory_mib=40960,
                                     model="NVIDIA A100-SXM4-40GB", heartbeat=clock.now))
    sched.run_until_idle()
    assert node_of_a(cluster) == "gpu-1"
    timeline.append("t60 node gpu-1 joins (2 x A100 40 GB): placed on gpu-1")
    state, _ = why(cluster, "trainer")
    timeline.append(f"t60 kubectl vgpu why: {state}")
    print("\n".join(timeline))


def node_of_a(cluster: MemoryCluster) -> str | None:
    got: str | None = cluster.get("pods", "trainer", "team-a")["spec"].get("nodeName")
    return got


def test_a_capped_namespace_with_no_size_known_is_refused_and_an_uncapped_one_is_not() -> None:
    refused = json.loads(answer("u", decide(parse(json.dumps(review(
        pod(ctr("c", GPU), name="t"))).encode()).request, Config(),
        ClusterGpus(capped=frozenset({"team-a"})))))["response"]
    assert not refused["allowed"]
    assert "no GPU it may land on is known yet" in refused["status"]["message"]
    free = json.loads(answer("u", decide(parse(json.dumps(review(
        pod(ctr("c", GPU), name="t"))).encode()).request, Config(), ClusterGpus())))["response"]
    assert free["allowed"]
