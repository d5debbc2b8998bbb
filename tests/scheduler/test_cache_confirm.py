"""An assumed pod's confirmation from the watch reuses the assumed PodInfo only when the
watch shows that pod plus our Binding; anything else is parsed again."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from vgpu import builders, codecs
from vgpu.config import Config
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.host.pod_records import PodRecord, bound_record, confirmed
from vgpu_scheduler.plugins.gpu.binder import binding_annotations

SCHEDULERS = Config().vgpu_schedulers

CLAIM = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-n1-0", 4096, 25),)})


def pending() -> dict[str, Any]:
    pod = builders.pod("p", [builders.container(cpu="1", memory="1Gi", gpumem=4096, cores=25)])
    pod["metadata"].update(uid="u-1", creationTimestamp="2026-11-23T10:00:00Z",
                           labels={"app": "a"})
    pod["metadata"].setdefault("annotations", {})["team"] = "x"
    return pod


def as_bound(pod: dict[str, Any], claim: codecs.Assignment | None = CLAIM) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = "n1"
    out["metadata"]["annotations"].update(binding_annotations(claim, 1_800_000_000.0))
    out["metadata"]["resourceVersion"] = "42"
    out["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                                                          "status": "True"}]}
    return out


def assumed() -> PodRecord:
    return PodRecord(key="default/p", node="n1", info=parse(pending(), Config()),
                     assignment=CLAIM, assumed=True)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = pod
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return change


def _annotate(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        pod["metadata"]["annotations"][key] = value
    return change


def test_the_watchs_bound_pod_reuses_the_assumed_info() -> None:
    rec = assumed()
    pod = as_bound(rec.info.pod)
    fresh = confirmed(rec, pod, SCHEDULERS)
    assert fresh is not None and fresh.info.pod is pod and not fresh.assumed
    reparsed = bound_record(pod, Config())
    assert reparsed is not None
    assert (fresh.key, fresh.node, fresh.assignment) == (reparsed.key, reparsed.node,
                                                         reparsed.assignment)
    assert fresh.info == reparsed.info


@pytest.mark.parametrize("change", [
    _set("spec.nodeName", "n2"),
    _set("spec.priority", 7),
    _set("metadata.labels", {"app": "b"}),
    _annotate("team", "y"),
    _annotate("nvidia.com/use-gputype", "A100"),
    _annotate("vgpu.io/assignment", "not an assignment"),
    _set("metadata.deletionTimestamp", "2026-11-23T10:01:00Z"),
    _set("metadata.uid", "u-2"),
    _set("status.phase", "Failed"),
], ids=["other node", "spec", "labels", "user annotation", "gpu type annotation",
        "unreadable assignment", "terminating", "uid", "ended"])
def test_anything_else_is_parsed_again(change: Callable[[dict[str, Any]], None]) -> None:
    rec = assumed()
    pod = as_bound(rec.info.pod)
    change(pod)
    assert confirmed(rec, pod, SCHEDULERS) is None


def test_another_assignment_is_parsed_again() -> None:
    rec = assumed()
    other = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-n1-1", 4096, 25),)})
    assert confirmed(rec, as_bound(rec.info.pod, other), SCHEDULERS) is None
