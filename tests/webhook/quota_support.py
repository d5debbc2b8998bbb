"""What the derived-requests tests read back from a patched pod."""

from __future__ import annotations

import copy
from typing import Any

from tests.webhook.pods import A100, T4, node_inventory
from vgpu import quota_charge
from vgpu.config import Config
from vgpu.init_reuse import first_app, nests
from vgpu.quota_charge import Charge
from vgpu.requests import parse_pod
from vgpu_webhook.derived_requests import container_charge, memory_per_vgpu
from vgpu_webhook.gpus import ClusterGpus

#: An H100 node beside an A100 40 GB and a T4 16 GB node: three GPU sizes.
THREE = ClusterGpus.from_inventories([
    node_inventory(A100, 40960, 4, "a0"), node_inventory(T4, 15360, 2, "t0"),
    node_inventory("NVIDIA H100 80GB HBM3", 81559, 8, "h0")])


def derived_of(container: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    return ({n: v for n, v in limits.items() if n in quota_charge.NAMES},
            {n: v for n, v in requests.items() if n in quota_charge.NAMES})


def without_sidecars(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as an API server without sidecar support stores it (the field dropped)."""
    out = copy.deepcopy(obj)
    for c in out["spec"].get("initContainers") or []:
        c.pop("restartPolicy", None)
    return out


def true_total(obj: dict[str, Any], config: Config, gpus: ClusterGpus) -> Charge:
    """The most vgpu holds for the pod: every GPU container's vGPUs, MiB and cores, summed,
    from the pod after admission (gpumem resolved where the webhook resolved it), but for
    the init containers placed inside the first GPU app container's slices, which hold
    nothing more (vgpu.init_reuse)."""
    parsed = parse_pod(obj, config)
    app = first_app(parsed.containers)
    total = quota_charge.NONE
    namespace = obj["metadata"].get("namespace", "default")
    for request in parsed.containers:
        if nests(request, app):
            continue
        total += container_charge(request, memory_per_vgpu(request, parsed, config, gpus,
                                                           namespace))
    return total
