"""The workload shipped with vgpu: the FGD paper's node list and pod lists (``data/``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from vgpu_simulate.trace import TraceError, TraceNode, TracePod, load_nodes, load_pods

NODE_FILE = "openb_node_list_gpu_node.csv.gz"
DEFAULT_VARIANT = "default"
#: Pod lists shipped, each with published results to compare with.
VARIANTS: tuple[str, ...] = (
    "default", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "cpu050", "cpu100", "cpu200", "cpu250",
)


def pod_file(variant: str) -> str:
    if variant not in VARIANTS:
        raise TraceError(f"no bundled pod list {variant!r}; bundled: {', '.join(VARIANTS)}")
    return f"openb_pod_list_{variant}.csv.gz"


@contextmanager
def _path(name: str) -> Iterator[Path]:
    traversable = resources.files("vgpu_simulate").joinpath("data").joinpath(name)
    with resources.as_file(traversable) as p:
        yield p


def nodes() -> list[TraceNode]:
    with _path(NODE_FILE) as p:
        return load_nodes(p)


def pods(variant: str = DEFAULT_VARIANT) -> list[TracePod]:
    with _path(pod_file(variant)) as p:
        return load_pods(p)
