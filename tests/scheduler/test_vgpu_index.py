"""The GPU index's vector helpers, against the plain numpy they stand in for."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vgpu_scheduler.plugins.gpu.share import fit_mask
from vgpu_scheduler.plugins.gpu.share import index as ix


@given(hnp.arrays(np.bool_, st.tuples(st.integers(0, 50), st.just(ix.WIDTH))))
def test_rows_true_counts_each_rows_flags(ok: np.ndarray) -> None:
    assert fit_mask.rows_true(ok).tolist() == ok.sum(axis=1).tolist()


@given(hnp.arrays(np.bool_, st.tuples(st.integers(1, 20), st.just(2 * ix.WIDTH))))
def test_rows_true_of_a_view_or_another_width(ok: np.ndarray) -> None:
    # A strided view and a row of another width take the general path.
    strided = ok[:, ::2]
    assert fit_mask.rows_true(strided).tolist() == strided.sum(axis=1).tolist()
    assert fit_mask.rows_true(ok).tolist() == ok.sum(axis=1).tolist()


def test_a_gpu_claimed_past_what_the_int32_column_holds_reads_as_full() -> None:
    # Forged or late slices can sum past 2**31 MiB on one GPU: the narrow memory column
    # must take it (as no room), not raise while the snapshot is updated.
    from vgpu import builders
    from vgpu.devices import Usage
    from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
    from vgpu_scheduler.framework.snapshot import Snapshot
    index = ix.GpuIndex(1.0)
    node = NodeInfo(parse_node(builders.node("a", builders.devices("a", 2, memory_mib=1000))),
                    1.0, gpu_usage={"GPU-a-0": Usage(3 * 2**30, 10, 1)})
    snapshot = Snapshot(index.columns())
    snapshot.set(node)
    memory = snapshot.column(ix.GPU_MEMORY)[snapshot.positions["a"]]
    assert memory[0] == -1 and memory[1] == 1000
