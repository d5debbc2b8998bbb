from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from vgpu_simulate import bundled
from vgpu_simulate.trace import (
    TraceError,
    TraceNode,
    TracePod,
    gpu_capacity_milli,
    load_nodes,
    load_pods,
)

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,64000,262144,2,P100
openb-node-0001,32000,131072,0,
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase
openb-pod-0000,12000,16384,1,1000,,LS,Running
openb-pod-0001,6000,12288,1,460,,LS,Running
openb-pod-0002,4000,0,0,0,,BE,Running
openb-pod-0003,8000,1024,2,1000,V100M16|V100M32,LS,Pending
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["nodes.csv", "nodes.csv.gz"])
def test_nodes_load_plain_or_gzipped(tmp_path: Path, name: str) -> None:
    nodes = load_nodes(write(tmp_path, name, NODES))
    assert nodes == [TraceNode("openb-node-0000", 64000, 262144, 2, "P100"),
                     TraceNode("openb-node-0001", 32000, 131072, 0, "")]
    assert gpu_capacity_milli(nodes) == 2000


def test_pods_load_with_models_and_shares(tmp_path: Path) -> None:
    pods = load_pods(write(tmp_path, "pods.csv", PODS))
    assert pods[1] == TracePod("openb-pod-0001", 6000, 12288, 1, 460)
    assert pods[1].is_gpu_share and not pods[0].is_gpu_share
    assert pods[3].gpu_spec == ("V100M16", "V100M32") and pods[3].total_gpu_milli == 2000


def test_nomem_lists_mean_no_memory_request(tmp_path: Path) -> None:
    text = "name,cpu_milli,num_gpu,gpu_milli,gpu_spec\nopenb-pod-0000,1000,1,500,\n"
    assert load_pods(write(tmp_path, "p.csv", text))[0].memory_mib is None


@pytest.mark.parametrize(("text", "message"), [
    ("sn,cpu_milli,gpu,model\nn,1,1,T4\n", "missing column(s) memory_mib"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,x,1,1,T4\n", ":2: cpu_milli is 'x', not a number"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1.5,1,1,T4\n", "not a whole number"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,-1,1,1,T4\n", "cpu_milli is -1"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", "has 2 GPUs but no model"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n", "node n appears twice"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1\n", "expected 5 fields"),
    ("sn,cpu_milli,memory_mib,gpu,model\n", "no nodes"),
])
def test_bad_node_lists_say_where(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_nodes(write(tmp_path, "n.csv", text))


@pytest.mark.parametrize(("row", "message"), [
    ("p,1000,1,1,1200,", "gpu_milli is 1200"),
    ("p,1000,1,2,0,", "asks for 2 GPUs with gpu_milli 0"),
    ("p,1000,1,0,500,", "gpu_milli 500 but num_gpu 0"),
    (",1000,1,0,0,", "name is empty"),
])
def test_bad_pod_rows_say_what(tmp_path: Path, row: str, message: str) -> None:
    text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + row + "\n"
    with pytest.raises(TraceError, match=message):
        load_pods(write(tmp_path, "p.csv", text))


def test_unreadable_files_are_trace_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        load_pods(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="not a valid gzip file"):
        load_pods(bad)


def test_bundled_trace_is_the_papers() -> None:
    nodes = bundled.nodes()
    assert len(nodes) == 1213 and gpu_capacity_milli(nodes) == 6212 * 1000
    pods = bundled.pods()
    assert len(pods) == 8152
    assert sum(p.total_gpu_milli for p in pods) == 6086800
    assert sum(1 for p in pods if p.is_gpu_share) == 3078
    # Every share in the trace is a whole percent, so the vGPU mapping is exact.
    assert all(p.gpu_milli % 10 == 0 for v in bundled.VARIANTS for p in bundled.pods(v))


def test_unknown_bundled_variant_lists_the_known_ones() -> None:
    with pytest.raises(TraceError, match="bundled: default, gpushare40"):
        bundled.pods("nope")
