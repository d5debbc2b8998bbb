"""``vgpu inspect`` on nodes whose agents publish their GPU links."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from vgpu import builders, cli
from vgpu.cluster.memory import MemoryCluster
from vgpu.kube import adapter
from vgpu_kubectl import inspect, inspect_render

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def report() -> inspect.Report:
    mixed, links = builders.shaped_devices("mixed", 8, "mixed")
    pairs, pair_links = builders.shaped_devices("pairs", 4, "nvlink-pairs")
    fabric, fabric_links = builders.shaped_devices("fabric", 2, "nvswitch")
    nodes = [builders.node("mixed", mixed, links=links, heartbeat=NOW.timestamp()),
             builders.node("pairs", pairs, links=pair_links, heartbeat=NOW.timestamp()),
             builders.node("fabric", fabric, links=fabric_links, heartbeat=NOW.timestamp()),
             builders.node("old", builders.devices("old", 1), heartbeat=NOW.timestamp())]
    return inspect.build(nodes, [], now=NOW, heartbeat_expiry_seconds=180,
                         scheduler_name="vgpu-scheduler")


def column(table: str, name: str) -> list[str]:
    lines = table.splitlines()
    start = lines[0].index(name)
    rows = lines[1:next(i for i, line in enumerate(lines) if line.startswith("TOTAL")) + 1]
    return [line[start:].split("  ")[0].strip() for line in rows]


def test_the_links_column_shows_each_gpus_fastest_link() -> None:
    table = inspect_render.render_table(report())
    assert table.splitlines()[0].split() == [
        "NODE", "GPU", "MODEL", "MEMORY", "MiB", "(ALLOC/TOTAL)", "MEM%", "CORES", "TASKS",
        "LINKS", "ISOLATION", "HEALTH"]
    assert column(table, "LINKS") == [
        "NVS18(all)", "NVS18(all)",                                  # fabric
        "NV12(1)", "NV12(0)", "NV12(3)", "NV12(2)", "PIX(5)", "PIX(4)", "PIX(7)", "PIX(6)",
        "unknown",                                                   # old: no links known
        "NV12(1)", "NV12(0)", "NV12(3)", "NV12(2)",                  # pairs
        ""]                                                          # TOTAL


def test_without_any_links_the_table_is_as_before() -> None:
    r = inspect.build([builders.node("old", builders.devices("old", 2),
                                     heartbeat=NOW.timestamp())], [], now=NOW,
                      heartbeat_expiry_seconds=180, scheduler_name="vgpu-scheduler")
    assert "LINKS" not in inspect_render.render_table(r)
    assert json.loads(inspect_render.render_json(r))["nodes"][0]["links"] is None


def test_the_topology_matrix() -> None:
    lines = inspect_render.render_table(report(), topology=True).splitlines()
    start = lines.index("Links on pairs:")
    assert lines[start + 1:start + 6] == [
        "        GPU0  GPU1  GPU2  GPU3",
        "  GPU0  X     NV12  SYS   SYS",
        "  GPU1  NV12  X     SYS   SYS",
        "  GPU2  SYS   SYS   X     NV12",
        "  GPU3  SYS   SYS   NV12  X"]
    assert "Links on old:" not in lines  # unknown, and one GPU has no pair anyway


def test_json_carries_the_inventory_links() -> None:
    nodes = json.loads(inspect_render.render_json(report()))["nodes"]
    pairs = next(n for n in nodes if n["name"] == "pairs")
    assert len(pairs["links"]) == 6
    assert pairs["links"][0] == {"gpus": ["GPU-pairs-0", "GPU-pairs-1"], "pcie": "switch",
                                 "nvlinks": 12, "generation": 3, "nvswitch": False}


def test_the_command_prints_the_matrix(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    cluster = MemoryCluster()
    gpus, links = builders.shaped_devices("pairs", 4, "nvlink-pairs")
    cluster.create("nodes", builders.node("pairs", gpus, links=links))
    monkeypatch.setattr(adapter, "connect", lambda kubeconfig, **_: cluster)
    assert cli.main(["inspect", "--topology"]) == 0
    out = capsys.readouterr().out
    assert "Links on pairs:" in out and "  GPU0  X     NV12  SYS   SYS" in out
    assert cli.main(["inspect"]) == 0
    assert "Links on pairs:" not in capsys.readouterr().out
