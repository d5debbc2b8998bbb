"""bench/bind.py, bench/scheduler_perf.py, bench/failover.py and bench/write_bound.py run,
at a small size, each on a control plane of its own (the other benches' smoke runs are in
tests/ops/test_benches.py): their last line is the JSON that docs/benchmarks.md and
docs/faults.md read (for bind.py, the writes per pod counted by the API server among it; for
scheduler_perf.py, that on a cluster this small neither scheduler breaks a hard rule)."""

from __future__ import annotations

from tests.ops.test_benches import last_json


def test_the_bind_bench_runs_small() -> None:
    out = last_json(["bench/bind.py", "--runs", "1", "--nodes", "20", "--pods", "40",
                     "--workload", "whole"], timeout=300)
    assert out["pods_per_s"] > 0  # type: ignore[operator]
    # The Binding and the agents' patch, per pod, as the API server counted them.
    writes = out["writes_per_pod"]
    assert writes["POST pods/binding"] == 1.0, writes  # type: ignore[index]
    assert writes["POST pods"] == 1.0, writes  # type: ignore[index]


#: The upstream workloads whose paths the others do not take: preemption, and churn of
#: nodes, services and pods in the background (each run starts a control plane: ~30 s).
PERF_SMOKE = "PreemptionBasic,SchedulingWithMixedChurn"


def test_the_scheduler_perf_bench_runs_small() -> None:
    out = last_json(["bench/scheduler_perf.py", "--nodes", "10", "--workloads", PERF_SMOKE,
                     "--timeout", "120"], timeout=900)
    workloads = out["workloads"]
    assert list(workloads) == PERF_SMOKE.split(","), out  # type: ignore[call-overload]
    for name, result in workloads.items():  # type: ignore[attr-defined]
        for scheduler in ("kube-scheduler", "vgpu-scheduler"):
            run = result[scheduler]
            assert "error" not in run and run["pods_per_s"] > 0, (name, scheduler, run)
            assert run["hard_total"] == 0, (name, scheduler, run["hard"])
            assert not run.get("churn_errors") and not run["heartbeat_errors"], run
    # Preemption happened under both: 3 of the 4 low-priority pods of each node gave way.
    for scheduler in ("kube-scheduler", "vgpu-scheduler"):
        assert workloads["PreemptionBasic"][scheduler]["deleted"] == 30  # type: ignore[index]


def test_the_failover_bench_runs_small() -> None:
    out = last_json(["bench/failover.py", "--rounds", "1", "--lease-duration", "4",
                     "--renew-deadline", "3", "--retry-period", "0.5", "--write-timeout", "1",
                     "--pods", "2"], timeout=600)
    for scheduler in ("kube-scheduler", "vgpu-scheduler"):
        for scenario in ("replicas", "restart"):
            assert out[scheduler][scenario]["median_s"] > 0, out  # type: ignore[index]
    assert "target_met" in out["vgpu-scheduler"]["replicas"], out  # type: ignore[index]


def test_the_write_bound_bench_runs_small() -> None:
    out = last_json(["bench/write_bound.py", "--trials", "1", "--write-timeout", "1",
                     "--delays", "0.5", "--late", "2", "--etcd-delays", "0.5"], timeout=300)
    cases = out["cases"]
    assert cases["forwarded"]["trials"][0]["answer"] == "bound", cases  # type: ignore[index]
    # A Binding the proxy sends on after its client gave up lands all the same: the fault
    # the write timeout cannot bound, which the bench is there to show.
    assert cases["late-2"]["latest_landed_s"] >= 2, cases  # type: ignore[index]
    assert out["bound_s"] is not None, out
