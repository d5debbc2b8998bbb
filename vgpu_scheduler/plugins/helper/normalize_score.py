"""kube-scheduler's default score normalization (``helper.DefaultNormalizeScore``)."""

from __future__ import annotations

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
