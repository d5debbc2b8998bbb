"""The derived requests' invariant on generated pods: Kubernetes charges exactly what vgpu
holds (the sum over every GPU container), with and without sidecar support, and no init
container carries a derived request."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.pods import HOMOGENEOUS, MIXED, admit, ctr, pod
from tests.webhook.quota_support import THREE, derived_of, true_total, without_sidecars
from vgpu.config import Config, ResourceNames
from vgpu.pods import containers
from vgpu.quota_charge import pod_charge
from vgpu_webhook.gpus import ClusterGpus

GPU, MEM, PCT, CORES, _ = ResourceNames().all()

_gpu_limits = st.fixed_dictionaries(
    {GPU: st.integers(1, 4).map(str)},
    optional={MEM: st.integers(1, 40960).map(str), PCT: st.integers(1, 100).map(str),
              CORES: st.integers(0, 100).map(str)},
).filter(lambda d: not (MEM in d and PCT in d))
_limits = st.one_of(st.none(), st.just({"cpu": "1"}), _gpu_limits)


@st.composite
def _pods(draw: st.DrawFn) -> dict[str, Any]:
    apps = draw(st.lists(_limits, min_size=1, max_size=3))
    inits = draw(st.lists(st.tuples(_limits, st.booleans()), max_size=3))
    # Copies: a drawn dict may be the same object in several containers, and an
    # aliased limits map would take one container's patch into another.
    app_containers = [ctr(f"a{i}", copy.deepcopy(limits)) for i, limits in enumerate(apps)]
    init_containers = tuple({**ctr(f"i{i}", copy.deepcopy(limits)),
                             **({"restartPolicy": "Always"} if side else {})}
                            for i, (limits, side) in enumerate(inits))
    return pod(*app_containers, init=init_containers)


@settings(max_examples=200, deadline=None)
@given(_pods(), st.sampled_from([HOMOGENEOUS, MIXED, THREE]))
def test_kubernetes_charges_what_vgpu_holds(obj: dict[str, Any], gpus: ClusterGpus) -> None:
    response, patched = admit(obj, gpus)
    assert response["allowed"] is True
    total = true_total(patched, Config(), gpus)
    assert pod_charge(patched) == total
    assert pod_charge(without_sidecars(patched)) == total
    for ref in containers(patched):
        if ref.init:
            assert derived_of(ref.container) == ({}, {})
