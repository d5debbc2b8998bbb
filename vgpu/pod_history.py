"""A GPU pod's history as the components record it on the pod, for ``vgpu why``: what the
webhook and the node agent did to it, in two annotations.

Both ride on a write the component makes anyway, so recording costs no API call:

- ``vgpu.io/admission``, added by the webhook inside its own JSONPatch when it mutates a
  GPU pod: what it changed.
  ``{"version": 1, "changes": ["spec.schedulerName: vgpu-scheduler", ...]}``
- ``vgpu.io/allocation``, written by the node agent in the same patch that sets
  ``vgpu.io/bind-phase: success``: when the pod's last container was answered, how long
  after the binding, and the isolation the containers were given.
  ``{"version": 1, "time": "<RFC 3339>", "node": "gpu-a", "bind_to_allocate_seconds":
  0.41, "containers": ["main"], "isolation": {"mode": "hami-core", "enforced": true,
  "detail": "..."}}``

``isolation.mode`` is an open set (``none``, ``hami-core``, ``mps``; :mod:`vgpu.isolation_modes`):
readers show a mode they do not know as it is. Decoding is strict, as for the other
annotations (:mod:`vgpu.codecs`): a malformed record raises ``CodecError``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from vgpu import times
from vgpu.errors import CodecError

ADMISSION = "vgpu.io/admission"
ALLOCATION = "vgpu.io/allocation"
VERSION = 1


@dataclass(frozen=True)
class Isolation:
    mode: str
    #: Whether something in the container enforces the limits (a preloaded library, MPS).
    enforced: bool
    detail: str = ""


@dataclass(frozen=True)
class Allocation:
    time: dt.datetime
    node: str
    containers: tuple[str, ...]
    isolation: Isolation
    bind_to_allocate_seconds: float | None = None


def _object(raw: str, key: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{key}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CodecError(f"{key}: expected a JSON object")
    if data.get("version") != VERSION:
        raise CodecError(f"{key}: unsupported version {data.get('version')!r} "
                         f"(this vgpu reads version {VERSION})")
    return data


def encode_admission(changes: list[str]) -> str:
    return json.dumps({"version": VERSION, "changes": changes}, separators=(",", ":"))


def decode_admission(raw: str) -> tuple[str, ...]:
    changes = _object(raw, ADMISSION).get("changes")
    if not isinstance(changes, list) or not all(isinstance(c, str) for c in changes):
        raise CodecError(f"{ADMISSION}: 'changes' must be a list of strings")
    return tuple(changes)


def encode_allocation(record: Allocation) -> str:
    body: dict[str, Any] = {
        "version": VERSION, "time": times.format_micro(record.time), "node": record.node,
        "containers": list(record.containers),
        "isolation": {"mode": record.isolation.mode, "enforced": record.isolation.enforced,
                      "detail": record.isolation.detail}}
    if record.bind_to_allocate_seconds is not None:
        body["bind_to_allocate_seconds"] = round(record.bind_to_allocate_seconds, 3)
    return json.dumps(body, separators=(",", ":"))


def decode_allocation(raw: str) -> Allocation:
    data = _object(raw, ALLOCATION)
    isolation = data.get("isolation")
    containers = data.get("containers")
    seconds = data.get("bind_to_allocate_seconds")
    if not isinstance(isolation, dict) or not isinstance(isolation.get("mode"), str):
        raise CodecError(f"{ALLOCATION}: 'isolation' must be an object with a 'mode'")
    if not isinstance(containers, list) or not all(isinstance(c, str) for c in containers):
        raise CodecError(f"{ALLOCATION}: 'containers' must be a list of names")
    if seconds is not None and (isinstance(seconds, bool)
                                or not isinstance(seconds, int | float)):
        raise CodecError(f"{ALLOCATION}: 'bind_to_allocate_seconds' must be a number")
    return Allocation(
        time=times.parse(data.get("time"), ALLOCATION), node=str(data.get("node", "")),
        containers=tuple(containers),
        isolation=Isolation(isolation["mode"], bool(isolation.get("enforced", False)),
                            str(isolation.get("detail", ""))),
        bind_to_allocate_seconds=None if seconds is None else float(seconds))
