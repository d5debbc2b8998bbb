"""Randomized differential test: seeded random scheduling problems
(:mod:`tests.parity.random_cases`), each laid out for kube-scheduler v1.20.2 and for
vgpu-scheduler on the same API server (:mod:`tests.e2e.parity.differential`). Every
disagreement fails the test unless a documented version difference explains it
(docs/scheduler.md#known-differences); each failure prints the command that replays its
case alone. A few fixed cases the random seeds rarely hit (:data:`AGREE`) must agree as
well, and so must large cases above 100 nodes, where how many nodes a scheduler scores
decides where the pod goes (``generate_large``).

CI runs a fixed seed. By hand, any seed and any cases::

    PARITY_SEED=7 PARITY_CASES=0-59 PARITY_LARGE=0-9 python -m pytest -q -s \\
        tests/e2e/parity/test_differential.py

``PARITY_REPORT=FILE`` also writes every case's outcome there as JSON lines; ``python
-m tests.parity.random_cases SEED INDEX`` prints a case.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.e2e.parity.differential import Runner
from tests.parity.large_cases import generate_large
from tests.parity.random_cases import ZONE, Case, NodeSpec, PodSpec, generate
from vgpu.kube import adapter

pytestmark = pytest.mark.usefixtures("schedulers")

SEED = int(os.environ.get("PARITY_SEED", "30"))
CASES = os.environ.get("PARITY_CASES", "0-59")
LARGE = os.environ.get("PARITY_LARGE", "0-3")


def indices(text: str) -> list[int]:
    """``0-59``, ``3,17`` or a mix."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def replay(index: int) -> str:
    return (f"PARITY_SEED={SEED} PARITY_CASES={index} python -m pytest -q -s "
            f"tests/e2e/parity/test_differential.py")


def test_random_cases_agree_with_kube_scheduler(kube: adapter.KubeCluster) -> None:
    runner = Runner(kube)
    runner.ensure_runtime_class()
    report = Path(os.environ["PARITY_REPORT"]) if os.environ.get(
        "PARITY_REPORT") else None
    failures: list[str] = []
    counts = {"agree": 0, "explained": 0, "unexplained": 0}
    started = time.monotonic()
    try:
        for index in indices(CASES):
            case = generate(SEED, index)
            verdict = runner.verdict(case)
            explained = None if verdict.agree else runner.explain(case, verdict)
            kind = "agree" if verdict.agree else "explained" if explained else "unexplained"
            counts[kind] += 1
            line = (f"seed {SEED} case {index}: {kind}{f' ({explained})' if explained else ''}"
                    f": kube-scheduler {verdict.kube}; vgpu-scheduler {verdict.vgpu}"
                    f"{f'; {verdict.detail}' if verdict.detail else ''}")
            print(line)
            if report is not None:
                with report.open("a") as out:
                    out.write(json.dumps({"seed": SEED, "case": index, "kind": kind,
                                          "explained": explained, "detail": verdict.detail,
                                          "kube": str(verdict.kube),
                                          "vgpu": str(verdict.vgpu)}) + "\n")
            if kind == "unexplained":
                failures.append(f"{line}\n  replay: {replay(index)}")
    finally:
        runner.close()
    print(f"seed {SEED}: {counts['agree']} agree, {counts['explained']} explained by a "
          f"documented difference, {counts['unexplained']} unexplained, of "
          f"{sum(counts.values())} cases in {time.monotonic() - started:.0f} s")
    assert not failures, "disagreements no documented difference explains:\n" + "\n".join(
        failures)


