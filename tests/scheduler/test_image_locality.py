"""ImageLocality, case by case as kube-scheduler's ``image_locality_test.go``
(``TestImageLocalityPriority``, ``TestNormalizedImageName``): each node's score, node by node
and for all candidates at once, and what hostile node status does."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from tests.scheduler.affinity_support import NOW, pod_obj, snapshot_of
from tests.scheduler.helpers import FakeHandle
from vgpu.config import Config
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.plugins.kube.image_locality import ImageLocality, normalized_image_name

MB = 1024 * 1024


def image(size_mb: int, *names: str) -> dict[str, Any]:
    return {"names": list(names), "sizeBytes": size_mb * MB}


N_40_300_2000 = [image(40, "gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"),
                 image(300, "gcr.io/300:latest", "gcr.io/300:v1"),
                 image(2000, "gcr.io/2000:latest")]
N_250_10 = [image(250, "gcr.io/250:latest"), image(10, "gcr.io/10:latest", "gcr.io/10:v1")]
N_600_40_900 = [image(600, "gcr.io/600:latest"), image(40, "gcr.io/40:latest"),
                image(900, "gcr.io/900:latest")]
N_300_600_900 = [image(300, "gcr.io/300:latest"), image(600, "gcr.io/600:latest"),
                 image(900, "gcr.io/900:latest")]
N_4000_30 = [image(4000, "gcr.io/4000:latest"), image(30, "gcr.io/30:latest")]
N_20_30_40 = [image(20, "gcr.io/20:latest"), image(30, "gcr.io/30:latest"),
              image(40, "gcr.io/40:latest")]


def node(name: str, images: list[dict[str, Any]] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
    if images is not None:
        status["images"] = images
    return {"metadata": {"name": name, "labels": {}}, "spec": {}, "status": status}


def a_pod(images: list[str], init: list[str] = ()) -> Any:  # type: ignore[assignment]
    obj = pod_obj("p")
    obj["spec"]["containers"] = [{"name": f"c{i}", "image": name}
                                 for i, name in enumerate(images)]
    if init:
        obj["spec"]["initContainers"] = [{"name": f"i{i}", "image": name}
                                         for i, name in enumerate(init)]
    return parse(obj, Config())


# (name, pod's images, its init containers' images, nodes' images, scores): kube's table.
CASES = [
    ("two images spread on two nodes, prefer the larger image one",
     ["gcr.io/40", "gcr.io/250"], [], [N_40_300_2000, N_250_10], [0, 5]),
    ("two images on one node, prefer this node",
     ["gcr.io/40", "gcr.io/300"], [], [N_40_300_2000, N_250_10], [7, 0]),
    ("if exceed limit, use limit", ["gcr.io/10", "gcr.io/4000"], [], [N_4000_30, N_250_10],
     [100, 0]),
    ("if exceed limit, use limit (with node which has no images present)",
     ["gcr.io/10", "gcr.io/4000"], [], [N_4000_30, N_250_10, None], [66, 0, 0]),
    ("pod with multiple large images, node2 is preferred",
     ["gcr.io/300", "gcr.io/600", "gcr.io/900"], [], [N_600_40_900, N_300_600_900, None],
     [32, 36, 0]),
    ("pod with multiple small images", ["gcr.io/30", "gcr.io/40"], [],
     [N_20_30_40, N_4000_30], [1, 0]),
    ("include InitContainers: two images spread on two nodes, prefer the larger image one",
     ["gcr.io/30"], ["gcr.io/300"], [N_40_300_2000, N_20_30_40], [6, 0]),
]


@pytest.mark.parametrize(("images", "init", "nodes", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_score(images: list[str], init: list[str], nodes: list[Any],
               expected: list[int]) -> None:
    plugin = ImageLocality(FakeHandle())
    objs = [node(f"node{i + 1}", n) for i, n in enumerate(nodes)]
    snap = snapshot_of(plugin, objs)
    info = a_pod(images, init)
    state = CycleState(NOW, snap)
    names = [o["metadata"]["name"] for o in objs]
    assert [plugin.score(state, info, snap.get(n)) for n in names] == expected  # type: ignore[arg-type]
    positions = np.array([snap.positions[n] for n in names], dtype=np.int64)
    bulk = plugin.score_nodes(state, info, snap, positions)
    assert bulk is not None and bulk.tolist() == expected


def digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(("given", "expected"), [
    ("root", "root:latest"),
    ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
    ("root:tag", "root:tag"),
    ("root@" + digest("root"), "root@" + digest("root")),
])
def test_normalized_image_name(given: str, expected: str) -> None:
    assert normalized_image_name(given) == expected


def test_no_node_reporting_images_leaves_nothing_to_compare() -> None:
    plugin = ImageLocality(FakeHandle())
    snap = snapshot_of(plugin, [node("a", None), node("b", [])])
    positions = np.arange(2, dtype=np.int64)
    assert plugin.score_nodes(CycleState(NOW, snap), a_pod(["x"]), snap, positions) is None


def test_hostile_node_status_scores_without_a_traceback() -> None:
    # Whatever a node's status says, the plugin scores (a size that is no integer: 0).
    plugin = ImageLocality(FakeHandle())
    odd: list[Any] = [7, {"names": "gcr.io/40:latest"}, {"names": ["gcr.io/40:latest"],
                                                          "sizeBytes": "big"}]
    snap = snapshot_of(plugin, [node("a", odd), node("b", N_40_300_2000)])
    info = a_pod(["gcr.io/40", 5, ""])  # type: ignore[list-item]
    scores = plugin.score_nodes(CycleState(NOW, snap), info, snap, np.arange(2, dtype=np.int64))
    assert scores is not None and scores.tolist() == [0, 0]
