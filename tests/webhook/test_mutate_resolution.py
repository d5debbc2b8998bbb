"""A gpumem-percentage the webhook resolves into MiB leaves the rest of the request as it
was."""

from __future__ import annotations

from tests.webhook.mutate_support import CORES, GPU, PCT, PRIO
from tests.webhook.pods import HOMOGENEOUS, admit, ctr, pod
from vgpu.config import Config
from vgpu.requests import parse_pod


def test_resolution_keeps_every_other_request_field() -> None:
    p = pod(ctr("c", {GPU: "2", PCT: "50", CORES: "30", PRIO: "0"}))
    _, patched = admit(p, HOMOGENEOUS)
    before = parse_pod(p, Config()).containers[0]
    after = parse_pod(patched, Config()).containers[0]
    assert (after.count, after.cores, after.priority) == (before.count, before.cores,
                                                          before.priority)
    assert (after.memory_mib, after.memory_percent) == (20480, None)

