"""Reading a node list and a pod list in the Alibaba GPU-sharing trace format.

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model``. Pod list columns:
``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec`` (plus columns the replay does
not use); the ``nomem`` variants have no ``memory_mib``, which then means "no memory
request". Files may be gzip-compressed (``.gz``). Every malformed row is reported with the
file, line and column, never as a traceback.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from vgpu.errors import ConfigError

MILLI = 1000


class TraceError(ConfigError):
    """A trace file the user named cannot be read or does not follow the format."""


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # empty for a CPU-only node


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int | None  # None: the list carries no memory column
    num_gpu: int
    gpu_milli: int  # per GPU, 0..1000
    gpu_spec: tuple[str, ...] = ()  # allowed GPU models; empty = any
    #: Seconds from the trace's start (``--churn`` only; whole in a list, fractions once
    #: ``--load`` compressed them); None: the list has no such column or the cell is empty
    #: (a deletion time missing means the pod ran to the end).
    creation_time: float | None = None
    deletion_time: float | None = None

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def is_gpu_share(self) -> bool:
        return self.num_gpu >= 1 and self.gpu_milli < MILLI


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "num_gpu", "gpu_milli")


def _open_text(source: str | Path) -> Iterator[str]:
    path = Path(source)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise TraceError(f"{path}: not a valid gzip file: {exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    return iter(io.StringIO(text, newline=""))


def _rows(source: str | Path, required: Iterable[str]) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(_open_text(source))
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(f"{source}: missing column(s) {', '.join(missing)}; the header is "
                         f"{','.join(header) or '(empty)'}")
    for row in reader:
        # DictReader puts surplus fields under None and fills short rows with None.
        if None in row or any(v is None for v in row.values()):
            raise TraceError(f"{source}:{reader.line_num}: expected {len(header)} fields")
        yield reader.line_num, row


def _int(row: Mapping[str, str], column: str, where: str, *, lo: int = 0,
         hi: int | None = None) -> int:
    text = row[column].strip()
    try:
        # The trace writes whole numbers, some tools as "4.0"; anything else is an error.
        value = float(text) if "." in text else int(text)
    except ValueError:
        raise TraceError(f"{where}: {column} is {text!r}, not a number") from None
    if isinstance(value, float):
        if not value.is_integer():
            raise TraceError(f"{where}: {column} is {text!r}, not a whole number")
        value = int(value)
    if value < lo or (hi is not None and value > hi):
        bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise TraceError(f"{where}: {column} is {value}; it must be {bounds}")
    return value


def _time(row: Mapping[str, str], column: str, where: str) -> int | None:
    if not (row.get(column) or "").strip():
        return None
    return _int(row, column, where)


def _model(text: str) -> str:
    text = text.strip()
    # pandas writes a missing model as "nan"; a CPU-only node has none.
    return "" if text.lower() in ("", "nan", "none") else text


def load_nodes(source: str | Path) -> list[TraceNode]:
    nodes: list[TraceNode] = []
    seen: set[str] = set()
    for line, row in _rows(source, NODE_COLUMNS):
        where = f"{source}:{line}"
        name = row["sn"].strip()
        if not name:
            raise TraceError(f"{where}: sn (the node name) is empty")
        if name in seen:
            raise TraceError(f"{where}: node {name} appears twice")
        seen.add(name)
        gpus = _int(row, "gpu", where, hi=64)
        model = _model(row["model"])
        if gpus and not model:
            raise TraceError(f"{where}: node {name} has {gpus} GPUs but no model")
        nodes.append(TraceNode(name=name, cpu_milli=_int(row, "cpu_milli", where),
                               memory_mib=_int(row, "memory_mib", where), gpus=gpus,
                               model=model if gpus else ""))
    if not nodes:
        raise TraceError(f"{source}: no nodes")
    return nodes


def load_pods(source: str | Path) -> list[TracePod]:
    pods: list[TracePod] = []
    seen: set[str] = set()
    has_memory: bool | None = None
    for line, row in _rows(source, POD_COLUMNS):
        where = f"{source}:{line}"
        if has_memory is None:
            has_memory = "memory_mib" in row
        name = row["name"].strip()
        if not name:
            raise TraceError(f"{where}: name is empty")
        if name in seen:
            raise TraceError(f"{where}: pod {name} appears twice")
        seen.add(name)
        num_gpu = _int(row, "num_gpu", where, hi=64)
        gpu_milli = _int(row, "gpu_milli", where, hi=MILLI)
        if num_gpu and not gpu_milli:
            raise TraceError(f"{where}: pod {name} asks for {num_gpu} GPUs with gpu_milli 0")
        if gpu_milli and not num_gpu:
            raise TraceError(f"{where}: pod {name} has gpu_milli {gpu_milli} but num_gpu 0")
        spec_text = (row.get("gpu_spec") or "").strip()
        spec = tuple(s.strip() for s in spec_text.split("|") if s.strip()) if _model(
            spec_text) else ()
        pods.append(TracePod(
            name=name, cpu_milli=_int(row, "cpu_milli", where),
            memory_mib=_int(row, "memory_mib", where) if has_memory else None,
            num_gpu=num_gpu, gpu_milli=gpu_milli, gpu_spec=spec,
            creation_time=_time(row, "creation_time", where),
            deletion_time=_time(row, "deletion_time", where),
        ))
    if not pods:
        raise TraceError(f"{source}: no pods")
    return pods


def write_pods(target: str | Path, pods: Iterable[TracePod]) -> None:
    """A pod list in the format :func:`load_pods` reads (``memory_mib`` only if every pod has
    one), so a generated variant replays like a bundled one."""
    rows = list(pods)
    memory = all(p.memory_mib is not None for p in rows)
    columns = ["name", "cpu_milli", *(["memory_mib"] if memory else []), "num_gpu",
               "gpu_milli", "gpu_spec"]
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for p in rows:
            writer.writerow([p.name, p.cpu_milli, *([p.memory_mib] if memory else []),
                             p.num_gpu, p.gpu_milli, "|".join(p.gpu_spec)])


def gpu_capacity_milli(nodes: Iterable[TraceNode]) -> int:
    return sum(n.gpus for n in nodes) * MILLI
