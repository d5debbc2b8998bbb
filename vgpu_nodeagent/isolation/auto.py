"""``isolation.mode: auto``: the strongest mode this node supports, chosen at start.

Strongest first (:func:`vgpu.isolation_modes.strongest`): MPS holds memory and compute, so an
MPS mode where the node can run it, with HAMi-core's memory report (``mps-hami-core``) where
its library checked out; else ``hami-core`` where the library checked out; else ``none``.
A node can run MPS when

- the scheduler keeps each MPS GPU to one Linux user (``isolation.mps.placeByUser``): one
  MPS daemon serves one uid at a time, and pods of two would stall each other;
- ``deviceSplitCount`` is within MPS's client limit (``isolation.mps.maxClients``);
- every GPU is Volta or later (compute capability 7): older GPUs have no per-client limits;
- the MPS control program (``isolation.mps.controlCommand``) is found in the agent: the
  NVIDIA container runtime mounts it with the ``compute`` driver capability (the ``mps``
  overlay's settings).

The choice is the node's configured mode from then on: it falls back while the daemon is
down, and reports what it chose in the inventory (``isolation.configured``, ``auto: true``).
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence

from vgpu import isolation_modes
from vgpu.config import Config
from vgpu.config.isolation_section import check_split
from vgpu_nodeagent.devices.discovery import GpuFacts

#: The first CUDA compute capability with MPS per-client limits (Volta).
MPS_LIMITS_FROM = 7


def mps_possible(config: Config, facts: Sequence[GpuFacts]) -> str | None:
    """Why the node cannot run MPS; None when it can."""
    mps = config.isolation.mps
    if not mps.place_by_user:
        return ("isolation.mps.placeByUser is false: pods of two uids on one MPS GPU would "
                "stall each other")
    problem = check_split(isolation_modes.MPS, config.device_split_count, mps)
    if problem is not None:
        return problem
    old = [f for f in facts if 0 < f.compute_major < MPS_LIMITS_FROM]
    if old:
        return (f"GPU {old[0].uuid} ({old[0].model}) has compute capability "
                f"{old[0].compute_major}: MPS limits memory and compute per client from "
                f"Volta ({MPS_LIMITS_FROM}) on")
    try:
        program = shlex.split(mps.control_command)[0]
    except (ValueError, IndexError):
        return f"isolation.mps.controlCommand {mps.control_command!r} names no program"
    if shutil.which(program) is None:
        return (f"the MPS control program {program} is not in the agent (give it the NVIDIA "
                f"runtime's compute capability and the MPS folders: manifests/overlays/mps)")
    return None


def choose(config: Config, facts: Sequence[GpuFacts], library: bool) -> tuple[str, str]:
    """The mode ``auto`` runs on this node, and why that one."""
    why_not = mps_possible(config, facts)
    mode = isolation_modes.strongest(why_not is None, library)
    reasons = []
    if why_not is not None:
        reasons.append(f"no MPS: {why_not}")
    if not library:
        reasons.append("no HAMi-core library that checked out")
    return mode, f"{mode} ({'; '.join(reasons) or 'MPS and HAMi-core both available'})"
