"""The webhook's registration: the CEL match condition for the configured resource names.

``manifests/webhook/mutatingwebhookconfiguration.yaml`` carries the expression for the
default names; a cluster that renames the resources regenerates it with
:func:`match_expression` (the registration test keeps the two in step).
"""

from __future__ import annotations

from vgpu.config import ResourceNames


def match_expression(names: ResourceNames) -> str:
    """CEL that is true for a pod whose containers or init containers name one of
    ``names`` in limits or requests: the same test as ``vgpu.requests.names_gpu_resource``.

    The exact names, not ``nvidia.com/*``: pods asking for resources of NVIDIA's own device
    plugin (``nvidia.com/mig-1g.5gb``, ...) are not vgpu's and must not be routed here.
    """
    listed = "[" + ", ".join(f"'{name}'" for name in names.all()) + "]"
    one = (f"has(c.resources) && ("
           f"(has(c.resources.limits) && c.resources.limits.exists(r, r in {listed})) || "
           f"(has(c.resources.requests) && c.resources.requests.exists(r, r in {listed})))")
    return (f"(has(object.spec.containers) && object.spec.containers.exists(c, {one})) || "
            f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {one}))")
