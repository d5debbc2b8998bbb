"""The openb workload of the scheduling benches: the Alibaba trace's GPU nodes and pods as
API objects, a synthetic node set, and the Deployment-style constraints of
``--constrained``."""

from __future__ import annotations

import csv
import gzip
import math
import os
from pathlib import Path
from typing import IO, Any

from _support import ROOT

from vgpu import builders
from vgpu.devices import Device
from vgpu.topology.links import GpuLink

#: The trace as the repository bundles it (vgpu_simulate/data); VGPUDEV_TRACES names a
#: folder of the plain CSV files instead.
TRACES = os.environ.get("VGPUDEV_TRACES")
NODES_CSV = "openb_node_list_gpu_node.csv"
PODS_CSV = "openb_pod_list_default.csv"


def _open(name: str) -> IO[str]:
    if TRACES:
        return (Path(TRACES) / name).open()
    return gzip.open(ROOT / "vgpu_simulate" / "data" / f"{name}.gz", "rt")

# The trace gives models only; memory sizes are the public ones (G1-G3 are undisclosed
# internal models, given 32 GiB). Requests are shares, so sizes only matter for rounding.
MODEL_MEMORY = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768,
                "A10": 24576, "G1": 32768, "G2": 32768, "G3": 32768}
NOW = 1_800_000_000.0


def clock() -> float:
    return NOW


def _gpus(name: str, count: int, topology: str | None, **kind: Any
          ) -> tuple[tuple[Device, ...], tuple[GpuLink, ...] | None]:
    """The node's GPUs, and with ``topology`` (a vgpu.topology.shapes name) their links."""
    if topology is None:
        return builders.devices(name, count, **kind), None
    return builders.shaped_devices(name, count, topology, **kind)


def openb_nodes(topology: str | None = None) -> list[dict[str, Any]]:
    out = []
    with _open(NODES_CSV) as f:
        for row in csv.DictReader(f):
            name, model, count = row["sn"], row["model"], int(row["gpu"])
            gpus, links = _gpus(name, count, topology, model=model,
                                memory_mib=MODEL_MEMORY.get(model, 32768))
            out.append(builders.node(name, gpus, cpu=f"{row['cpu_milli']}m",
                                  memory=f"{row['memory_mib']}Mi", heartbeat=NOW,
                                  links=links))
    return out


def synthetic_nodes(count: int = 1000, gpus: int = 8,
                    topology: str | None = None) -> list[dict[str, Any]]:
    # 8 × A100-40GB, 192 cores, 2 TiB: enough CPU that 10,000 trace pods (about 130,000
    # cores of requests) are bound by GPUs, not CPU.
    out = []
    for i in range(count):
        devices, links = _gpus(f"syn-{i:04d}", gpus, topology)
        out.append(builders.node(f"syn-{i:04d}", devices, cpu="192", memory="2Ti",
                                 heartbeat=NOW, links=links))
    return out


def trace_pods(limit: int | None = None, suffix: str = "") -> list[dict[str, Any]]:
    out = []
    with _open(PODS_CSV) as f:
        for row in csv.DictReader(f):
            gpus, milli = int(row["num_gpu"]), int(row["gpu_milli"])
            res = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi"}
            if gpus:
                share = max(1, math.ceil(milli / 10))
                c = builders.container(gpus=gpus, percent=share, cores=share, **res)
            else:
                c = builders.container(gpus=None, **res)
            out.append(builders.pod(row["name"] + suffix, [c]))
            if limit is not None and len(out) >= limit:
                break
    return out


ZONE = "topology.kubernetes.io/zone"


def zoned(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, node in enumerate(nodes):
        node["metadata"]["labels"][ZONE] = f"zone-{i % 4}"
    return nodes


def constrain(pods: list[dict[str, Any]], fraction: float) -> list[dict[str, Any]]:
    """Give ``fraction`` of the pods (evenly spaced) a group label and, by turns, one of
    the rules of Deployments: anti-affinity per node, hard or soft zone spread."""
    if fraction <= 0:
        return pods
    step = max(1, round(1 / fraction))
    for i in range(0, len(pods), step):
        k = i // step
        group = {"app": f"group-{k % 40}"}
        pod = pods[i]
        pod["metadata"]["labels"] = group
        if k % 3 == 0:
            pod["spec"]["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": group},
                    "topologyKey": "kubernetes.io/hostname"}]}}
        else:
            pod["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": ZONE, "labelSelector": {"matchLabels": group},
                "whenUnsatisfiable": "DoNotSchedule" if k % 3 == 1 else "ScheduleAnyway"}]
    return pods
