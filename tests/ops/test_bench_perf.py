"""bench/scheduler_perf.py's pure parts: the end-state checks (each hard rule caught when
broken, and only then; the soft measures), the transcribed workloads, the side by side's
targets, and bad arguments refused with a clear message. Its smoke run on a control plane
is in tests/e2e/test_bench_smoke.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Appended: bench/ holds scripts whose names must not hide anything the tests import.
sys.path.append(str(ROOT / "bench"))

import _perf_workloads as wl  # noqa: E402
from _perf_checks import HARD, hard_rules, soft_measures  # noqa: E402
from _perf_report import KUBE, VGPU, side_by_side, summary, table  # noqa: E402

from vgpu import builders, codecs  # noqa: E402

ZONE = wl.ZONE


def node(name: str, zone: str | None = None, gpus: int = 1) -> dict[str, Any]:
    n = wl.nodes(wl.CreateNodes(1, (zone,) if zone else ()), "x", gpus, 0.0)[0]
    # One name per test node: the GPU UUIDs follow it.
    inv = codecs.NodeInventory(builders.devices(name, gpus))
    n["metadata"].update(name=name, annotations={"vgpu.io/node-gpus":
                                                 codecs.encode_inventory(inv)})
    n["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return n


def pod(name: str, at: str | None, template: str = "pod-default", ns: str = "ns", *,
        mib: int = 1000, gpu: int = 0, **spec: Any) -> dict[str, Any]:
    p = wl.pod(template, name, ns, "s")
    p["spec"].update(spec)
    if at:
        p["spec"]["nodeName"] = at
        grant = codecs.GrantedDevice(f"GPU-{at}-{gpu}", mib, 0)
        p["metadata"]["annotations"] = {"vgpu.io/assignment": codecs.encode_assignment(
            codecs.Assignment(node=at, containers={"pause": (grant,)}))}
    return p


def broken(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
           waited: tuple[str, ...] = ()) -> dict[str, int]:
    out = hard_rules(nodes, pods, waited=waited, gpu_assignments=True)
    return {k: v for k, v in out.items() if v}


N1, N2, N4 = node("n1", "zone1"), node("n2", "zone2"), node("n4", gpus=4)
AFF = "pod-with-pod-affinity"
ANTI = "pod-with-pod-anti-affinity"
SPREAD = "pod-with-topology-spreading"


@pytest.mark.parametrize(("nodes", "pods", "waited", "expected"), [
    ([N1, N2], [pod("a", "n1"), pod("b", "n2")], ("ns/a", "ns/b"), {}),
    ([N1], [pod("a", None)], ("ns/a",), {"unbound": 1}),
    # A pod not waited for (skipWaitToCompletion) may stay pending.
    ([N1], [pod("a", None)], (), {}),
    # Its grant is on a GPU no node has, too.
    ([N1], [pod("a", "gone")], (), {"unknown_node": 1, "gpu_capacity": 1}),
    # 4 CPUs and 4 GPUs of 10 tasks: 40 pods of 100m fit; the 41st takes a CPU and a
    # vGPU too many on the node, an 11th task on a GPU.
    ([N4], [pod(f"p{i}", "n4", gpu=i % 4) for i in range(40)], (), {}),
    ([N4], [pod(f"p{i}", "n4", gpu=i % 4) for i in range(41)], (),
     {"node_resources": 1, "gpu_capacity": 1}),
    # One GPU of 40 GiB: 41 GiB of grants on it.
    ([N1], [pod("a", "n1", mib=40000), pod("b", "n1", mib=1000)], (), {"gpu_capacity": 1}),
    ([N1], [pod("a", "n1", template="pod-with-node-affinity"),
            pod("b", "n2", template="pod-with-node-affinity")], (),
     {"unknown_node": 1, "gpu_capacity": 1}),
    ([N1, node("n3", "zone3")], [pod("a", "n3", template="pod-with-node-affinity")], (),
     {"node_affinity": 1}),
    ([N1, N2], [pod("a", "n1", template=ANTI, ns=wl.TEST),
                pod("b", "n1", template=ANTI, ns=wl.SETUP)], (), {"pod_anti_affinity": 2}),
    # Anti-affinity names its namespaces: a green pod elsewhere does not count.
    ([N1], [pod("a", "n1", template=ANTI, ns=wl.TEST),
            pod("b", "n1", template=ANTI, ns="other")], (), {"pod_anti_affinity": 1}),
    ([N1, N2], [pod("a", "n1", template=ANTI, ns=wl.TEST),
                pod("b", "n2", template=ANTI, ns=wl.TEST)], (), {}),
    ([N1, N2], [pod("a", "n1", template=AFF, ns=wl.TEST),
                pod("b", "n2", template=AFF, ns=wl.TEST)], (), {"pod_affinity": 2}),
    ([N1, N2], [pod("a", "n1", template=AFF, ns=wl.TEST)], (), {}),
    ([N1, node("n1b", "zone1")], [pod("a", "n1", template=AFF, ns=wl.TEST),
                                  pod("b", "n1b", template=AFF, ns=wl.TEST)], (), {}),
    # maxSkew 5 over two zones: 6 against 0 breaks it, 5 against 0 does not.
    ([N1, N2], [pod(f"s{i}", "n1", template=SPREAD) for i in range(6)], (),
     {"topology_spread": 1}),
    ([N1, N2], [pod(f"s{i}", "n1", template=SPREAD) for i in range(5)], (), {}),
])
def test_each_hard_rule_is_caught(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                                  waited: tuple[str, ...], expected: dict[str, int]) -> None:
    assert broken(nodes, pods, waited) == expected


def test_every_rule_is_reported() -> None:
    assert set(hard_rules([N1], [], waited=(), gpu_assignments=False)) == set(HARD)


def test_kube_schedulers_pods_need_no_assignment() -> None:
    p = pod("a", "n1")
    del p["metadata"]["annotations"]
    assert not any(hard_rules([N1], [p], waited=(), gpu_assignments=False).values())
    assert hard_rules([N1], [p], waited=(), gpu_assignments=True)["gpu_capacity"] == 1


def test_preferred_anti_affinity_measures() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [pod(f"y{i}", "n0", template="pod-with-preferred-pod-anti-affinity", ns=wl.TEST)
            for i in range(3)]
    pods.append(pod("y3", "n1", template="pod-with-preferred-pod-anti-affinity", ns=wl.SETUP))
    (row,) = soft_measures(nodes, pods)["preferred_anti_affinity"]
    assert row == {"key": wl.HOSTNAME, "pods": 4, "max_per_domain": 3, "even": 1,
                   "alone_share": 0.25, "domains_used": 2}


def test_preferred_affinity_and_soft_spread_measures() -> None:
    nodes = [node("n1", "zone1"), node("n2", "zone2"), node("n3", "zone3")]
    pods = [pod(f"r{i}", "n1", template="pod-with-preferred-pod-affinity", ns=wl.TEST)
            for i in range(3)]
    pods += [pod("r3", "n2", template="pod-with-preferred-pod-affinity", ns=wl.TEST)]
    pods += [pod(f"b{i}", "n1" if i < 4 else "n2",
                 template="pod-with-preferred-topology-spreading") for i in range(5)]
    soft = soft_measures(nodes, pods)
    assert soft["preferred_affinity"][0]["alone_share"] == 0.25
    assert soft["preferred_affinity"][0]["max_per_domain"] == 3
    (spread,) = soft["schedule_anyway_spread"]
    assert (spread["skew"], spread["pods"]) == (4, 5)  # zone1 4, zone2 1, zone3 0
    assert (soft["nodes_used"], soft["pods_per_node_max"]) == (2, 7)


def test_thirteen_workloads_transcribed() -> None:
    assert len(wl.WORKLOADS) == 13
    assert all(w.base_nodes == 500 for w in wl.WORKLOADS if w.name != "SchedulingWithMixedChurn")
    pre = wl.scaled(wl.BY_NAME["PreemptionBasic"], 20)
    assert [op.count for op in pre.ops] == [20, 80, 20]  # 4 victims a node, as upstream
    churn = wl.scaled(wl.BY_NAME["SchedulingWithMixedChurn"], 500)
    assert [getattr(op, "count", None) for op in churn.ops] == [500, None, 500]


@pytest.mark.parametrize("template", sorted(wl.TEMPLATES))
def test_every_pod_asks_for_a_vgpu(template: str) -> None:
    p = wl.pod(template, "p", "ns", "sched")
    limits = p["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1" and limits["nvidia.com/gpumem"] == "1000"
    assert p["spec"]["schedulerName"] == "sched"
    high = template.startswith("pod-high-priority")
    assert (p["spec"].get("priorityClassName") == wl.PRIORITY_CLASS) is high


def test_upstream_fields_kept() -> None:
    anti = wl.pod("pod-with-preferred-pod-anti-affinity", "p", "ns", "s")["spec"]["affinity"]
    (term,) = anti["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 1 and term["podAffinityTerm"]["topologyKey"] == wl.HOSTNAME
    low = wl.pod("pod-low-priority", "p", "ns", "s")["spec"]
    assert low["terminationGracePeriodSeconds"] == 0
    assert low["containers"][0]["resources"]["requests"]["cpu"] == "900m"


def test_nodes_carry_gpus_for_both_schedulers() -> None:
    nodes = wl.nodes(wl.CreateNodes(4, ("moon-1", "moon-2", "moon-3")), "n", 4, 0.0)
    assert [n["metadata"]["labels"][ZONE] for n in nodes] == ["moon-1", "moon-2", "moon-3",
                                                              "moon-1"]
    alloc = nodes[0]["status"]["allocatable"]
    assert alloc == {"cpu": "4", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "40",
                     "nvidia.com/gpumem": "163840"}
    assert len(codecs.decode_inventory(nodes[0]["metadata"]["annotations"]["vgpu.io/node-gpus"])
               .devices) == 4


def run_of(rate: float, p99: float, *, hard: int = 0, anti: int | None = None
           ) -> dict[str, Any]:
    soft: dict[str, Any] = {"nodes_used": 1, "pods_per_node_max": 1}
    if anti is not None:
        soft["preferred_anti_affinity"] = [{"key": wl.HOSTNAME, "pods": 9, "even": 3,
                                            "max_per_domain": anti, "alone_share": 0.0,
                                            "domains_used": 3}]
    return {"pods": 10, "pods_per_s": rate, "p99_ms": p99, "hard_total": hard, "soft": soft}


@pytest.mark.parametrize(("kube", "vgpu", "missed"), [
    (run_of(100, 1000, anti=4), run_of(110, 900, anti=5), []),
    (run_of(100, 1000), run_of(99, 900), ["pods_per_s"]),
    (run_of(100, 1000), run_of(120, 1001), ["p99"]),
    (run_of(100, 1000), run_of(120, 900, hard=1), ["no_hard_rule_broken"]),
    (run_of(100, 1000, anti=4), run_of(120, 900, anti=6), ["preferred_anti_affinity"]),
    (run_of(100, 1000), run_of(120, 900) | {"error": "timed out"}, ["completed"]),
])
def test_targets(kube: dict[str, Any], vgpu: dict[str, Any], missed: list[str]) -> None:
    out = side_by_side({KUBE: kube, VGPU: vgpu})
    assert [t for t, ok in out["targets_met"].items() if not ok] == missed
    assert summary({"w": out})["targets_met_everywhere"] is (not missed)
    assert "| w |" in table({"w": out})


@pytest.mark.parametrize("args", [["--workloads", "Nope"], ["--nodes", "0"],
                                  ["--schedulers", "default-scheduler"],
                                  ["--vgpu-config", "/nonexistent.yaml"]])
def test_bad_arguments_are_refused_without_a_traceback(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "bench/scheduler_perf.py", *args], cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error:" in done.stderr


def test_churn_recreates_each_object_every_other_tick() -> None:
    from _perf_run import _Churn

    from vgpu.cluster.memory import MemoryCluster
    from vgpu.cluster.port import Selector

    cluster = MemoryCluster()
    churn = _Churn(cluster, wl.Churn(("node", "pod-high-priority-large-cpu", "service"), 1000),
                   "ns", "sched")  # type: ignore[arg-type]

    def live() -> list[str]:
        return sorted(o["metadata"]["name"] for kind in ("nodes", "pods", "services")
                      for o in cluster.list(kind, Selector()).items)

    churn.tick()
    first = live()
    assert first == ["churn-node-00001", "churn-pod-00002", "churn-service-00003"]
    churn.tick()
    assert live() == []
    churn.tick()
    assert len(live()) == 3 and not set(live()) & set(first)


def test_a_run_that_failed_is_reported_not_counted_as_clean() -> None:
    failed = {"error": "SystemExit: the webhook did not become ready", "hard_total": None,
              "soft": {}}
    out = side_by_side({KUBE: run_of(100, 1000), VGPU: failed})
    assert out["targets_met"]["completed"] is False
    assert out["targets_met"]["no_hard_rule_broken"] is False
    s = summary({"w": out})
    assert s["errors"] == {VGPU: {"w": failed["error"]}} and not s["targets_met_everywhere"]
    assert "| 0 / — |" in table({"w": out})
