"""What the webhook adds to a GPU pod for the operator's HAMi settings
(docs/hami-migration.md#configuration): ``runtimeClassName`` and ``overwriteEnv``.

- ``runtimeClassName``: a GPU pod that names no RuntimeClass gets this one, as HAMi's
  webhook gives it (the NVIDIA container runtime's class, on clusters where it is not the
  default runtime).
- ``overwriteEnv``: each container of a GPU pod that asks for no GPU and does not set
  ``NVIDIA_VISIBLE_DEVICES`` gets ``NVIDIA_VISIBLE_DEVICES=none``, so that an image that
  sets it to ``all`` does not see every GPU of the node through the NVIDIA runtime. HAMi's
  webhook does this for every pod it sees; vgpu's sees only GPU pods (its
  ``matchConditions``), so only their other containers get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.config import Config
from vgpu.container_request import resources
from vgpu.requests import ParsedPod, SpecContainer
from vgpu_webhook.patch import Op, add

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def _names_vgpu_resource(container: SpecContainer, config: Config) -> bool:
    limits, requests = resources(container.container, container.name)
    return any(n in limits or n in requests for n in config.resource_names.all())


def _sets_visible_devices(container: Mapping[str, Any]) -> bool:
    env = container.get("env")
    return isinstance(env, list) and any(
        isinstance(e, Mapping) and e.get("name") == VISIBLE_DEVICES for e in env)


def knob_ops(parsed: ParsedPod, config: Config) -> list[Op]:
    """The operations for ``runtimeClassName`` and ``overwriteEnv`` (none when both are
    off, or the pod has what they would give)."""
    ops: list[Op] = []
    if config.runtime_class_name and not parsed.spec.get("runtimeClassName"):
        ops.append(add("/spec/runtimeClassName", config.runtime_class_name))
    if not config.overwrite_env:
        return ops
    for container in parsed.containers:
        if container.request is not None or _names_vgpu_resource(container, config) \
                or _sets_visible_devices(container.container):
            continue
        entry = {"name": VISIBLE_DEVICES, "value": "none"}
        base = f"/spec/{container.key}/{container.position}/env"
        if isinstance(container.container.get("env"), list):
            ops.append(add(f"{base}/-", entry))
        else:
            ops.append(add(base, [entry]))
    return ops
