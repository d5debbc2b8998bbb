from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops import metrics_fixture
from tests.ops.promql import metric_names

DASHBOARDS = Path(__file__).resolve().parents[2] / "manifests" / "dashboards"
FILES = sorted(p.name for p in DASHBOARDS.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return data


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: panel targets and query variables."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            # label_values(<series selector>, <label>): the selector is PromQL.
            match = re.fullmatch(r"label_values\((.*),\s*\w+\)", var["definition"])
            assert match, var["definition"]
            exprs.append(match.group(1))
    return exprs


@pytest.mark.parametrize(("expr", "names"), [
    ("sum(a)", {"a"}),
    ('histogram_quantile(0.99, sum by (le) (rate(h_bucket{node=~"$node"}[$__rate_interval])))',
     {"h_bucket"}),
    ("sum(rate(x_total[5m])) by (result)", {"x_total"}),
    ('a{l="sum(b)"} / on (uuid) group_left (model) c', {"a", "c"}),
    ("sort_desc(count by (node, uuid) (d)) offset 1h", {"d"}),
    ("e / 2^20 > bool 1.5e3", {"e"}),
    ("min(f) - time()", {"f"}),
    ("g and h unless i_j:k", {"g", "h", "i_j:k"}),
    ("vector(0)", set()),
    ("sum without (pod) (m) * 100", {"m"}),
])
def test_metric_names_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_two_dashboards_exist_and_the_generator_lists_them() -> None:
    assert FILES == sorted(metrics_fixture.DASHBOARD_METRICS) == [
        "vgpu-cluster.json", "vgpu-gpus.json"]
    kustomization = yaml.safe_load((DASHBOARDS / "kustomization.yaml").read_text())
    generator = kustomization["configMapGenerator"][0]
    assert sorted(generator["files"]) == FILES
    assert kustomization["generatorOptions"]["labels"]["grafana_dashboard"] == "1"


@pytest.mark.parametrize("name", FILES)
def test_dashboard_shape(name: str) -> None:
    d = load(name)
    assert d["uid"] and d["title"].startswith("vgpu / ")
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in d["panels"]:
        if panel["type"] == "row":
            # A row only heads the panels under it: full width, one unit high, no query.
            assert panel["gridPos"]["w"] == 24 and panel["gridPos"]["h"] == 1, panel["title"]
            assert "targets" not in panel, panel["title"]
            continue
        assert panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        for t in panel["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


@pytest.mark.parametrize("name", FILES)
def test_dashboard_metrics_are_the_listed_ones(name: str) -> None:
    used = set().union(*(metric_names(e) for e in expressions(load(name))))
    assert used == metrics_fixture.DASHBOARD_METRICS[name]


@pytest.mark.parametrize("name", FILES)
def test_every_dashboard_metric_is_exported_by_a_component(name: str) -> None:
    exported = {c: metrics_fixture.exported(c) for c in metrics_fixture.EXPORTED}
    everything = set().union(*exported.values())
    missing = sorted(metrics_fixture.DASHBOARD_METRICS[name] - everything)
    assert not missing, f"{name} reads series no component exports: {missing}"


@pytest.mark.parametrize("component", sorted(metrics_fixture.LIVE))
def test_the_fixture_copy_matches_the_live_registry(component: str) -> None:
    live = metrics_fixture.live_exported(component)
    if live is None:
        pytest.skip(f"{component} is not merged into this tree; its fixture copy stands in")
    assert live == metrics_fixture.EXPORTED[component]


def test_a_metric_nobody_exports_is_caught() -> None:
    exported = set().union(*(metrics_fixture.exported(c) for c in metrics_fixture.EXPORTED))
    assert "vgpu_gpu_memory_free_bytes" not in exported
    assert metric_names("sum(vgpu_gpu_memory_free_bytes)") - exported == {
        "vgpu_gpu_memory_free_bytes"}
