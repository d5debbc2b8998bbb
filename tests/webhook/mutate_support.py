"""The cases' vocabulary for tests/webhook/test_mutate.py: what a case is, and the edits a
patch must make."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.webhook.pods import NO_GPUS
from vgpu.annotations import GPUMEM_PERCENTAGE
from vgpu.config import Config, QuotaConfig, ResourceNames
from vgpu.init_resources import INIT_RESOURCES, encode
from vgpu_webhook.gpus import ClusterGpus

GPU, MEM, PCT, CORES, PRIO = ResourceNames().all()
SCHED = "vgpu-scheduler"

Edit = Callable[[dict[str, Any]], None]
PLAIN = Config(quota=QuotaConfig(derived_requests=False))


@dataclass(frozen=True)
class Case:
    name: str
    pod: dict[str, Any]
    #: For an allowed pod: the edits the patch must make (None: no patch at all).
    expect: Edit | None = None
    denied: str | None = None  # a fragment the denial message must contain
    code: int = 400
    gpus: ClusterGpus = NO_GPUS
    config: Config = PLAIN
    review: dict[str, Any] = field(default_factory=dict)
    #: A fragment the admission warnings must contain (where vgpu reads the pod otherwise
    #: than HAMi, or HAMi ignores a value); None: no warning at all.
    warns: str | None = None


def edits(*steps: Edit) -> Edit:
    def run(p: dict[str, Any]) -> None:
        for step in steps:
            step(p)
    return run


def sched(p: dict[str, Any]) -> None:
    p["spec"]["schedulerName"] = SCHED


def res(index: int, part: str, values: dict[str, Any], key: str = "containers") -> Edit:
    def run(p: dict[str, Any]) -> None:
        p["spec"][key][index].setdefault("resources", {}).setdefault(part, {}).update(values)
    return run


def drop(index: int, part: str, name: str, key: str = "containers") -> Edit:
    def run(p: dict[str, Any]) -> None:
        del p["spec"][key][index]["resources"][part][name]
    return run


def moved(values: dict[str, dict[str, str]]) -> Edit:
    """The init containers' resources the webhook moved into vgpu.io/init-resources."""
    def run(p: dict[str, Any]) -> None:
        p["metadata"].setdefault("annotations", {})[INIT_RESOURCES] = encode(values)
    return run


def whole(index: int = 0, key: str = "containers", requests: bool = False) -> Edit:
    """HAMi's webhook: a whole GPU's memory and no cores is the whole GPU (gpucores 100)."""
    def run(p: dict[str, Any]) -> None:
        res(index, "limits", {CORES: "100"}, key)(p)
        if requests:
            res(index, "requests", {CORES: "100"}, key)(p)
    return run


def note(values: dict[str, int]) -> Edit:
    def run(p: dict[str, Any]) -> None:
        p["metadata"].setdefault("annotations", {})[GPUMEM_PERCENTAGE] = json.dumps(
            values, separators=(",", ":"), sort_keys=True)
    return run


CUSTOM = Config(resource_names=ResourceNames(gpu="example.com/v~gpu", gpumem="example.com/mem",
                                             gpumem_percentage="example.com/mem-pct",
                                             gpucores="example.com/cores",
                                             priority="example.com/prio"), quota=PLAIN.quota)
SCALED = Config(device_memory_scaling=2.0, quota=PLAIN.quota)
