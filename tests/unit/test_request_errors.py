"""Rejected pods: the error names the container and the resource, and says what is allowed.

Separate from the accepted shapes of ``test_requests``: one table of pods ``parse_pod``
must refuse, each with the fragments its message must carry, and a property that any
input at all ends in a ``PodRequest`` or a ``RequestError``, never another exception.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings

from tests.unit.requests_support import (
    CORES,
    CUSTOM,
    DEFAULT,
    GPU,
    MEM,
    PCT,
    PRIO,
    ctr,
    json_like,
    pod,
)
from vgpu import policy
from vgpu.config import Config
from vgpu.errors import QuantityError, RequestError
from vgpu.hami_fields import SCORING_WEIGHTS as WEIGHTS
from vgpu.requests import parse_pod


@dataclass(frozen=True)
class Bad:
    id: str
    pod: Any
    fragments: tuple[str, ...]
    config: Config = field(default=DEFAULT)
    error: type[RequestError] = RequestError


REJECTED: list[Bad] = [
    Bad("bad-string-gpumem", pod(ctr("trainer", {GPU: 1, MEM: "lots"})),
        ("container 'trainer'", MEM, "'lots'"), error=QuantityError),
    Bad("bad-string-count", pod(ctr("trainer", {GPU: "two"})),
        ("container 'trainer'", GPU, "'two'"), error=QuantityError),
    Bad("bad-string-in-requests", pod(ctr("trainer", requests={CORES: "30%"})),
        ("container 'trainer'", CORES, "'30%'"), error=QuantityError),
    Bad("bad-string-in-init-container",
        pod(ctr("app"), init=(ctr("warmup", {GPU: 1, PCT: "half"}),)),
        ("init container 'warmup'", PCT, "'half'"), error=QuantityError),
    Bad("milli-count-not-whole", pod(ctr("trainer", {GPU: "1500m"})),
        ("container 'trainer'", GPU, "not a whole number"), error=QuantityError),
    Bad("fractional-memory", pod(ctr("trainer", {GPU: 1, MEM: "1.5"})),
        ("container 'trainer'", MEM, "not a whole number"), error=QuantityError),
    Bad("fractional-json-number", pod(ctr("trainer", {GPU: 1, MEM: 100.5})),
        ("container 'trainer'", MEM, "not a whole number"), error=QuantityError),
    Bad("bool-quantity", pod(ctr("trainer", {GPU: True})),
        ("container 'trainer'", GPU, "not a quantity"), error=QuantityError),
    Bad("mapping-quantity", pod(ctr("trainer", {GPU: {"value": 1}})),
        ("container 'trainer'", GPU, "not a quantity"), error=QuantityError),
    Bad("huge-percentage", pod(ctr("trainer", {GPU: 1, PCT: "1" + "0" * 5000})),
        ("container 'trainer'", PCT, "out of range"), error=QuantityError),
    Bad("custom-name-in-message", pod(ctr("t", {"example.com/vmem": "x"})),
        ("container 't'", "example.com/vmem"), config=CUSTOM, error=QuantityError),
    # HAMi's webhook refuses a percentage outside 0-100 with these words.
    Bad("percentage-101", pod(ctr("trainer", {GPU: 1, PCT: 101})),
        ("container 'trainer'", PCT, "101", "between 0 and 100")),
    Bad("percentage-negative", pod(ctr("trainer", {GPU: 1, PCT: -5})),
        ("container 'trainer'", PCT, "-5", "negative")),
    Bad("cores-negative", pod(ctr("trainer", {GPU: 1, CORES: -1})),
        ("container 'trainer'", CORES, "-1", "negative")),
    Bad("count-negative", pod(ctr("trainer", {GPU: "-2"})),
        ("container 'trainer'", GPU, "-2")),
    Bad("priority-negative", pod(ctr("trainer", {GPU: 1, PRIO: -1})),
        ("container 'trainer'", PRIO, "-1")),
    Bad("duplicate-container-names", pod(ctr("dup", {GPU: 1}), ctr("dup", {GPU: 1})),
        ("container 'dup'", "unique")),
    Bad("duplicate-init-and-regular-names",
        pod(ctr("dup", {GPU: 1}), init=(ctr("dup", {GPU: 1}),)),
        ("container 'dup'", "unique")),
    Bad("nameless-gpu-container", pod({"resources": {"limits": {GPU: 1}}}),
        ("spec.containers[0]", "name")),
    Bad("non-string-name", pod({"name": 7, "resources": {"limits": {GPU: 1}}}),
        ("spec.containers[0]", "name")),
    Bad("container-not-a-mapping", pod(ctr("a", {GPU: 1}), "not-a-container"),  # type: ignore[arg-type]
        ("spec.containers[1]", "mapping")),
    Bad("init-container-not-a-mapping", pod(ctr("a"), init=(["x"],)),  # type: ignore[arg-type]
        ("spec.initContainers[0]", "mapping")),
    Bad("resources-not-a-mapping", pod({"name": "a", "resources": ["limits"]}),
        ("container 'a'", "resources must be a mapping")),
    Bad("limits-not-a-mapping", pod({"name": "a", "resources": {"limits": [GPU]}}),
        ("container 'a'", "resources.limits")),
    Bad("requests-not-a-mapping", pod({"name": "a", "resources": {"requests": "1"}}),
        ("container 'a'", "resources.requests")),
    Bad("containers-not-a-list", {"spec": {"containers": {"name": "a"}}},
        ("spec.containers", "list")),
    Bad("pod-not-a-mapping", ["pod"], ("pod", "JSON object")),
    Bad("pod-without-spec", {"metadata": {"name": "x"}}, ("no spec",)),
    Bad("spec-not-a-mapping", {"spec": []}, ("no spec",)),
    Bad("metadata-not-a-mapping", {"metadata": "x", "spec": {"containers": []}},
        ("metadata",)),
    Bad("annotations-not-a-mapping",
        {"metadata": {"annotations": ["a"]}, "spec": {"containers": []}},
        ("annotations",)),
    Bad("unknown-gpu-policy-vgpu-io",
        pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/gpu-scheduler-policy": "worst-fit"}),
        ("vgpu.io/gpu-scheduler-policy", "'worst-fit'", *policy.GPU_POLICIES)),
    Bad("unknown-node-policy-vgpu-io",
        pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/node-scheduler-policy": "random"}),
        ("vgpu.io/node-scheduler-policy", "'random'", *policy.NODE_POLICIES)),
    Bad("gpu-policy-name-is-not-a-node-policy",
        pod(ctr(limits={GPU: 1}),
            annotations={"vgpu.io/node-scheduler-policy": "lowest-task-count"}),
        ("vgpu.io/node-scheduler-policy", "binpack, spread")),
    # hami.io/device-scoring-weights, refused as HAMi refuses it.
    Bad("weights-two-keys", pod(ctr(limits={GPU: 1}),
                                annotations={WEIGHTS: "slot=1,core=1"}),
        (WEIGHTS, "slot, core and memory")),
    Bad("weights-duplicate", pod(ctr(limits={GPU: 1}),
                                 annotations={WEIGHTS: "slot=1,slot=2,memory=1"}),
        (WEIGHTS, "'slot' is given twice")),
    Bad("weights-not-integer", pod(ctr(limits={GPU: 1}),
                                   annotations={WEIGHTS: "slot=1,core=x,memory=1"}),
        (WEIGHTS, "'core' weight must be a whole number")),
    Bad("weights-negative", pod(ctr(limits={GPU: 1}),
                                annotations={WEIGHTS: "slot=1,core=-1,memory=1"}),
        (WEIGHTS, "must not be negative")),
    Bad("weights-unknown-key", pod(ctr(limits={GPU: 1}),
                                   annotations={WEIGHTS: "slot=1,core=1,disk=1"}),
        (WEIGHTS, "unknown weight 'disk'")),
    Bad("weights-all-zero", pod(ctr(limits={GPU: 1}),
                                annotations={WEIGHTS: "slot=0,core=0,memory=0"}),
        (WEIGHTS, "at least one weight")),
    Bad("weights-no-equals", pod(ctr(limits={GPU: 1}),
                                 annotations={WEIGHTS: "slot,core=1,memory=1"}),
        (WEIGHTS, "key=value")),
    Bad("gpu-topology-unknown-mode",
        pod(ctr(limits={GPU: 2}), annotations={"vgpu.io/gpu-topology": "nvlink"}),
        ("vgpu.io/gpu-topology", "'nvlink'", "preferred or required")),
]


@pytest.mark.parametrize("case", REJECTED, ids=[c.id for c in REJECTED])
def test_parse_pod_rejects(case: Bad) -> None:
    with pytest.raises(case.error) as caught:
        parse_pod(case.pod, case.config)
    message = str(caught.value)
    for fragment in case.fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@settings(max_examples=100, deadline=None)
@given(json_like)
def test_parse_pod_raises_only_request_errors(obj: Any) -> None:
    # Whatever arrives, the caller gets a PodRequest or a RequestError, never a traceback.
    with contextlib.suppress(RequestError):
        parse_pod(obj, DEFAULT)


@dataclass(frozen=True)
class Noted:
    """A value HAMi accepts that vgpu once refused: admitted, with HAMi's meaning, and a
    note (the webhook's admission warning) saying what it means."""

    id: str
    pod: Any
    count: int | None
    fragments: tuple[str, ...]
    cores: int | None = None


NOTED: list[Noted] = [
    Noted("count-0-is-no-gpu", pod(ctr("trainer", {GPU: 0, MEM: 1000})), None,
          (GPU, "0 asks for no GPU")),
    Noted("priority-alone-is-no-gpu", pod(ctr("trainer", {PRIO: 1})), None,
          (PRIO, "alone asks for no GPU")),
    Noted("gpumem-0-is-the-default", pod(ctr("trainer", {GPU: 1, MEM: 0})), 1,
          (MEM, "0 means not given")),
    Noted("percentage-0-is-the-default", pod(ctr("trainer", {GPU: 1, PCT: 0})), 1,
          (PCT, "0 means not given")),
    Noted("both-memories-gpumem-wins", pod(ctr("trainer", {GPU: 1, MEM: 1000, PCT: 50})), 1,
          (MEM, PCT, "wins")),
    Noted("cores-over-100-is-100", pod(ctr("trainer", {GPU: 1, MEM: 10, CORES: 150})), 1,
          (CORES, "150 is 100"), cores=100),
    Noted("priority-2-is-low", pod(ctr("trainer", {GPU: 1, PRIO: 2})), 1,
          (PRIO, "as 1")),
    Noted("unknown-gpu-policy-hami-io",
          pod(ctr(limits={GPU: 1}), annotations={"hami.io/gpu-scheduler-policy": "Binpack"}), 1,
          ("hami.io/gpu-scheduler-policy", "'Binpack'", "ignored")),
    Noted("unknown-node-policy-hami-io",
          pod(ctr(limits={GPU: 1}), annotations={"hami.io/node-scheduler-policy": ""}), 1,
          ("hami.io/node-scheduler-policy", "binpack")),
    Noted("numa-bind-not-boolean",
          pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/numa-bind": "maybe"}), 1,
          ("nvidia.com/numa-bind", "'maybe'", "no NUMA binding")),
    Noted("topology-aware-is-vgpus-link-choice",
          pod(ctr(limits={GPU: 2}),
              annotations={"hami.io/gpu-scheduler-policy": "binpack,topology-aware"}), 2,
          ("topology-aware", "link-aware")),
    Noted("vgpu-mode-mig", pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/vgpu-mode": "mig"}),
          1, ("nvidia.com/vgpu-mode", "MIG", "waits")),
]


@pytest.mark.parametrize("case", NOTED, ids=[c.id for c in NOTED])
def test_parse_pod_notes(case: Noted) -> None:
    parsed = parse_pod(case.pod, DEFAULT)
    counts = [c.count for c in parsed.containers]
    assert counts == ([] if case.count is None else [case.count])
    if case.cores is not None:
        assert parsed.containers[0].cores == case.cores
    text = " ".join(parsed.notes)
    for fragment in case.fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
