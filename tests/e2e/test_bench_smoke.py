"""bench/bind.py runs, at a small size, on a control plane of its own (the other benches'
smoke runs are in tests/ops/test_benches.py): its last line is the JSON that
docs/benchmarks.md reads, the writes per pod counted by the API server among it."""

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
