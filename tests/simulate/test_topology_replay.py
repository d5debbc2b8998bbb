"""Replays on topology-carrying nodes: the best-link share of multi-GPU pods, with the
links published and hidden."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgpu import cli
from vgpu.codecs import Assignment, GrantedDevice
from vgpu_simulate import policies
from vgpu_simulate.links import LinkTally
from vgpu_simulate.replay import replay
from vgpu_simulate.trace import TraceError, TraceNode, TracePod, write_pods

NODE = TraceNode("n", 64000, 262144, 4, "G2")


#: Arrival order with this seed: "one", then "two".
SEED = 1


def pairs_trace() -> list[TracePod]:
    # One GPU, then two: a scheduler blind to the links puts the one-GPU pod on GPU 0
    # and the pair on GPUs 1 and 2, across the two NVLink bridges.
    return [TracePod("one", 1000, 0, 1, 1000), TracePod("two", 1000, 0, 2, 1000)]


@pytest.mark.parametrize(("hidden", "best"), [(False, 100.0), (True, 0.0)])
def test_best_link_share_with_and_without_links(hidden: bool, best: float) -> None:
    result = replay([NODE], pairs_trace(), policies.get("lowest-task-count"), seed=SEED,
                    inflate=0, topology="nvlink-pairs", hide_links=hidden)
    assert (result.placed, result.multi_gpu_pods, result.best_link_pct) == (2, 1, best)
    assert result.to_json()["best_link_pct"] == best


def test_without_topology_nothing_is_measured() -> None:
    result = replay([NODE], pairs_trace(), policies.get("binpack"), seed=0, inflate=0)
    assert result.multi_gpu_pods is None and "best_link_pct" not in result.to_json()


def test_the_tally_judges_against_the_nodes_best_set() -> None:
    tally = LinkTally("mixed")
    tally.add_nodes([TraceNode("m", 1, 1, 8, "G2")])

    def placed(*gpus: int) -> None:
        tally.record(Assignment("m", {"c": tuple(GrantedDevice(f"GPU-m-{i}", 1, 1)
                                                 for i in gpus)}))

    placed(0, 1)        # NV12: the best pair
    placed(4, 5)        # PIX: not
    placed(0, 1, 2, 3)  # the NVLinked four
    placed(*range(8))   # eight: only one set, the best
    placed(3)           # one GPU: not a multi-GPU pod
    assert (tally.multi_gpu, tally.best, tally.best_pct) == (4, 3, 75.0)
    assert LinkTally("pcie").best_pct is None
    with pytest.raises(TraceError, match="--topology 'torus': unknown"):
        replay([NODE], pairs_trace(), policies.get("binpack"), seed=0, inflate=0,
               topology="torus")


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path
    (root / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn,64000,262144,4,G2\n")
    write_pods(root / "pods.csv", pairs_trace())
    out = root / "out.json"
    assert cli.main(["simulate", "--nodes", str(root / "nodes.csv"), "--pods",
                     str(root / "pods.csv"), "--inflate", "0", "--policy", "binpack",
                     "--topology", "nvlink-pairs", "--json", str(out), "--no-plot"]) == 0
    shown = capsys.readouterr().out
    assert "topology: every node nvlink-pairs" in shown
    assert "best link %" in shown.splitlines()[2]
    assert json.loads(out.read_text())["best_link_pct"] == 100.0
    assert cli.main(["simulate", "--nodes", str(root / "nodes.csv"), "--pods",
                     str(root / "pods.csv"), "--hide-links", "--no-plot"]) != 0
    assert "--hide-links: give the nodes a --topology" in capsys.readouterr().err
