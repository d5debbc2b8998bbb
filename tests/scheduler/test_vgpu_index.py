"""The GPU index's vector helpers, against the plain numpy they stand in for."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vgpu_scheduler.plugins.gpu.share import index as ix


@given(hnp.arrays(np.bool_, st.tuples(st.integers(0, 50), st.just(ix.WIDTH))))
def test_rows_true_counts_each_rows_flags(ok: np.ndarray) -> None:
    assert ix.rows_true(ok).tolist() == ok.sum(axis=1).tolist()


@given(hnp.arrays(np.bool_, st.tuples(st.integers(1, 20), st.just(2 * ix.WIDTH))))
def test_rows_true_of_a_view_or_another_width(ok: np.ndarray) -> None:
    # A strided view and a row of another width take the general path.
    strided = ok[:, ::2]
    assert ix.rows_true(strided).tolist() == strided.sum(axis=1).tolist()
    assert ix.rows_true(ok).tolist() == ok.sum(axis=1).tolist()