def test_large_cases_weigh_every_feasible_node_as_kube_scheduler(
        kube: adapter.KubeCluster) -> None:
    """Above 100 nodes, where how many nodes a scheduler scores decides where a pod goes:
    with at most 100 feasible nodes, kube-scheduler v1.20 weighs them all, and so must
    vgpu-scheduler (``PARITY_LARGE`` picks the cases, of ``PARITY_SEED``)."""
    runner = Runner(kube)
    failures: list[str] = []
    try:
        for index in indices(LARGE):
            case = generate_large(SEED, index)
            verdict = runner.verdict(case)
            line = (f"seed {SEED} large case {index} ({len(case.nodes)} nodes): "
                    f"{'agree' if verdict.agree else 'disagree'}: kube-scheduler "
                    f"{verdict.kube}; vgpu-scheduler {verdict.vgpu}; {verdict.detail}")
            print(line)
            if not verdict.agree:
                failures.append(line)
    finally:
        runner.close()
    assert not failures, "\n".join(failures)


def _node(labels: dict[str, str], **alloc: str) -> NodeSpec:
    return NodeSpec(labels, (), False, {"cpu": "4", "memory": "4Gi", "pods": "110",
                                        "ephemeral-storage": "10Gi", **alloc}, 0)


def _pod(node: int | None, labels: dict[str, str], requests: dict[str, str],
         **spec: object) -> PodSpec:
    return PodSpec(labels, {"containers": [{"name": "c", "image": "busybox", "resources": {
        "requests": requests}}], **spec}, node)


SPREAD = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "a"}}}]
KNOWN = {
    # Node 0's pods take 2Gi of its 1Gi: v1.20 refuses a pod asking no memory there.
    "zero-request": Case(0, 0, (_node({}, memory="1Gi"),), (_pod(0, {}, {"memory": "2Gi"}),),
                         _pod(None, {}, {"cpu": "100m"})),
    # The pod may use nodes 0 (z0) and 2 (z1, full); v1.20 also counts node 1's two
    # matching pods, in z0 but without the disk the pod selects, and refuses z0.
    "spread-ineligible-nodes": Case(
        0, 0, (_node({ZONE: "z0", "disk": "ssd"}), _node({ZONE: "z0"}),
               _node({ZONE: "z1", "disk": "ssd"}, pods="1")),
        (_pod(1, {"app": "a"}, {}), _pod(1, {"app": "a"}, {}), _pod(2, {"app": "b"}, {})),
        _pod(None, {"app": "a"}, {}, nodeSelector={"disk": "ssd"},
             topologySpreadConstraints=SPREAD)),
}


@pytest.mark.parametrize("key", sorted(KNOWN))
def test_each_documented_difference_shows_and_is_explained(kube: adapter.KubeCluster,
                                                           key: str) -> None:
    """The differences docs/scheduler.md documents, on the real kube-scheduler v1.20.2: it
    refuses where vgpu binds, and the difference's neutralizing change explains it."""
    runner = Runner(kube)
    try:
        verdict = runner.verdict(KNOWN[key])
        assert not verdict.agree, verdict
        assert (verdict.kube.node, verdict.vgpu.node) == (None, 0), verdict
        assert runner.explain(KNOWN[key], verdict) == key
    finally:
        runner.close()


#: Cases both schedulers must decide alike, kept because the random seeds rarely hit them.
AGREE = {
    # labelSelector {} selects every pod of the namespace (v1.20 and current kube): z0
    # holds two, z1 none, so node 0 would skew by 3; node 1 lacks the CPU. Pending. Counting
    # no pod for {} (kube 1.27 up to kubernetes#141340) binds to node 0; counting the
    # other namespace's three pods on node 1 does too.
    "empty-spread-selector": Case(
        0, 0, (_node({ZONE: "z0"}), _node({ZONE: "z1"}, cpu="500m")),
        (_pod(0, {}, {}), _pod(0, {"app": "b"}, {}),
         *(PodSpec({}, {"containers": [{"name": "c", "image": "busybox"}]}, 1, True)
           for _ in range(3))),
        _pod(None, {}, {"cpu": "1"}, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {}}])),
}


@pytest.mark.parametrize("key", sorted(AGREE))
def test_fixed_cases_agree(kube: adapter.KubeCluster, key: str) -> None:
    runner = Runner(kube)
    try:
        verdict = runner.verdict(AGREE[key])
        assert verdict.agree and verdict.kube.node is None, verdict
    finally:
        runner.close()
