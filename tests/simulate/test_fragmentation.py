"""The FGD fragmentation measure, table-driven from the paper's definition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu_scheduler.placement.shapes import Shape, take_gpus
from vgpu_simulate.baselines.fragmentation import (
    Choice,
    FragModel,
    fgd_score_from_delta,
    node_fragmentation,
    typical_shapes,
)

HALF = Shape(4000, 500, 1)  # half a GPU
WHOLE = Shape(8000, 1000, 1)
TWO = Shape(16000, 1000, 2)
CPU = Shape(2000, 0, 0)


@pytest.mark.parametrize(("cpu_left", "gpu_left", "typical", "expected"), [
    # An idle 2-GPU node and whole-GPU tasks: everything is usable, nothing fragmented.
    (32000, [1000, 1000], [(WHOLE, 1.0)], 0.0),
    # One GPU is 30 % used: its 700 free milli cannot take a whole-GPU task.
    (32000, [700, 1000], [(WHOLE, 1.0)], 700.0),
    # ... but half-GPU tasks fit on both GPUs.
    (32000, [700, 1000], [(HALF, 1.0)], 0.0),
    # Too little CPU left: the task cannot come, all idle GPU is fragmented (Q4).
    (3000, [700, 1000], [(HALF, 1.0)], 1700.0),
    # Not enough GPUs with the share (needs two whole GPUs): all idle GPU counts (Q2).
    (32000, [700, 1000], [(TWO, 1.0)], 1700.0),
    # A CPU-only task uses no GPU: all idle GPU counts, whatever the CPU.
    (32000, [700, 1000], [(CPU, 1.0)], 1700.0),
    # Weighted by frequency: 0.5 × 700 (whole) + 0.5 × 0 (half).
    (32000, [700, 1000], [(WHOLE, 0.5), (HALF, 0.5)], 350.0),
    # A model the task does not allow: no access, all idle GPU counts.
    (32000, [1000], [(Shape(1000, 500, 1, ("T4",)), 1.0)], 1000.0),
    # A full node has nothing to fragment.
    (32000, [0, 0], [(HALF, 0.5), (CPU, 0.5)], 0.0),
])
def test_node_fragmentation(cpu_left: int, gpu_left: list[int],
                            typical: list[tuple[Shape, float]], expected: float) -> None:
    assert node_fragmentation(cpu_left, gpu_left, "G2", typical) == pytest.approx(expected)
    assert FragModel(typical).fragmentation(cpu_left, gpu_left, "G2") == pytest.approx(expected)


def test_typical_shapes_cover_95_percent_most_frequent_first() -> None:
    shapes = [HALF] * 60 + [WHOLE] * 30 + [TWO] * 6 + [CPU] * 4
    typical = typical_shapes(shapes)
    # 60 + 30 = 90 < 95, so TWO (6) is needed too; CPU (4) is left out; renormalised.
    assert [s for s, _ in typical] == [HALF, WHOLE, TWO]
    assert [round(p, 4) for _, p in typical] == [round(60 / 96, 4), round(30 / 96, 4),
                                                 round(6 / 96, 4)]
    assert typical_shapes([]) == ()


def test_typical_shapes_break_count_ties_larger_shape_first() -> None:
    typical = typical_shapes([HALF, WHOLE], threshold=0.5)
    assert [s for s, _ in typical] == [WHOLE]


@pytest.mark.parametrize(("delta", "score"), [
    (0.0, 50), (-1000.0, 73), (1000.0, 26), (-50_000.0, 100), (50_000.0, 0), (-19.0, 50),
    (19.0, 49),
])
def test_fgd_score_truncates_like_the_artifact(delta: float, score: int) -> None:
    assert fgd_score_from_delta(delta) == score


@pytest.mark.parametrize(("gpu_left", "milli", "gpus", "taken"), [
    ([1000, 300, 1000, 1000], 1000, 2, (0, 2)),
    ([1000, 600, 700], 500, 2, (1, 2)),  # the fullest GPUs that still fit
    ([1000, 300], 1000, 2, None),
])
def test_take_gpus(gpu_left: list[int], milli: int, gpus: int,
                   taken: tuple[int, ...] | None) -> None:
    assert take_gpus(gpu_left, milli, gpus) == taken


def test_best_choice_puts_a_share_where_fragmentation_grows_least() -> None:
    model = FragModel([(HALF, 0.5), (WHOLE, 0.5)])
    # GPU 0 has 500 free: filling it leaves GPU 1 whole; the other way fragments both.
    choice = model.best_choice(32000, [500, 1000], "G2", HALF)
    assert choice is not None and choice.gpus == (0,)
    assert choice.delta == pytest.approx(-250.0)
    other = model.best_choice(32000, [1000, 1000], "G2", HALF)
    assert other == Choice(fgd_score_from_delta(250.0), (0,), pytest.approx(250.0))


def test_best_choice_of_whole_gpus_and_cpu_only_tasks() -> None:
    model = FragModel([(WHOLE, 1.0)])
    assert model.best_choice(32000, [300, 1000, 1000], "G2", TWO) == Choice(
        50, (1, 2), 0.0)
    assert model.best_choice(32000, [300, 1000], "G2", TWO) is None
    # A CPU task that leaves too little CPU for the whole-GPU tasks fragments the GPU.
    cpu = model.best_choice(10000, [1000], "G2", Shape(4000, 0, 0))
    assert cpu is not None and cpu.gpus == () and cpu.delta == pytest.approx(1000.0)


gpu_lists = st.lists(st.sampled_from([0, 50, 230, 460, 500, 540, 770, 1000]),
                     min_size=1, max_size=8)
shape_st = st.builds(Shape, st.sampled_from([0, 1000, 4000, 12000, 40000]),
                     st.sampled_from([0, 230, 500, 1000]), st.integers(0, 4))


@settings(max_examples=200, deadline=None)
@given(gpu_left=gpu_lists, cpu_left=st.integers(0, 64000),
       shapes=st.lists(shape_st, min_size=1, max_size=12))
def test_the_cached_model_equals_the_definition(gpu_left: list[int], cpu_left: int,
                                                shapes: list[Shape]) -> None:
    shapes = [s if (s.milli_gpu > 0) == (s.gpus > 0) else Shape(s.milli_cpu, 0, 0)
              for s in shapes]
    typical = typical_shapes(shapes)
    model = FragModel(typical)
    expected = node_fragmentation(cpu_left, gpu_left, "G2", typical)
    assert model.fragmentation(cpu_left, gpu_left, "G2") == pytest.approx(expected)
    # order of the GPUs does not matter, and the cached value is stable
    assert model.fragmentation(cpu_left, list(reversed(gpu_left)), "G2") == pytest.approx(
        expected)
