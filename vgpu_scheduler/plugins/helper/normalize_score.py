"""kube-scheduler's default score normalization (``helper.DefaultNormalizeScore``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX_SCORE = 100


def default_normalize(scores: list[float], reverse: bool = False) -> None:
    """Scale ``scores`` in place so the highest becomes 100 (integer arithmetic, as kube);
    ``reverse`` turns "more is worse" counts into scores. All zero: unchanged, or all 100
    when reversed."""
    top = max((int(s) for s in scores), default=0)
    if top == 0:
        if reverse:
            scores[:] = [float(MAX_SCORE)] * len(scores)
        return
    for i, value in enumerate(scores):
        scaled = MAX_SCORE * int(value) // top
        scores[i] = float(MAX_SCORE - scaled if reverse else scaled)


def default_normalize_array(raw: npt.NDArray[np.int64],
                            reverse: bool = False) -> npt.NDArray[np.float64]:
    """:func:`default_normalize` of many nodes' integer scores at once (kube's maximum
    starts at 0)."""
    top = max(int(raw.max()), 0) if len(raw) else 0
    if top == 0:
        return np.full(len(raw), float(MAX_SCORE)) if reverse else raw.astype(np.float64)
    scaled = MAX_SCORE * raw // top
    return (MAX_SCORE - scaled if reverse else scaled).astype(np.float64)
