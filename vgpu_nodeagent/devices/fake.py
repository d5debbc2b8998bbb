"""The fake discovery backend: GPUs described by a YAML or JSON file.

``{"devices": [{"uuid": "GPU-...", "index": 0, "model": "NVIDIA A100-SXM4-40GB",
"memory_mib": 40960, "numa": 0}]}``, each device optionally with ``healthy``,
``memory_used_mib`` and ``utilization`` (percent) for the metrics, and ``mig``; optionally
``links`` between the GPUs (:mod:`vgpu_nodeagent.devices.fake_links`). The file is
read again when it changes (its size, modification time or inode), so a test or an operator
flips a GPU's health by rewriting it. A file that turns unreadable or invalid later keeps
the last good devices and logs why; at startup it is an error.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from vgpu import logs
from vgpu.errors import DiscoveryError
from vgpu.topology.links import GpuLink
from vgpu_nodeagent.devices.discovery import (
    NUMA_UNKNOWN,
    FaultHandler,
    GpuFacts,
    GpuProcess,
    GpuSample,
)
from vgpu_nodeagent.devices.fake_links import parse_links

_log = logs.get("vgpu.nodeagent.fake")

_KEYS = {"uuid", "index", "model", "memory_mib", "numa", "healthy", "memory_used_mib",
         "utilization", "mig", "processes", "compute_major"}
#: The highest CUDA version NVML could report (99.9), the ceiling of the file's.
_CUDA_VERSION_MAX = 99090


def _opt_int(obj: Mapping[str, Any], key: str, where: str, *, lo: int,
             hi: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DiscoveryError(f"{where}.{key}: expected an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        bounds = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise DiscoveryError(f"{where}.{key}: {value} is out of range; it must be {bounds}")
    return value


def _int(obj: Mapping[str, Any], key: str, where: str, *, lo: int) -> int:
    value = _opt_int(obj, key, where, lo=lo)
    if value is None:
        raise DiscoveryError(f"{where}: {key} is missing")
    return value


def _bool(obj: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise DiscoveryError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def _processes(raw: Any, where: str) -> tuple[GpuProcess, ...]:
    """``[{"pid": 4242, "used_memory_mib": 5120}]``: what NVML's running compute processes
    would list, for the usage watchdog."""
    if not isinstance(raw, list):
        raise DiscoveryError(f"{where}: expected a list of {{pid, used_memory_mib}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise DiscoveryError(f"{where}[{i}]: expected a mapping")
        out.append(GpuProcess(_int(item, "pid", f"{where}[{i}]", lo=1),
                              _opt_int(item, "used_memory_mib", f"{where}[{i}]", lo=0)))
    return tuple(out)


@dataclass(frozen=True)
class FakeFile:
    """A fake-devices file, read: the GPUs in index order, their samples by UUID, and the
    links between them (None: the file gives none)."""

    facts: tuple[GpuFacts, ...]
    samples: dict[str, GpuSample] = field(default_factory=dict)
    links: tuple[GpuLink, ...] | None = None
    #: The driver's CUDA version as NVML gives it (12040); None: the file says none.
    cuda_driver_version: int | None = None


def parse(text: str, source: str) -> FakeFile:
    """Validate a fake-device document; errors name the file, the device and the key."""
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DiscoveryError(f"{source}: not valid YAML or JSON: {exc}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("devices"), list):
        raise DiscoveryError(f"{source}: expected a mapping with a list under 'devices'")
    facts: list[GpuFacts] = []
    samples: dict[str, GpuSample] = {}
    for i, item in enumerate(data["devices"]):
        where = f"{source}: devices[{i}]"
        if not isinstance(item, Mapping):
            raise DiscoveryError(f"{where}: expected a mapping")
        unknown = sorted(set(item) - _KEYS)
        if unknown:
            raise DiscoveryError(f"{where}.{unknown[0]}: unknown key; allowed: "
                                 f"{', '.join(sorted(_KEYS))}")
        uuid, model = item.get("uuid"), item.get("model")
        if not isinstance(uuid, str) or not uuid.strip():
            raise DiscoveryError(f"{where}.uuid: expected a non-empty string")
        if not isinstance(model, str) or not model.strip():
            raise DiscoveryError(f"{where}.model: expected a non-empty string")
        numa = _opt_int(item, "numa", where, lo=-1)
        fact = GpuFacts(
            uuid=uuid.strip(), model=model.strip(),
            index=_int(item, "index", where, lo=0),
            memory_mib=_int(item, "memory_mib", where, lo=1),
            numa=NUMA_UNKNOWN if numa is None else numa,
            mig=_bool(item, "mig", where, False),
            healthy=_bool(item, "healthy", where, True),
            compute_major=_opt_int(item, "compute_major", where, lo=0, hi=99) or 0,
        )
        if any(f.uuid == fact.uuid for f in facts):
            raise DiscoveryError(f"{where}.uuid: {fact.uuid} appears twice")
        if any(f.index == fact.index for f in facts):
            raise DiscoveryError(f"{where}.index: {fact.index} appears twice")
        facts.append(fact)
        samples[fact.uuid] = GpuSample(
            memory_used_mib=_opt_int(item, "memory_used_mib", where, lo=0),
            utilization=_opt_int(item, "utilization", where, lo=0, hi=100),
            processes=_processes(item.get("processes", []), f"{where}.processes"),
        )
    ordered = tuple(sorted(facts, key=lambda f: f.index))
    links = data.get("links")
    return FakeFile(ordered, samples,
                    None if links is None else parse_links(links, source, ordered),
                    _opt_int(data, "cuda_driver_version", source, lo=1000,
                             hi=_CUDA_VERSION_MAX))


class FakeDiscovery:
    name = "fake"

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._file = self._read_now()

    def _stat(self) -> tuple[int, int, int]:
        st = os.stat(self.path)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _read_now(self) -> FakeFile:
        try:
            stamp = self._stat()
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise DiscoveryError(f"{self.path}: cannot read the fake-device file: "
                                 f"{exc.strerror}") from None
        result = parse(text, self.path)
        self._stamp = stamp
        return result

    def devices(self) -> tuple[GpuFacts, ...]:
        with self._lock:
            return self._file.facts

    def links(self) -> tuple[GpuLink, ...] | None:
        with self._lock:
            return self._file.links

    def refresh(self) -> bool:
        try:
            stamp = self._stat()
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return False
        try:
            read = self._read_now()
        except DiscoveryError as exc:
            if stamp != self._stamp:
                _log.error("fake-device file unusable, keeping the last devices",
                           error=str(exc))
                self._stamp = stamp
            return False
        with self._lock:
            changed = (read.facts, read.links) != (self._file.facts, self._file.links)
            self._file = read
        if changed:
            _log.info("fake-device file changed", path=self.path, gpus=len(read.facts))
        return changed

    def samples(self) -> Mapping[str, GpuSample]:
        with self._lock:
            return dict(self._file.samples)

    def watch_faults(self, on_fault: FaultHandler, stop: threading.Event) -> None:
        # The file states health directly (its `healthy` key); there are no XIDs to watch.
        return None

    def cuda_driver_version(self) -> int | None:
        with self._lock:
            return self._file.cuda_driver_version

    def close(self) -> None:
        return None
