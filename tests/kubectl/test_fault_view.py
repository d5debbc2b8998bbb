"""``vgpu why`` and ``vgpu inspect`` show fault domains (vgpu_kubectl.fault_view): whom a
pod shares a GPU's faults with, which GPUs a pending pod may not join and why, and whom
each GPU's fault domain still takes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT, BIND_PHASE
from vgpu.config import Config, from_mapping
from vgpu_kubectl import inspect, inspect_render
from vgpu_kubectl.why import Cluster, build
from vgpu_kubectl.why_render import render_json, render_text

NOW = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
HEARTBEAT = NOW.timestamp()


def gpus(node: str, count: int, mode: str) -> tuple[Any, ...]:
    return tuple(dataclasses.replace(d, isolation=mode)
                 for d in builders.devices(node, count, memory_mib=16384))


# "mps": two MPS GPUs; "own": one hami-core GPU (each pod's faults its own).
NODES = [builders.node("mps", gpus("mps", 2, "mps"), heartbeat=HEARTBEAT),
         builders.node("own", gpus("own", 1, "hami-core"), heartbeat=HEARTBEAT)]


def placed(name: str, namespace: str, node: str, uuid: str, scope: str | None) -> dict[str, Any]:
    # One uid for every pod here: MPS's one user per GPU keeps nobody apart.
    p = builders.pod(name, [builders.container(gpumem=4000, cores=20)], namespace=namespace,
                     securityContext={"runAsUser": 1000})
    a = codecs.Assignment(node, {"main": (codecs.GrantedDevice(uuid, 4000, 20),)},
                          fault_domain=scope, run_as_user=1000)
    p["metadata"]["annotations"].update({ASSIGNMENT: codecs.encode_assignment(a),
                                         BIND_PHASE: "success"})
    p["spec"]["nodeName"] = node
    p["status"] = {"phase": "Running"}
    return p


# a/train keeps to namespace a on GPU-mps-0; b/serve trusts anyone on GPU-mps-1; c/solo
# keeps to c on the hami-core GPU, which bars nobody.
PLACED = [placed("train", "a", "mps", "GPU-mps-0", "namespace"),
          placed("serve", "b", "mps", "GPU-mps-1", None),
          placed("solo", "c", "own", "GPU-own-0", "namespace")]


def pending(namespace: str, scope: str | None, count: int = 2) -> dict[str, Any]:
    notes = {} if scope is None else {"vgpu.io/fault-domain": scope}
    return builders.pod("job", [builders.container(gpus=count, gpumem=1000, cores=10)],
                        namespace=namespace, annotations=notes,
                        securityContext={"runAsUser": 1000})


def why(pod: dict[str, Any], config: Config | None = None) -> Any:
    return build(pod["metadata"]["namespace"], pod["metadata"]["name"],
                 Cluster(pod, [], NODES, PLACED), config=config or Config(), now=NOW)


@pytest.mark.parametrize(("namespace", "scope", "config", "line", "shut"), [
    # Trusts anyone, but a/train does not trust it: GPU 0 is shut to it.
    ("b", "any", {}, "any (its vgpu.io/fault-domain): it may share a GPU's faults (MPS, or "
     "no isolation) with any pod that trusts it; 1 GPU(s) on 1 node(s) hold pods it may not "
     "share faults with", "GPU 0"),
    ("b", None, {}, "any (the default for namespace b)", "GPU 0"),
    # Keeps to a: b/serve's GPU 1 is shut, a/train's GPU 0 is open.
    ("a", "namespace", {}, "namespace (its vgpu.io/fault-domain): it shares a GPU in mps, "
     "mps-hami-core or none only with pods of namespace a that trust it", "GPU 1"),
    ("b", None, {"isolation": {"faultDomains": {"namespaceDefaults": ["b=namespace"]}}},
     "namespace (the default for namespace b)", "GPU 0"),
    # Keeps to c: both MPS GPUs hold other namespaces' pods.
    ("c", "namespace", {}, "namespace (its vgpu.io/fault-domain)", "GPU 0 (NVIDIA A100-SXM4"
     "-40GB), GPU 1"),
])
def test_a_pending_pod_sees_its_scope_and_the_gpus_shut_to_it(
        namespace: str, scope: str | None, config: dict[str, Any], line: str,
        shut: str) -> None:
    report = why(pending(namespace, scope), from_mapping(config) if config else None)
    assert report.fault_domain is not None and report.fault_domain.startswith(line)
    mps = next(f for f in report.closest if f.node == "mps")
    assert not mps.fits and shut in mps.short[0]
    assert "share(s) a fault domain with pods it may not join" in mps.short[0]
    if shut == "GPU 0":
        assert mps.short[0].endswith("; the node has no other GPU it may join")
    own = next(f for f in report.closest if f.node == "own")
    # hami-core bars nobody; the node is one GPU short.
    assert own.short == ("container main: 1/2 GPU(s) fit; the node has no other GPU",)
    assert f"Fault domain: {line}" in render_text(report)
    assert json.loads(render_json(report))["fault_domain"] == report.fault_domain


def test_a_pod_that_trusts_anyone_where_nothing_bars_it_gets_no_line() -> None:
    report = build("b", "job", Cluster(pending("b", None, 1), [], NODES, PLACED[1:]),
                   config=Config(), now=NOW)
    assert report.fault_domain is None and "Fault domain" not in render_text(report)
    assert any(f.fits for f in report.closest)


def test_a_one_gpu_pod_fits_beside_the_gpu_shut_to_it() -> None:
    report = why(pending("b", None, 1))
    assert report.fault_domain is not None
    assert next(f for f in report.closest if f.node == "mps").fits


def test_an_unreadable_scope_is_a_warning() -> None:
    report = why(pending("b", "tenant"))
    assert report.fault_domain is None
    assert any("'tenant' is not a fault domain" in w for w in report.warnings)


@pytest.mark.parametrize(("pod", "line"), [
    (PLACED[0], "namespace (recorded at its placement): it shares a GPU in mps, "
                "mps-hami-core or none only with pods of namespace a that trust it"),
    (PLACED[1], None),
])
def test_a_placed_pod_shows_the_scope_recorded_at_its_placement(
        pod: dict[str, Any], line: str | None) -> None:
    report = why(pod)
    assert report.state == "running" and report.fault_domain == line


def test_inspect_shows_whom_each_fault_domain_takes() -> None:
    report = inspect.build(NODES, PLACED, now=NOW, heartbeat_expiry_seconds=180,
                           scheduler_name="vgpu-scheduler")
    rows = {g.device.uuid: g for n in report.nodes for g in n.gpus}
    assert [rows[u].fault_domain for u in ("GPU-mps-0", "GPU-mps-1", "GPU-own-0")] == [
        "a only", "any", None]
    table = inspect_render.render_table(report, details=True)
    assert "mps (a only; uid 1000)" in table and "hami-core (" not in table
    assert "a/train  container=main  memory=4000MiB  cores=20  phase=success  " \
           "fault-domain=namespace" in table
    assert "b/serve  container=main  memory=4000MiB  cores=20  phase=success\n" in table
    body = inspect_render.to_json(report)
    first, second = body["nodes"][0]["gpus"]
    assert (first["faultDomain"], second["faultDomain"]) == ("a only", "any")
    assert body["nodes"][1]["gpus"][0]["faultDomain"] is None
    assert first["pods"][0]["faultDomain"] == "namespace"


def test_inspect_reads_a_node_configured_for_mps_that_reports_hami_core() -> None:
    # The daemon is down: the GPU reports hami-core, its next pods are MPS clients again.
    node = builders.node("down", gpus("down", 1, "hami-core"), heartbeat=HEARTBEAT,
                         labels={"vgpu.io/isolation": "mps"})
    pod = placed("train", "a", "down", "GPU-down-0", "namespace")
    report = inspect.build([node], [pod], now=NOW, heartbeat_expiry_seconds=180,
                           scheduler_name="vgpu-scheduler")
    assert report.nodes[0].gpus[0].fault_domain == "a only"
    plain = inspect.build([node], [pod], now=NOW, heartbeat_expiry_seconds=180,
                          scheduler_name="vgpu-scheduler", isolation_mode="hami-core")
    assert plain.nodes[0].gpus[0].fault_domain == "a only"  # the label wins
    unlabelled = builders.node("down", gpus("down", 1, "hami-core"), heartbeat=HEARTBEAT)
    assert inspect.build([unlabelled], [pod], now=NOW, heartbeat_expiry_seconds=180,
                         scheduler_name="vgpu-scheduler").nodes[0].gpus[0].fault_domain is None
